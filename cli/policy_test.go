package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/internal/pgtest"
	"github.com/gapless-dev/gapless/internal/trinotest"
	"github.com/gapless-dev/gapless/plan"
)

// The times of seed 000's story, on an hourly parent and child.
const (
	storyDeploy = "2024-01-02T00:30:00Z" // prod deployed; the new plan is built
	storyRun    = "2024-01-02T01:30:00Z" // the scheduler advances the incumbents through 01:00
	storyApply  = "2024-01-02T01:35:00Z" // the saved plan is applied
	storyLater  = "2024-01-02T02:35:00Z" // one hour after the apply: the next run
	storyTail   = "[2024-01-02T00:00:00Z, 2024-01-02T01:00:00Z)"
)

// runAt runs the CLI in-process with its clock at now and --execution-time
// now: the wall-clock stamps of state (accepted-at, repaired-at) and the
// execution time agree, as they do on a real machine.
func runAt(t *testing.T, wd, now string, args ...string) result {
	t.Helper()
	clock, err := time.Parse(time.RFC3339, now)
	require.NoError(t, err)
	var out, errb bytes.Buffer
	code := Run(context.Background(), append(append([]string(nil), args...), "--execution-time", now), Env{
		Stdout: &out, Stderr: &errb,
		Clock: clockwork.NewFakeClockAt(clock),
		Getwd: func() (string, error) { return wd, nil },
	})
	return result{code, out.String(), errb.String()}
}

// mustRunAt is runAt for a command that must succeed; it returns stdout.
func mustRunAt(t *testing.T, wd, now string, args ...string) string {
	t.Helper()
	r := runAt(t, wd, now, args...)
	require.Equal(t, ExitOK, r.code, "%v\nstdout: %s\nstderr: %s", args, r.stdout, r.stderr)
	return r.stdout
}

// storyBackend returns the gapless.yaml lines naming a fresh warehouse and
// state (and the models' dialect), and that dialect.
type storyBackend func(t *testing.T) (yaml, dialect string)

func embeddedBackend(*testing.T) (string, string) {
	return "model_defaults:\n  dialect: duckdb\n  start: '2024-01-01'\n", "duckdb"
}

func postgresBackend(t *testing.T) (string, string) {
	url := pgtest.NewDatabase(t)
	return "warehouse: " + url + "\nstate: " + url + "\nmodel_defaults:\n  dialect: postgres\n  start: '2024-01-01'\n", "postgres"
}

// trinoBackend is an empty test catalog of the Trino cluster as the warehouse
// and a fresh PostgreSQL database as the state store.
func trinoBackend(t *testing.T) (string, string) {
	return trinoYAML(t, trinotest.NewCatalog(t)), "trino"
}

// quarterHours is a FROM item of one row (g.ts) every 15 minutes from
// @start_ts through @end_ts, in dialect: DuckDB and PostgreSQL have the
// table function generate_series, Trino the array function sequence.
func quarterHours(dialect string) string {
	if dialect == "trino" {
		return "UNNEST(sequence(@start_ts, @end_ts, INTERVAL '15' MINUTE)) AS g(ts)"
	}
	return "generate_series(@start_ts, @end_ts, INTERVAL '15' MINUTE) AS g(ts)"
}

// storyProject writes seed 000's project: an hourly incremental parent
// (s.hits, four rows an hour of value v = 1) and an hourly incremental
// child (s.hourly, per hour the count and the sum of v), in the backend's
// dialect. extra is appended to gapless.yaml.
func storyProject(t *testing.T, backend storyBackend, extra string) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "models"), 0o755))
	yaml, dialect := backend(t)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gapless.yaml"), []byte(yaml+extra), 0o644))
	files := map[string]string{
		"hits.sql": `MODEL (
  name s.hits,
  kind INCREMENTAL_BY_TIME_RANGE (time_column ts),
  cron '@hourly'
);

SELECT g.ts AS ts, 1 AS v
FROM ` + quarterHours(dialect) + `
`,
		"hourly.sql": `MODEL (
  name s.hourly,
  kind INCREMENTAL_BY_TIME_RANGE (time_column hr),
  cron '@hourly'
);

SELECT date_trunc('hour', h.ts) AS hr, count(*) AS n, sum(h.v) AS total
FROM s.hits AS h
WHERE h.ts BETWEEN @start_ts AND @end_ts
GROUP BY 1
`,
	}
	for name, body := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "models", name), []byte(body), 0o644))
	}
	return dir
}

// raceStory plays seed 000 up to the apply: prod is deployed at
// storyDeploy; a breaking change to s.hits (v = 2) is planned into p.json
// at storyDeploy; the scheduler runs at storyRun and advances both
// incumbents through 01:00, past the plan's frontier (00:00). It returns
// the project folder and the saved plan's id.
func raceStory(t *testing.T, backend storyBackend, extraYAML string) (string, string) {
	t.Helper()
	dir := storyProject(t, backend, extraYAML)
	mustRunAt(t, dir, storyDeploy, "plan", "--auto-apply")
	file := filepath.Join(dir, "models", "hits.sql")
	src, err := os.ReadFile(file)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(file, []byte(strings.Replace(string(src), "1 AS v", "2 AS v", 1)), 0o644))
	mustRunAt(t, dir, storyDeploy, "plan", "--out", "p.json")
	data, err := os.ReadFile(filepath.Join(dir, "p.json"))
	require.NoError(t, err)
	pl, err := plan.Decode(data)
	require.NoError(t, err)
	mustRunAt(t, dir, storyRun, "run")
	return dir, pl.ID
}

// debtOf runs `gapless debt --json` at now.
func debtOf(t *testing.T, dir, now string, args ...string) debtReport {
	t.Helper()
	var rep debtReport
	require.NoError(t, json.Unmarshal([]byte(mustRunAt(t, dir, now, append([]string{"debt", "--json"}, args...)...)), &rep))
	return rep
}

// statusAt runs `gapless status --json` at now.
func statusAt(t *testing.T, dir, now string) statusReport {
	t.Helper()
	var rep statusReport
	require.NoError(t, json.Unmarshal([]byte(mustRunAt(t, dir, now, "status", "--json")), &rep))
	return rep
}

// childRows returns the count of s.hourly's rows and the sum of their
// totals, through prod's view: 4 parent rows an hour, so 8 per hour of the
// new parent (v = 2) and 4 per hour of the old one.
func childRows(t *testing.T, dir string) (rows, total float64) {
	t.Helper()
	res := queryRows(t, dir, "SELECT CAST(count(*) AS double precision) AS n, CAST(coalesce(sum(total), 0) AS double precision) AS total FROM s.hourly")
	require.Len(t, res.Rows, 1)
	return res.Rows[0][0].(float64), res.Rows[0][1].(float64)
}

// Scenario: seed 000's race through the command line, on the embedded
// default, on PostgreSQL, and on Trino (an empty test catalog as the warehouse,
// PostgreSQL as the state store). prod serves an hourly parent and child built
// through 00:00; a breaking change to the parent is planned with --out; the
// scheduler then runs and advances both incumbents through 01:00. The saved
// plan is applied under each policy, each on a fresh project and state:
//   - strict refuses, naming the rule and the flag that would have helped,
//     once, and promotes nothing;
//   - trailing-gap(1) promotes with one hour of debt per model; status and
//     debt show it open with its age; the next run repairs it, and debt
//     shows it repaired with its latency, the rows all from the new parent;
//   - catch-up promotes with no gap and says what it computed beyond the
//     plan;
//   - replan promotes with no gap after 2 attempts, the second backfilling
//     only the tail.
func TestApplyUnderEachPolicyAfterTheSchedulerAdvanced(t *testing.T) {
	t.Parallel()
	for name, backend := range map[string]storyBackend{"embedded": embeddedBackend, "postgres": postgresBackend, "trino": trinoBackend} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			t.Run("strict", func(t *testing.T) {
				t.Parallel()
				dir, id := raceStory(t, backend, "")
				before := statusAt(t, dir, storyApply)
				r := runAt(t, dir, storyApply, "apply", "p.json")
				require.Equal(t, ExitFailure, r.code, r.stdout)
				require.Contains(t, r.stderr, "gapless: prod: plan "+id+" was not promoted")
				for _, m := range []string{"s.hits", "s.hourly"} {
					require.Equal(t, 1, strings.Count(r.stderr, m+" [incumbent_advanced] under strict: the scheduler advanced the incumbent 1 time(s)"), r.stderr)
				}
				require.Contains(t, r.stderr, "missing "+storyTail)
				require.Contains(t, r.stderr, "--on-incumbent-advance trailing-gap --max-trailing-gap-intervals 1 would accept it as tracked debt, catch-up or replan would fill it")
				require.Equal(t, 2, strings.Count(r.stderr, "would accept it as tracked debt"), "each explanation once: %s", r.stderr)
				require.NotContains(t, r.stdout, "Applied plan")

				after := statusAt(t, dir, storyApply)
				require.Equal(t, before.PlanID, after.PlanID, "prod still serves the incumbent")
				require.Zero(t, after.OpenDebts)
				require.Empty(t, debtOf(t, dir, storyApply).Debts)
			})

			t.Run("trailing-gap", func(t *testing.T) {
				t.Parallel()
				dir, id := raceStory(t, backend, "")
				out := mustRunAt(t, dir, storyApply, "apply", "p.json", "--on-incumbent-advance", "trailing-gap", "--max-trailing-gap-intervals", "1")
				require.Contains(t, out, "Promotion policy trailing-gap(1): the scheduler advanced prod after the plan was built; accepted 2 trailing gap(s) as freshness debt")
				require.Regexp(t, `s\.hits\s+`+regexp.QuoteMeta(storyTail)+`\s+1/1 advances`, out)
				require.Regexp(t, `s\.hourly\s+`+regexp.QuoteMeta(storyTail)+`\s+1/1 advances`, out)
				require.Contains(t, out, "Applied plan "+id+" to prod.")

				// An hour later, before the scheduler ran: the debt is open,
				// one hour old, and the tail is still missing.
				st := statusAt(t, dir, storyLater)
				require.Equal(t, id, st.PlanID)
				require.Equal(t, 2, st.OpenDebts)
				for _, m := range st.Models {
					require.Len(t, m.OpenDebt, 1, m.Name)
					require.Equal(t, openDebtRow{Range: storyTail, AcceptedAt: mustTime(t, storyApply), AgeSeconds: 3600, PlanID: id}, m.OpenDebt[0])
					require.Contains(t, m.Missing, "[2024-01-02T00:00:00Z, 2024-01-02T02:00:00Z)", m.Name)
				}
				human := mustRunAt(t, dir, storyLater, "status")
				require.Contains(t, human, "Freshness debt: 2 open")
				require.Regexp(t, `s\.hits .*1 open, 1h old`, human)

				rep := debtOf(t, dir, storyLater)
				require.Equal(t, "prod", rep.Environment)
				require.Equal(t, 2, rep.Open)
				require.Len(t, rep.Debts, 2)
				for _, d := range rep.Debts {
					require.Equal(t, debtOpen, d.Status)
					require.Equal(t, id, d.PlanID)
					require.Equal(t, "trailing-gap", d.Policy)
					require.Equal(t, 1, d.Bound)
					require.Equal(t, 1, d.Advances)
					require.Equal(t, storyTail, "["+d.Range.Start.Format(time.RFC3339)+", "+d.Range.End.Format(time.RFC3339)+")")
					require.Equal(t, int64(3600), *d.AgeSeconds)
					require.Nil(t, d.RepairedAt)
					require.Nil(t, d.RepairLatencySeconds)
				}
				require.Regexp(t, `s\.hits\s+`+regexp.QuoteMeta(storyTail)+`\s+`+id+`\s+trailing-gap\s+1/1\s+`+storyApply+`\s+open, age 1h\s+-`,
					mustRunAt(t, dir, storyLater, "debt"))

				// The next run fills the tail, which repairs the debt.
				mustRunAt(t, dir, storyLater, "run")
				rep = debtOf(t, dir, storyLater)
				require.Zero(t, rep.Open)
				for _, d := range rep.Debts {
					require.Equal(t, debtRepaired, d.Status, d.Model)
					require.Equal(t, mustTime(t, storyLater), *d.RepairedAt)
					require.Equal(t, int64(3600), *d.RepairLatencySeconds)
					require.Nil(t, d.AgeSeconds)
				}
				require.Zero(t, statusAt(t, dir, storyLater).OpenDebts)
				require.Regexp(t, `s\.hourly\s+.*`+storyLater+`\s+1h`, mustRunAt(t, dir, storyLater, "debt"))
				n, total := childRows(t, dir)
				require.Equal(t, 26.0, n, "hours [Jan 1 00:00, Jan 2 02:00), each once")
				require.Equal(t, 26*8.0, total, "every hour computed from the new parent")
			})

			t.Run("catch-up", func(t *testing.T) {
				t.Parallel()
				dir, id := raceStory(t, backend, "")
				out := mustRunAt(t, dir, storyApply, "apply", "p.json", "--on-incumbent-advance", "catch-up")
				require.Contains(t, out, "Promotion policy catch-up(3): the scheduler advanced prod after the plan was built; caught up beyond the plan in 1 round(s), then promoted with no gap")
				require.Contains(t, out, "  round 1:")
				require.Regexp(t, `    s\.hits \w+: 1 batch, 4 rows, computed `+regexp.QuoteMeta(storyTail), out)
				require.Regexp(t, `    s\.hourly \w+: 1 batch, 1 row, computed `+regexp.QuoteMeta(storyTail), out)
				require.Contains(t, out, "Applied plan "+id+" to prod.")

				rep := debtOf(t, dir, storyApply)
				require.Empty(t, rep.Debts)
				require.Zero(t, rep.Open)
				st := statusAt(t, dir, storyApply)
				require.Equal(t, id, st.PlanID)
				for _, m := range st.Models {
					require.Equal(t, []string{"[2024-01-01T00:00:00Z, 2024-01-02T01:00:00Z)"}, m.Covered, m.Name)
					require.Empty(t, m.Missing, m.Name)
				}
				n, total := childRows(t, dir)
				require.Equal(t, 25.0, n)
				require.Equal(t, 25*8.0, total)
			})

			t.Run("replan", func(t *testing.T) {
				t.Parallel()
				dir, id := raceStory(t, backend, "")
				out := mustRunAt(t, dir, storyApply, "apply", "p.json", "--on-incumbent-advance", "replan")
				require.Contains(t, out, "Promotion policy replan(3): the scheduler advanced prod after the plan was built; 2 attempts, the last promoted with no gap")
				first, second, ok := strings.Cut(out, "  attempt 2, plan ")
				require.True(t, ok, out)
				require.Contains(t, first, "  attempt 1, plan "+id+" (refused: incumbent_advanced):")
				require.Regexp(t, `s\.hits \w+: 1 batch, 96 rows, computed \[2024-01-01T00:00:00Z, 2024-01-02T00:00:00Z\)`, first)
				next, _, _ := strings.Cut(second, " ")
				require.NotEqual(t, id, next)
				require.Contains(t, second, "(promoted):")
				require.Regexp(t, `s\.hits \w+: 1 batch, 4 rows, computed `+regexp.QuoteMeta(storyTail), second)
				require.Regexp(t, `s\.hourly \w+: 1 batch, 1 row, computed `+regexp.QuoteMeta(storyTail), second)
				require.NotContains(t, second, "2024-01-01T00:00:00Z", "the second attempt backfilled only the tail")
				require.Contains(t, out, "Applied plan "+next+" to prod (a replan of plan "+id+").")

				require.Empty(t, debtOf(t, dir, storyApply).Debts)
				st := statusAt(t, dir, storyApply)
				require.Equal(t, next, st.PlanID)
				for _, m := range st.Models {
					require.Equal(t, []string{"[2024-01-01T00:00:00Z, 2024-01-02T01:00:00Z)"}, m.Covered, m.Name)
				}
				n, total := childRows(t, dir)
				require.Equal(t, 25.0, n)
				require.Equal(t, 25*8.0, total)
			})
		})
	}
}

// Scenario: the policy a plan records comes from gapless.yaml's
// environments.prod when no flag is given; each flag given overrides its
// one field; plan prints it and its --json summary carries it. Applying
// that plan without flags promotes under the recorded trailing-gap(1); a
// flag on apply overrides the recorded policy (strict then refuses).
func TestPlanRecordsThePolicyFromGaplessYAML(t *testing.T) {
	t.Parallel()
	yaml := "environments:\n  prod:\n    on_incumbent_advance: trailing-gap\n    max_trailing_gap_intervals: 1\n    max_attempts: 5\n"
	dir, id := raceStory(t, embeddedBackend, yaml)

	var raw struct {
		Options struct {
			Policy map[string]any `json:"policy"`
		} `json:"options"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "p.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &raw))
	require.Equal(t, map[string]any{"name": "trailing-gap", "max_trailing_gap_intervals": 1.0, "max_attempts": 5.0}, raw.Options.Policy)

	out := mustRunAt(t, dir, storyRun, "plan")
	require.Contains(t, out, "Promotion policy: trailing-gap(1)\n")
	var sum planSummary
	require.NoError(t, json.Unmarshal([]byte(mustRunAt(t, dir, storyRun, "plan", "--json", "--max-trailing-gap-intervals", "3")), &sum))
	require.Equal(t, policySummary{Name: "trailing-gap", Text: "trailing-gap(3)", MaxTrailingGapIntervals: 3, MaxAttempts: 5, Checked: true}, sum.Policy)
	require.NoError(t, json.Unmarshal([]byte(mustRunAt(t, dir, storyRun, "plan", "--json", "--on-incumbent-advance", "catch-up")), &sum))
	require.Equal(t, policySummary{Name: "catch-up", Text: "catch-up(5)", MaxTrailingGapIntervals: 1, MaxAttempts: 5, Checked: true}, sum.Policy)
	require.Contains(t, mustRunAt(t, dir, storyRun, "plan", "dev"), "Promotion policy: none: no no-gap check at promotion")

	// A flag on apply overrides what the plan recorded.
	r := runAt(t, dir, storyApply, "apply", "p.json", "--on-incumbent-advance", "strict")
	require.Equal(t, ExitFailure, r.code, r.stdout)
	require.Contains(t, r.stderr, "s.hits [incumbent_advanced] under strict")

	out = mustRunAt(t, dir, storyApply, "apply", "p.json")
	require.Contains(t, out, "Promotion policy trailing-gap(1)")
	require.Contains(t, out, "Applied plan "+id+" to prod.")
	require.Equal(t, 2, debtOf(t, dir, storyApply).Open)
}

// Scenario: bad policy flags on plan and apply are usage errors (exit 2)
// naming the flag, before anything is read or written; a near-miss policy
// name gets the closest one suggested.
func TestPolicyFlagsUsageErrors(t *testing.T) {
	t.Parallel()
	dir := storyProject(t, embeddedBackend, "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"plan", "--on-incumbent-advance", "trailing-gaps"}, "--on-incumbent-advance: unknown promotion policy \"trailing-gaps\": did you mean trailing-gap?"},
		{[]string{"apply", "p.json", "--on-incumbent-advance", "trailing-gaps"}, "did you mean trailing-gap?"},
		{[]string{"plan", "--on-incumbent-advance", "sometimes"}, "--on-incumbent-advance: unknown promotion policy"},
		{[]string{"plan", "--max-trailing-gap-intervals", "-1"}, "--max-trailing-gap-intervals must not be negative, got -1"},
		{[]string{"apply", "p.json", "--max-trailing-gap-intervals", "-1"}, "--max-trailing-gap-intervals must not be negative"},
		{[]string{"plan", "--max-attempts", "-2"}, "--max-attempts must not be negative, got -2"},
		{[]string{"apply", "p.json", "--max-attempts", "two"}, "max-attempts"},
		{[]string{"debt", "prod", "--all"}, "--all"},
		{[]string{"debt", "a", "b"}, "takes 0 to 1 arguments"},
		{[]string{"debt", "Bad__Env"}, "bad environment name"},
		{[]string{"plan", "--no-gaps=false"}, "--no-gaps=false: plan for prod allows gaps: prod always runs the no-gap check at promotion"},
	} {
		r := runAt(t, dir, storyDeploy, tc.args...)
		require.Equal(t, ExitUsage, r.code, "%v: %s", tc.args, r.stderr)
		require.True(t, strings.HasPrefix(r.stderr, "gapless: "), "%v: %s", tc.args, r.stderr)
		require.Contains(t, r.stderr, tc.want, tc.args)
	}
	require.NoDirExists(t, filepath.Join(dir, ".gapless"), "nothing was opened")
}

// Scenario: debt before any debt exists, and its --json document's field
// names, which are stable: null for what does not apply.
func TestDebtWithoutDebtAndItsJSONFields(t *testing.T) {
	t.Parallel()
	dir, _ := raceStory(t, embeddedBackend, "")
	require.Equal(t, "No freshness debt in environment prod.\n", mustRunAt(t, dir, storyRun, "debt"))
	require.Equal(t, "No freshness debt in every environment.\n", mustRunAt(t, dir, storyRun, "debt", "--all"))
	require.Equal(t, "No freshness debt in environment dev.\n", mustRunAt(t, dir, storyRun, "debt", "dev"))

	mustRunAt(t, dir, storyApply, "apply", "p.json", "--on-incumbent-advance", "trailing-gap", "--max-trailing-gap-intervals", "1")
	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(mustRunAt(t, dir, storyLater, "debt", "--all", "--json")), &doc))
	require.Equal(t, "", doc["environment"])
	require.Equal(t, 2.0, doc["open"])
	require.Equal(t, storyLater, doc["execution_time"])
	d := doc["debts"].([]any)[0].(map[string]any)
	for _, key := range []string{"id", "environment", "model", "version", "range", "plan_id", "policy", "bound", "advances",
		"accepted_at", "repaired_at", "superseded_at", "status", "age_seconds", "repair_latency_seconds"} {
		require.Contains(t, d, key)
	}
	require.Equal(t, map[string]any{"start": "2024-01-02T00:00:00Z", "end": "2024-01-02T01:00:00Z"}, d["range"])
	require.Nil(t, d["repaired_at"])
	require.Nil(t, d["repair_latency_seconds"])
	require.Equal(t, 3600.0, d["age_seconds"])
	require.Regexp(t, `ENVIRONMENT\s+MODEL\s+RANGE`, mustRunAt(t, dir, storyLater, "debt", "--all"))
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	require.NoError(t, err)
	return v
}
