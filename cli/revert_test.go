package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// backendProject is a project on one pair of backends, for the stories
// that must hold on both state stores.
type backendProject struct {
	name    string
	schema  string  // the models' schema: demo (the example) or shop
	perHour float64 // events rows per hour
	create  func(t *testing.T) string
}

var backendProjects = []backendProject{
	{name: "duckdb+sqlite", schema: "demo", perHour: 12, create: initProject},
	{name: "postgres", schema: "shop", perHour: 4, create: pgProject},
}

// onBothStores runs story on the example project (DuckDB, SQLite state)
// and on testdata/pgproject (PostgreSQL for both).
func onBothStores(t *testing.T, story func(t *testing.T, p backendProject, dir string)) {
	t.Helper()
	for _, p := range backendProjects {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			story(t, p, p.create(t))
		})
	}
}

// eventsTable is the physical table of p's events model at version.
func (p backendProject) eventsTable(version string) string {
	return "gapless__" + p.schema + "." + p.schema + "__events__" + version
}

// planJSONAt runs `plan --json` at the clock now and returns its summary.
func planJSONAt(t *testing.T, now time.Time, dir string, args ...string) planSummary {
	t.Helper()
	var sum planSummary
	require.NoError(t, json.Unmarshal([]byte(mustRunClock(t, now, dir, append([]string{"plan", "--json"}, args...)...)), &sum))
	return sum
}

// retainedTables are the tables a janitor report kept by snapshot_ttl.
func retainedTables(rep janitorReport) []string {
	out := []string{}
	for _, r := range rep.Retained {
		out = append(out, r.Table)
	}
	return out
}

// deployBreakingEventsChange deploys prod at clock0 (the events model at
// v1), then a breaking change of the events model at clock0+1h (v2), then
// runs the scheduler at t1, which advances v2 through 05:00 on the 2nd.
// It returns v1 and v2.
func deployBreakingEventsChange(t *testing.T, p backendProject, dir string) (string, string) {
	t.Helper()
	mustRunClock(t, clock0, dir, "plan", "--auto-apply", "--execution-time", t0)
	v1 := statusOf(t, dir, "--execution-time", t0)[p.schema+".events"].Version
	editModel(t, dir, "events.sql", "1.5 AS amount", "2.5 AS amount")
	mustRunClock(t, clock0.Add(time.Hour), dir, "plan", "--auto-apply", "--execution-time", t0)
	mustRunClock(t, clock0.Add(2*time.Hour), dir, "run", "--execution-time", t1)
	v2 := statusOf(t, dir, "--execution-time", t1)[p.schema+".events"].Version
	require.NotEqual(t, v1, v2)
	return v1, v2
}

// Scenario: a revert is a view swap plus the tail. prod's events model
// moves from v1 to v2 (a breaking change, promoted at clock0+1h), and the
// scheduler advances v2 by five hours. The janitor a day later drops
// nothing of v1: nothing serves it, but its snapshot_ttl (7d by default)
// has not passed since v2 replaced it, so it is reported retained and its
// table stays. Reverting the change in the project plans v1 again: the plan
// reuses v1's table and intervals and computes only the five hours v1
// missed since, and prod then serves v1 with every row.
func TestRevertAfterJanitorReusesTheRetainedTable(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, p backendProject, dir string) {
		v1, v2 := deployBreakingEventsChange(t, p, dir)

		rep := janitorAt(t, dir, clock0.Add(24*time.Hour))
		require.NotContains(t, rep.Tables, p.eventsTable(v1))
		require.Contains(t, retainedTables(rep), p.eventsTable(v1))
		for _, r := range rep.Retained {
			if r.Table == p.eventsTable(v1) {
				require.Equal(t, clock0.Add(time.Hour), r.UnusedSince, "since v2 replaced it")
				require.Equal(t, clock0.Add(time.Hour+week), r.ExpiresAt)
			}
		}
		require.True(t, tableExists(t, dir, "gapless__"+p.schema, p.schema+"__events__"+v1))
		r := runClock(t, clock0.Add(24*time.Hour), dir, "janitor", "--execution-time", rfc(clock0.Add(24*time.Hour)))
		require.Equal(t, ExitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, "until their snapshot_ttl passes")
		require.Contains(t, r.stdout, "table "+p.eventsTable(v1)+", unused since 2024-03-01T11:30:00Z, until 2024-03-08T11:30:00Z")

		editModel(t, dir, "events.sql", "2.5 AS amount", "1.5 AS amount")
		sum := planJSONAt(t, clock0.Add(24*time.Hour), dir, "--execution-time", t1)
		var events *backfillRow
		for i, b := range sum.Backfills {
			if b.Name == p.schema+".events" {
				events = &sum.Backfills[i]
			}
		}
		require.NotNil(t, events)
		require.Equal(t, v1, events.Version, "the revert brings v1 back")
		require.Equal(t, []string{"[2024-01-02T00:00:00Z, 2024-01-02T05:00:00Z)"}, events.Ranges, "only what v1 missed since")
		require.Equal(t, 5, events.Buckets)

		out := mustRunClock(t, clock0.Add(24*time.Hour), dir, "plan", "--auto-apply", "--execution-time", t1)
		require.Contains(t, out, "computed [2024-01-02T00:00:00Z, 2024-01-02T05:00:00Z)")
		st := statusOf(t, dir, "--execution-time", t1)
		require.Equal(t, v1, st[p.schema+".events"].Version)
		require.Equal(t, []string{"[2024-01-01T00:00:00Z, 2024-01-02T05:00:00Z)"}, st[p.schema+".events"].Covered)
		require.Equal(t, 29*p.perHour, count(t, dir, p.schema+".events"))
		require.NotEqual(t, v2, st[p.schema+".events"].Version)
	})
}

// Scenario: snapshot_ttl: 2d in gapless.yaml. v1 of the events model stops
// being served at clock0+1h; the janitor a minute before two days have
// passed keeps its table, the janitor at two days drops it with its
// intervals (a revert then recomputes everything), and --snapshot-ttl on
// the command line overrides the file (never: nothing is dropped; a bad
// value is a usage error).
func TestSnapshotTTLExpiryDropsTheUnservedVersion(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, p backendProject, dir string) {
		yaml := filepath.Join(dir, "gapless.yaml")
		src, err := os.ReadFile(yaml)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(yaml, append(src, "\nsnapshot_ttl: 2d\n"...), 0o644))
		v1, _ := deployBreakingEventsChange(t, p, dir)
		unused := clock0.Add(time.Hour)

		rep := janitorAt(t, dir, unused.Add(48*time.Hour-time.Minute))
		require.Contains(t, retainedTables(rep), p.eventsTable(v1))
		require.NotContains(t, rep.Tables, p.eventsTable(v1))

		rep = janitorAt(t, dir, unused.Add(48*time.Hour), "--snapshot-ttl", "never")
		require.Empty(t, rep.Tables, "never: kept")
		require.Contains(t, retainedTables(rep), p.eventsTable(v1))
		r := run(t, dir, "janitor", "--snapshot-ttl", "soon")
		require.Equal(t, ExitUsage, r.code)
		require.Contains(t, r.stderr, `--snapshot-ttl: bad duration "soon"`)

		rep = janitorAt(t, dir, unused.Add(48*time.Hour))
		require.Contains(t, rep.Tables, p.eventsTable(v1))
		require.NotContains(t, retainedTables(rep), p.eventsTable(v1))
		require.False(t, tableExists(t, dir, "gapless__"+p.schema, p.schema+"__events__"+v1))

		editModel(t, dir, "events.sql", "2.5 AS amount", "1.5 AS amount")
		sum := planJSONAt(t, unused.Add(48*time.Hour), dir, "--execution-time", t1)
		for _, b := range sum.Backfills {
			if b.Name == p.schema+".events" {
				require.Equal(t, []string{"[2024-01-01T00:00:00Z, 2024-01-02T05:00:00Z)"}, b.Ranges, "dropped: recomputed whole")
			}
		}
	})
}

// Scenario: a plan built before a run advanced the incumbent is refused at
// promotion (strict), after it built its new tables. The refusal ends its
// application (recorded as ended, not in flight): the janitor an hour later
// does not keep its versions as those of an unfinished plan ("Kept the
// versions of plan X: its application has not finished" is gone), but as
// any unserved versions, by snapshot_ttl from the refusal; after the TTL
// they are dropped. prod's versions are never touched.
func TestRefusedPlanIsEndedNotInFlight(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, p backendProject, dir string) {
		mustRunClock(t, clock0, dir, "plan", "--auto-apply", "--execution-time", t0)
		editModel(t, dir, "events.sql", "1.5 AS amount", "2.5 AS amount")
		mustRunClock(t, clock0, dir, "plan", "--out", "plan.json", "--execution-time", t1)
		mustRunClock(t, clock0, dir, "run", "--execution-time", t1)
		r := runClock(t, clock0, dir, "apply", "plan.json")
		require.Equal(t, ExitFailure, r.code, r.stdout)
		require.Contains(t, r.stderr, "was not promoted")

		var pl struct {
			ID        string `json:"id"`
			Snapshots []struct {
				Name    string `json:"name"`
				Version string `json:"version"`
			} `json:"snapshots"`
		}
		data, err := os.ReadFile(filepath.Join(dir, "plan.json"))
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(data, &pl))
		prod := statusOf(t, dir, "--execution-time", t1)
		var newEvents string
		for _, s := range pl.Snapshots {
			if s.Name == p.schema+".events" {
				newEvents = p.eventsTable(s.Version)
				require.NotEqual(t, prod[p.schema+".events"].Version, s.Version)
			}
		}
		require.NotEmpty(t, newEvents)

		rep := janitorAt(t, dir, clock0.Add(time.Hour))
		require.Empty(t, rep.InFlight, "a refused plan is not in flight")
		require.Contains(t, retainedTables(rep), newEvents)
		for _, rt := range rep.Retained {
			if rt.Table == newEvents {
				require.Equal(t, clock0, rt.UnusedSince, "since its refusal")
			}
		}
		r = runClock(t, clock0.Add(time.Hour), dir, "janitor", "--dry-run", "--execution-time", rfc(clock0.Add(time.Hour)))
		require.Equal(t, ExitOK, r.code, r.stderr)
		require.NotContains(t, r.stdout, "its application has not finished")

		rep = janitorAt(t, dir, clock0.Add(week))
		require.Contains(t, rep.Tables, newEvents)
		for name, row := range prod {
			require.NotContains(t, rep.Tables, "gapless__"+p.schema+"."+strings.ReplaceAll(name, ".", "__")+"__"+row.Version, "%s: prod serves it", name)
		}
		require.Equal(t, 29*p.perHour, count(t, dir, p.schema+".events"))
	})
}

// Scenario: two plans are saved against prod at plan p1; the second is
// applied; applying the first is refused before its backfill, and the
// message says, in the user's words, which plan changed prod, when and by
// whom, what the refused plan was built against, and what to do.
func TestStalePlanFileIsRefusedNamingTheWinner(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	mustRunClock(t, clock0, dir, "plan", "--auto-apply", "--execution-time", t0)
	first := environmentsByName(t, dir)["prod"].PlanID
	editModel(t, dir, "events.sql", "1.5 AS amount", "2.5 AS amount")
	mustRunClock(t, clock0, dir, "plan", "--out", "a.json", "--execution-time", t0)
	editModel(t, dir, "events.sql", "2.5 AS amount", "3.5 AS amount")
	mustRunClock(t, clock0.Add(time.Minute), dir, "plan", "--auto-apply", "--execution-time", t0)
	winner := environmentsByName(t, dir)["prod"].PlanID

	r := runClock(t, clock0.Add(6*time.Minute), dir, "apply", "a.json")
	require.Equal(t, ExitFailure, r.code, r.stdout)
	require.Contains(t, r.stderr, "stage check: prod was changed by plan "+winner+" (promoted 5m ago by "+actorName()+
		") after this plan was built against plan "+first+"; re-run `gapless plan prod`")
	require.NotContains(t, r.stdout, "Backfilled:")
	require.Equal(t, winner, environmentsByName(t, dir)["prod"].PlanID)
}

// Scenario: `gapless rollback`. prod moves from plan p1 (events at v1) to
// p2 (v2). The rollback serves p1's versions again, computing nothing, and
// says which views it repoints; a second rollback returns to p2's. After
// the scheduler advanced v2, the rollback is refused by the strict
// promotion, naming the model and the range v1 misses, and prod keeps v2.
// Once the janitor dropped v1 (--snapshot-ttl 0), the rollback is refused
// before anything is written, naming the dropped table. An environment
// that does not exist has nothing to roll back to.
func TestRollbackCommand(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, p backendProject, dir string) {
		events := p.schema + ".events"
		mustRunClock(t, clock0, dir, "plan", "--auto-apply", "--execution-time", t0)
		p1 := environmentsByName(t, dir)["prod"].PlanID
		v1 := statusOf(t, dir, "--execution-time", t0)[events].Version
		sum1 := queryRows(t, dir, "SELECT sum(amount)::float8 FROM "+events).Rows[0][0]
		editModel(t, dir, "events.sql", "1.5 AS amount", "2.5 AS amount")
		mustRunClock(t, clock0.Add(time.Hour), dir, "plan", "--auto-apply", "--execution-time", t0)
		p2 := environmentsByName(t, dir)["prod"].PlanID
		v2 := statusOf(t, dir, "--execution-time", t0)[events].Version
		sum2 := queryRows(t, dir, "SELECT sum(amount)::float8 FROM "+events).Rows[0][0]
		require.NotEqual(t, sum1, sum2)

		out := mustRunClock(t, clock0.Add(2*time.Hour), dir, "rollback", "--execution-time", t0)
		require.Contains(t, out, "Rolling prod back from plan "+p2+" to plan "+p1+":")
		require.Contains(t, out, "nothing is computed")
		require.Contains(t, out, "  ~ "+events+"  "+v2+" -> "+v1+"\n")
		require.NotContains(t, out, "batches")
		require.Contains(t, out, "Rolled prod back to plan "+p1)
		require.Equal(t, v1, statusOf(t, dir, "--execution-time", t0)[events].Version)
		require.Equal(t, sum1, queryRows(t, dir, "SELECT sum(amount)::float8 FROM "+events).Rows[0][0])
		require.Equal(t, 24*p.perHour, count(t, dir, events))

		out = mustRunClock(t, clock0.Add(3*time.Hour), dir, "rollback", "prod", "--execution-time", t0)
		require.Contains(t, out, "  ~ "+events+"  "+v1+" -> "+v2+"\n", "rolling back twice returns to p2")
		require.Equal(t, v2, statusOf(t, dir, "--execution-time", t0)[events].Version)
		require.Equal(t, sum2, queryRows(t, dir, "SELECT sum(amount)::float8 FROM "+events).Rows[0][0])

		mustRunClock(t, clock0.Add(4*time.Hour), dir, "run", "--execution-time", t1)
		r := runClock(t, clock0.Add(5*time.Hour), dir, "rollback", "--execution-time", t1)
		require.Equal(t, ExitFailure, r.code, r.stdout)
		require.Contains(t, r.stderr, "gapless: prod: rollback to plan ")
		require.Contains(t, r.stderr, events+" [historical_gap] is missing [2024-01-02T00:00:00Z, 2024-01-02T05:00:00Z) (prod serves it through 2024-01-02T05:00:00Z)")
		require.Contains(t, r.stderr, "run `gapless plan prod`")
		require.Equal(t, v2, statusOf(t, dir, "--execution-time", t1)[events].Version)
		require.Equal(t, 29*p.perHour, count(t, dir, events))

		rep := janitorAt(t, dir, clock0.Add(6*time.Hour), "--snapshot-ttl", "0")
		require.Contains(t, rep.Tables, p.eventsTable(v1))
		r = runClock(t, clock0.Add(7*time.Hour), dir, "rollback", "--execution-time", t1)
		require.Equal(t, ExitFailure, r.code, r.stdout)
		require.Contains(t, r.stderr, "the janitor dropped what it served that prod does not serve now")
		require.Contains(t, r.stderr, events+" at version "+v1+" (table "+p.eventsTable(v1)+")")
		require.Empty(t, r.stdout, "refused before anything is written")

		r = run(t, dir, "rollback", "dev")
		require.Equal(t, ExitFailure, r.code)
		require.Contains(t, r.stderr, "gapless: nothing to roll back to: environment dev does not exist")
	})
}

// Scenario: an apply whose backfill failed (a model's SQL fails at run
// time) is neither promoted nor refused: it may be resumed, so within
// --grace the janitor keeps its versions as in flight; after the grace it
// keeps them by snapshot_ttl from the apply's last activity, and once that
// has passed it drops them, although no history event names the plan (the
// janitor reads every saved plan, not only recent ones).
func TestJanitorDropsAnAbandonedPlanAfterItsTTL(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	mustRunClock(t, clock0, dir, "plan", "--auto-apply", "--execution-time", t0)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "models", "bad.sql"), []byte(`MODEL (
  name demo.bad,
  kind INCREMENTAL_BY_TIME_RANGE (time_column ts),
  cron '@daily'
);

SELECT e.event_ts AS ts, CAST('x' || e.customer_id AS INTEGER) AS v
FROM demo.events AS e
WHERE e.event_ts BETWEEN @start_ts AND @end_ts
`), 0o644))
	r := runClock(t, clock0, dir, "plan", "--auto-apply", "--execution-time", t0)
	require.Equal(t, ExitFailure, r.code, r.stdout)
	require.Contains(t, r.stderr, "model demo.bad")
	var bad string
	for _, row := range queryRows(t, dir, "SELECT table_name FROM information_schema.tables WHERE table_name LIKE 'demo__bad__%'").Rows {
		bad = "gapless__demo." + row[0].(string)
	}
	require.NotEmpty(t, bad, "the failed apply created the table of demo.bad")

	rep := janitorAt(t, dir, clock0.Add(time.Hour))
	require.Len(t, rep.InFlight, 1)
	require.NotContains(t, rep.Tables, bad)
	rep = janitorAt(t, dir, clock0.Add(2*24*time.Hour))
	require.Empty(t, rep.InFlight)
	require.Contains(t, retainedTables(rep), bad)
	rep = janitorAt(t, dir, clock0.Add(week))
	require.Contains(t, rep.Tables, bad)
	require.Equal(t, float64(24*12), count(t, dir, "demo.events"))
}
