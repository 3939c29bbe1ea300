package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/backend"
	"github.com/gapless-dev/gapless/config"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/state"
)

// Wall-clock times of the TTL stories: promotions are stamped with the
// clock (Env.Clock), the janitor acts at --execution-time.
var (
	clock0 = time.Date(2024, 3, 1, 10, 30, 0, 0, time.UTC) // run's fixed clock
	clock1 = time.Date(2024, 3, 3, 9, 0, 0, 0, time.UTC)
	week   = 7 * 24 * time.Hour
)

// runClock is run with the clock stopped at now.
func runClock(t *testing.T, now time.Time, wd string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := Run(context.Background(), args, Env{
		Stdout: &out, Stderr: &errb,
		Clock: clockwork.NewFakeClockAt(now),
		Getwd: func() (string, error) { return wd, nil },
	})
	return result{code, out.String(), errb.String()}
}

func mustRunClock(t *testing.T, now time.Time, dir string, args ...string) string {
	t.Helper()
	r := runClock(t, now, dir, args...)
	require.Equal(t, ExitOK, r.code, "%v\nstdout: %s\nstderr: %s", args, r.stdout, r.stderr)
	return r.stdout
}

func rfc(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// environmentsByName runs `gapless environments --json`.
func environmentsByName(t *testing.T, dir string) map[string]environmentRow {
	t.Helper()
	var rows []environmentRow
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, dir, "environments", "--json")), &rows))
	out := map[string]environmentRow{}
	for _, r := range rows {
		out[r.Name] = r
	}
	return out
}

func janitorAt(t *testing.T, dir string, exec time.Time, args ...string) janitorReport {
	t.Helper()
	var rep janitorReport
	out := mustRun(t, dir, append([]string{"janitor", "--json", "--execution-time", rfc(exec)}, args...)...)
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	return rep
}

// editModel rewrites one model file of the example project.
func editModel(t *testing.T, dir, file, old, new string) {
	t.Helper()
	path := filepath.Join(dir, "models", file)
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	edited := strings.Replace(string(src), old, new, 1)
	require.NotEqual(t, string(src), edited, "%s does not contain %q", file, old)
	require.NoError(t, os.WriteFile(path, []byte(edited), 0o644))
}

// schemaExists asks the warehouse's catalog.
func schemaExists(t *testing.T, dir, schema string) bool {
	t.Helper()
	res := queryRows(t, dir, "SELECT count(*)::float8 FROM information_schema.schemata WHERE schema_name = '"+schema+"'")
	return res.Rows[0][0].(float64) > 0
}

func tableExists(t *testing.T, dir, schema, table string) bool {
	t.Helper()
	res := queryRows(t, dir, "SELECT count(*)::float8 FROM information_schema.tables WHERE table_schema = '"+schema+
		"' AND table_name = '"+table+"'")
	return res.Rows[0][0].(float64) > 0
}

// Scenario: SQLMesh's environment_ttl. A dev environment promoted at
// clock0 expires a week later (the default); a second plan into dev at
// clock1 extends it to clock1 + a week, and `environments` shows it (prod:
// never). The janitor just before that keeps dev (it only drops dev's first
// version, which nothing serves any more); a dry run at expiry lists what
// it would remove and changes nothing; the janitor at expiry removes dev's
// views, its view schema demo__dev, its row and the versions only dev used,
// while prod, its tables and rows, and user schemas that merely look like
// dev's (demo__dev2, demo__de) are untouched. A second pass finds nothing.
// The janitor runs with --snapshot-ttl 0, so versions nothing serves are
// dropped at once.
func TestDevEnvironmentExpiresAfterTTL(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	mustRunClock(t, clock0, dir, "plan", "--auto-apply", "--execution-time", t0)
	prod := statusOf(t, dir, "--execution-time", t0)

	editModel(t, dir, "daily_revenue.sql", "sum(e.amount) AS revenue", "sum(e.amount) AS revenue,\n  max(e.amount) AS biggest")
	mustRunClock(t, clock0, dir, "plan", "dev", "--auto-apply", "--execution-time", t0)
	envs := environmentsByName(t, dir)
	require.True(t, envs["prod"].ExpiresAt.IsZero(), "prod never expires")
	require.Equal(t, clock0.Add(week), envs["dev"].ExpiresAt, "promotion time + the default ttl of 7d")
	v1 := statusOf(t, dir, "dev", "--execution-time", t0)["demo.daily_revenue"].Version

	editModel(t, dir, "daily_revenue.sql", "max(e.amount) AS biggest", "max(e.amount) AS biggest,\n  min(e.amount) AS smallest")
	mustRunClock(t, clock1, dir, "plan", "dev", "--auto-apply", "--execution-time", t0)
	expires := clock1.Add(week)
	envs = environmentsByName(t, dir)
	require.Equal(t, expires, envs["dev"].ExpiresAt, "a new promotion extends the expiry")
	require.Equal(t, int64(2), envs["dev"].Generation)
	dev := statusOf(t, dir, "dev", "--execution-time", t0)
	require.NotEqual(t, v1, dev["demo.daily_revenue"].Version)
	text := mustRun(t, dir, "environments")
	require.Contains(t, text, "EXPIRES")
	require.Regexp(t, `dev\s+2\s+\S+\s+5\s+2024-03-03T09:00:00Z\s+2024-03-10T09:00:00Z\s+live`, text)
	require.Regexp(t, `prod\s+1\s+\S+\s+5\s+2024-03-01T10:30:00Z\s+never\s+live`, text)

	// User schemas that look like dev's view schema.
	mustRun(t, dir, "query", "--allow-writes", "CREATE SCHEMA demo__dev2")
	mustRun(t, dir, "query", "--allow-writes", "CREATE TABLE demo__dev2.mine AS SELECT 1 AS x")
	mustRun(t, dir, "query", "--allow-writes", "CREATE SCHEMA demo__de")

	rep := janitorAt(t, dir, expires.Add(-time.Minute), "--snapshot-ttl", "0")
	require.Empty(t, rep.Environments, "dev has not expired yet")
	require.Contains(t, rep.Tables, "gapless__demo.demo__daily_revenue__"+v1, "dev's first version: nothing serves it")
	for name, row := range dev {
		require.NotContains(t, rep.Tables, "gapless__demo."+strings.ReplaceAll(name, ".", "__")+"__"+row.Version, "%s: dev serves it", name)
	}
	require.Equal(t, float64(5), count(t, dir, "demo__dev.daily_revenue"))

	dry := janitorAt(t, dir, expires, "--dry-run", "--snapshot-ttl", "0")
	require.True(t, dry.DryRun)
	require.Equal(t, []string{"dev"}, dry.Environments)
	require.Contains(t, dry.Views, "demo__dev.daily_revenue")
	require.Equal(t, []string{"demo__dev"}, dry.Schemas)
	require.Contains(t, dry.Tables, "gapless__demo.demo__daily_revenue__"+dev["demo.daily_revenue"].Version)
	require.Contains(t, environmentsByName(t, dir), "dev", "a dry run changes nothing")
	require.Equal(t, float64(5), count(t, dir, "demo__dev.daily_revenue"))
	r := runClock(t, clock1, dir, "janitor", "--dry-run", "--snapshot-ttl", "0", "--execution-time", rfc(expires))
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "Would remove 1 environment(s)")
	require.Contains(t, r.stdout, "  schema demo__dev\n")

	rep = janitorAt(t, dir, expires, "--snapshot-ttl", "0")
	require.False(t, rep.DryRun)
	require.Equal(t, []string{"dev"}, rep.Environments)
	require.Equal(t, dry.Views, rep.Views)
	require.Equal(t, []string{"demo__dev"}, rep.Schemas)
	require.Equal(t, dry.Tables, rep.Tables)
	require.Empty(t, rep.Skipped)
	for name, row := range dev {
		table := "gapless__demo." + strings.ReplaceAll(name, ".", "__") + "__" + row.Version
		if row.Version == prod[name].Version {
			require.NotContains(t, rep.Tables, table, "%s: prod serves it", name)
		} else {
			require.Contains(t, rep.Tables, table, "%s: only dev used it", name)
		}
	}
	require.NotContains(t, environmentsByName(t, dir), "dev")
	require.False(t, schemaExists(t, dir, "demo__dev"), "dev's view schema is gone")
	require.True(t, schemaExists(t, dir, "demo__dev2"))
	require.True(t, schemaExists(t, dir, "demo__de"), "an empty user schema with a similar name stays")
	require.Equal(t, float64(1), count(t, dir, "demo__dev2.mine"))
	require.True(t, schemaExists(t, dir, "gapless__demo"), "prod's physical schema stays")
	for name, row := range prod {
		require.True(t, tableExists(t, dir, "gapless__demo", strings.ReplaceAll(name, ".", "__")+"__"+row.Version), name)
	}
	require.Equal(t, float64(24*12), count(t, dir, "demo.events"))
	require.Equal(t, float64(5), count(t, dir, "demo.daily_revenue"))
	require.Equal(t, float64(3), count(t, dir, "demo.top_customers"))

	rep = janitorAt(t, dir, expires.Add(time.Hour), "--snapshot-ttl", "0")
	require.Empty(t, rep.Environments)
	require.Empty(t, rep.Tables)
	require.Empty(t, rep.Schemas)
}

// Scenario: an invalidated environment is removed at the next pass,
// whatever its ttl; its view schema also holds a table a user created
// there, so the schema is kept (and reported, naming the table) and the
// user's table is intact.
func TestJanitorRemovesInvalidatedEnvAndKeepsASchemaHoldingUserTables(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	yaml, err := os.ReadFile(filepath.Join(dir, "gapless.yaml"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gapless.yaml"),
		append(yaml, "\nenvironment_ttl: never\nenvironments:\n  dev: {ttl: 30d}\n"...), 0o644))
	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", t0)
	editModel(t, dir, "daily_revenue.sql", "sum(e.amount) AS revenue", "sum(e.amount) AS revenue,\n  max(e.amount) AS biggest")
	mustRun(t, dir, "plan", "dev", "--auto-apply", "--execution-time", t0)
	require.Equal(t, clock0.Add(30*24*time.Hour), environmentsByName(t, dir)["dev"].ExpiresAt, "environments.dev.ttl")
	mustRun(t, dir, "query", "--allow-writes", "CREATE TABLE demo__dev.notes AS SELECT 'keep me' AS note")

	require.Empty(t, janitorAt(t, dir, clock0.Add(time.Hour)).Environments)
	mustRun(t, dir, "invalidate", "dev", "--execution-time", rfc(clock0.Add(time.Hour)))
	require.Contains(t, mustRun(t, dir, "environments"), "invalidated")

	rep := janitorAt(t, dir, clock0.Add(time.Hour))
	require.Equal(t, []string{"dev"}, rep.Environments)
	require.Contains(t, rep.Views, "demo__dev.daily_revenue")
	require.Empty(t, rep.Schemas)
	require.Len(t, rep.KeptSchemas, 1)
	require.Equal(t, "demo__dev", rep.KeptSchemas[0].Schema)
	require.Contains(t, rep.KeptSchemas[0].Reason, "notes")
	require.Equal(t, float64(1), count(t, dir, "demo__dev.notes"))
	require.False(t, tableExists(t, dir, "demo__dev", "daily_revenue"), "dev's view is gone")
	require.NotContains(t, environmentsByName(t, dir), "dev")
	require.Equal(t, float64(5), count(t, dir, "demo.daily_revenue"))
}

// Scenario: a breaking change moved prod's demo.daily_revenue from v1 to
// v2, so v1's table is retired. A new plan reverts the change: it rebuilds
// v1. Its apply has run its first stage only (recorded the snapshots and
// saved the plan, as apply.StageRecordSnapshots does) and promoted
// nothing, so no history event names the plan. Within the grace period the
// janitor finds it among the saved plans, reports it in flight and keeps
// v1's table, which the apply is about to reuse; after the grace period
// the plan is no longer in flight and v1's table is dropped (with
// --snapshot-ttl 0: at once), and the plan itself is pruned; prod's two
// plans (current and previous) are kept. prod's v2 is never touched.
func TestJanitorKeepsTheVersionsOfASavedPlanNotYetPromoted(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", t0)
	v1 := statusOf(t, dir, "--execution-time", t0)["demo.daily_revenue"].Version
	editModel(t, dir, "daily_revenue.sql", "count(*) AS events", "count(*) + 0 AS events")
	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", t0)
	prod := statusOf(t, dir, "--execution-time", t0)
	require.NotEqual(t, v1, prod["demo.daily_revenue"].Version)
	retired := "demo__daily_revenue__" + v1
	require.True(t, tableExists(t, dir, "gapless__demo", retired))

	editModel(t, dir, "daily_revenue.sql", "count(*) + 0 AS events", "count(*) AS events")
	mustRun(t, dir, "plan", "--out", "plan.json", "--execution-time", t0)
	data, err := os.ReadFile(filepath.Join(dir, "plan.json"))
	require.NoError(t, err)
	pl, err := plan.Decode(data)
	require.NoError(t, err)
	rebuilds := false
	for _, s := range pl.Snapshots {
		rebuilds = rebuilds || (s.Name == "demo.daily_revenue" && s.Version == v1)
	}
	require.True(t, rebuilds, "the reverted plan serves demo.daily_revenue at %s", v1)
	require.True(t, pl.CreatedAt.Equal(clock0), "plan created at %v", pl.CreatedAt)

	// The apply's first stage, and nothing after it.
	ctx := context.Background()
	cfg, err := config.Load(dir)
	require.NoError(t, err)
	b, err := backend.Open(ctx, cfg, backend.Options{})
	require.NoError(t, err)
	require.NoError(t, b.Store.PushSnapshots(ctx, pl.Snapshots))
	payload, err := plan.Encode(pl)
	require.NoError(t, err)
	require.NoError(t, b.Store.SavePlan(ctx, state.Plan{ID: pl.ID, Environment: pl.Environment, Payload: payload, CreatedAt: pl.CreatedAt}))
	for _, status := range []string{apply.StatusStarted, apply.StatusFinished} {
		_, err := b.Store.RecordApplication(ctx, state.Application{PlanID: pl.ID, Stage: string(apply.StageRecordSnapshots), Status: status, At: clock0})
		require.NoError(t, err)
	}
	named, err := b.Store.ListEvents(ctx, state.EventFilter{PlanID: pl.ID})
	require.NoError(t, err)
	require.Empty(t, named, "no history event names the plan")
	require.NoError(t, b.Close())

	rep := janitorAt(t, dir, clock0.Add(time.Hour), "--snapshot-ttl", "0")
	require.Equal(t, []string{pl.ID}, rep.InFlight)
	require.Empty(t, rep.PrunedPlans, "the saved plan is within the grace; prod serves the others")
	require.NotContains(t, rep.Tables, "gapless__demo."+retired)
	require.True(t, tableExists(t, dir, "gapless__demo", retired), "the saved plan's version was dropped")

	rep = janitorAt(t, dir, clock0.Add(25*time.Hour), "--snapshot-ttl", "0")
	require.Empty(t, rep.InFlight)
	require.Equal(t, []string{pl.ID}, rep.PrunedPlans, "past the grace, the plan never promoted is pruned (saved in format 2, as an older gapless did)")
	require.Contains(t, rep.Tables, "gapless__demo."+retired)
	require.False(t, tableExists(t, dir, "gapless__demo", retired))
	for name, row := range prod {
		require.NotContains(t, rep.Tables, "gapless__demo."+strings.ReplaceAll(name, ".", "__")+"__"+row.Version, "%s: prod serves it", name)
	}
	require.Equal(t, float64(5), count(t, dir, "demo.daily_revenue"))
}

// Scenario: a bad ttl in gapless.yaml fails every command with the file,
// line and column, and a ttl on prod is refused the same way.
func TestBadTTLNamesFileAndLine(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	file := filepath.Join(dir, "gapless.yaml")
	for content, want := range map[string]string{
		"environment_ttl: soon\n":                  file + `:1:18: environment_ttl: bad duration "soon"`,
		"environments:\n  prod:\n    ttl: 7d\n":    file + ":3:5: environments.prod.ttl: prod never expires",
		"environments:\n  dev:\n    ttl: 0h\n":     file + `:3:10: environments.dev.ttl: bad duration "0h"`,
		"environments:\n  dev:\n    ttl: [7d]\n":   file + ":3:10: ",
		"environments:\n  dev:\n    ttls: 7d\n":    file + ":3:5: unknown key ttls in environments.dev: did you mean ttl?",
		"environment_ttl: 7d\nenvironment_tl: 1\n": file + ":2:1: unknown key environment_tl at the top level: did you mean environment_ttl?",
	} {
		require.NoError(t, os.WriteFile(file, []byte(content), 0o644))
		r := run(t, dir, "plan", "dev", "--execution-time", t0)
		require.Equal(t, ExitFailure, r.code, content)
		require.Contains(t, r.stderr, want, content)
	}
}

// Scenario: the TTL story on PostgreSQL for state and compute: dev expires
// a week after its promotion; the janitor just before keeps it, at expiry
// removes its views, its view schema shop__dev and the versions only it
// used (--snapshot-ttl 0: at once), and leaves prod, its rows, and
// look-alike user schemas intact.
func TestPostgresDevEnvironmentExpiresAfterTTL(t *testing.T) {
	t.Parallel()
	dir := pgProject(t)
	mustRunClock(t, clock0, dir, "plan", "--auto-apply", "--execution-time", t0)
	prod := statusOf(t, dir, "--execution-time", t0)
	dailyRows := count(t, dir, "shop.daily")
	editModel(t, dir, "daily.sql", "sum(e.amount) AS revenue", "sum(e.amount) AS revenue, max(e.amount) AS biggest")
	mustRunClock(t, clock0, dir, "plan", "dev", "--auto-apply", "--execution-time", t0)
	dev := statusOf(t, dir, "dev", "--execution-time", t0)
	expires := clock0.Add(week)
	require.Equal(t, expires, environmentsByName(t, dir)["dev"].ExpiresAt)

	mustRun(t, dir, "query", "--allow-writes", "CREATE SCHEMA shop__dev2")
	mustRun(t, dir, "query", "--allow-writes", "CREATE TABLE shop__dev2.mine AS SELECT 1 AS x")
	mustRun(t, dir, "query", "--allow-writes", "CREATE SCHEMA shop__de")

	require.Empty(t, janitorAt(t, dir, expires.Add(-time.Minute), "--snapshot-ttl", "0").Environments)
	require.True(t, schemaExists(t, dir, "shop__dev"))

	rep := janitorAt(t, dir, expires, "--snapshot-ttl", "0")
	require.Equal(t, []string{"dev"}, rep.Environments)
	require.Equal(t, []string{"shop__dev"}, rep.Schemas)
	require.Contains(t, rep.Tables, "gapless__shop.shop__daily__"+dev["shop.daily"].Version)
	for name, row := range prod {
		require.NotContains(t, rep.Tables, "gapless__shop."+strings.ReplaceAll(name, ".", "__")+"__"+row.Version, "%s: prod serves it", name)
	}
	require.False(t, schemaExists(t, dir, "shop__dev"))
	require.True(t, schemaExists(t, dir, "shop__dev2"))
	require.True(t, schemaExists(t, dir, "shop__de"))
	require.Equal(t, float64(1), count(t, dir, "shop__dev2.mine"))
	require.Equal(t, float64(24*4), count(t, dir, "shop.events"))
	require.Equal(t, dailyRows, count(t, dir, "shop.daily"))
	require.NotContains(t, environmentsByName(t, dir), "dev")
}
