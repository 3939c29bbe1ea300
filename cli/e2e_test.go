package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/project"
	"github.com/gapless-dev/gapless/warehouse"
)

// Execution times of the stories below. The example's events model is
// hourly with batch_size 24, its rollup daily.
const (
	t0 = "2024-01-02T00:30:00Z" // first deploy: one day of history
	t1 = "2024-01-02T05:30:00Z" // a run: five more hours of events
)

// initProject writes the example project into a fresh folder, without
// its source (raw.orders, its landing folder and demo.orders_hourly): the
// stories here are about models; initProjectWithSource keeps it.
func initProject(t *testing.T) string {
	t.Helper()
	dir := initProjectWithSource(t)
	for _, rel := range []string{"sources/orders.yaml", "models/orders_hourly.sql", "landing"} {
		require.NoError(t, os.RemoveAll(filepath.Join(dir, rel)))
	}
	return dir
}

// initProjectWithSource writes the example project, as `gapless init`
// does, into a fresh folder.
func initProjectWithSource(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "proj")
	r := run(t, t.TempDir(), "init", dir)
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "Wrote the example project to "+dir)
	return dir
}

// mustRun runs a command that must succeed and returns its stdout.
func mustRun(t *testing.T, dir string, args ...string) string {
	t.Helper()
	r := run(t, dir, args...)
	require.Equal(t, ExitOK, r.code, "%v\nstdout: %s\nstderr: %s", args, r.stdout, r.stderr)
	return r.stdout
}

// queryRows runs `gapless query --json` and returns its result.
func queryRows(t *testing.T, dir, sql string) warehouse.Result {
	t.Helper()
	var res warehouse.Result
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, dir, "query", "--json", sql)), &res))
	return res
}

// count returns SELECT count(*) of table's rows (as a double precision,
// which DuckDB, PostgreSQL and Trino all spell so).
func count(t *testing.T, dir, table string) float64 {
	t.Helper()
	res := queryRows(t, dir, "SELECT CAST(count(*) AS double precision) AS n FROM "+table)
	require.Len(t, res.Rows, 1)
	n, ok := res.Rows[0][0].(float64)
	require.True(t, ok, "count is %T", res.Rows[0][0])
	return n
}

// statusOf runs `gapless status --json` and returns the models by name.
func statusOf(t *testing.T, dir string, args ...string) map[string]statusRow {
	t.Helper()
	var rep statusReport
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, dir, append([]string{"status", "--json"}, args...)...)), &rep))
	out := map[string]statusRow{}
	for _, m := range rep.Models {
		out[m.Name] = m
	}
	return out
}

// Scenario: a fresh machine. init writes the example; plan --auto-apply at
// t0 deploys prod with one day of history; run at t1 computes the five
// hours due since; status shows the covered ranges and no gap, and the
// served views hold exactly the rows of the covered hours.
func TestInitPlanRunStatus(t *testing.T) {
	t.Parallel()
	dir := initProject(t)

	out := mustRun(t, dir, "plan", "--auto-apply", "--execution-time", t0)
	require.Contains(t, out, "prod does not exist yet")
	require.Contains(t, out, "+ demo.events")
	require.Contains(t, out, "24 intervals in [2024-01-01T00:00:00Z, 2024-01-02T00:00:00Z)")
	require.Regexp(t, `demo\.daily_revenue +\S+ +1 interval in \[2024-01-01T00:00:00Z, 2024-01-02T00:00:00Z\)`, out)
	require.Contains(t, out, "Applied plan")
	require.Equal(t, float64(24*12), count(t, dir, "demo.events"))
	require.Equal(t, float64(5), count(t, dir, "demo.daily_revenue"))
	require.Equal(t, float64(3), count(t, dir, "demo.top_customers"))

	st := statusOf(t, dir, "--execution-time", t1)
	require.Equal(t, []string{"[2024-01-01T00:00:00Z, 2024-01-02T00:00:00Z)"}, st["demo.events"].Covered)
	require.Equal(t, []string{"[2024-01-02T00:00:00Z, 2024-01-02T05:00:00Z)"}, st["demo.events"].Missing)
	require.Equal(t, 5, st["demo.events"].MissingBuckets)
	// The apply's backfill is the last run so far, at the clock's now.
	require.Equal(t, testNow, st["demo.events"].LastRunAt)
	require.Equal(t, "[2024-01-01T00:00:00Z, 2024-01-02T00:00:00Z)", st["demo.events"].LastRunRange)

	mustRun(t, dir, "run", "--execution-time", t1)
	st = statusOf(t, dir, "--execution-time", t1)
	ev := st["demo.events"]
	require.Equal(t, []string{"[2024-01-01T00:00:00Z, 2024-01-02T05:00:00Z)"}, ev.Covered)
	require.Equal(t, "2024-01-02T05:00:00Z", ev.Frontier)
	require.Empty(t, ev.Missing)
	// The run's write is now the last one: its time and only what it added.
	require.Equal(t, testNow, ev.LastRunAt)
	require.Equal(t, "[2024-01-02T00:00:00Z, 2024-01-02T05:00:00Z)", ev.LastRunRange)
	require.Equal(t, "[2024-01-01T00:00:00Z, 2024-01-02T00:00:00Z)", st["demo.daily_revenue"].LastRunRange)
	human := mustRun(t, dir, "status", "--wide", "--execution-time", t1)
	require.Contains(t, human, "LAST RUN")
	require.Contains(t, human, "2024-03-01T10:30:00Z [2024-01-02T00:00:00Z, 2024-01-02T05:00:00Z)")
	raw := mustRun(t, dir, "status", "--json", "--execution-time", t1)
	require.Contains(t, raw, `"last_run_at": "2024-03-01T10:30:00Z"`)
	require.Contains(t, raw, `"last_run_range": "[2024-01-02T00:00:00Z, 2024-01-02T05:00:00Z)"`)
	require.Equal(t, "INCREMENTAL_BY_TIME_RANGE", ev.Kind)
	require.Equal(t, "@hourly", ev.Cron)
	require.NotEmpty(t, ev.Version)
	require.Equal(t, float64(29*12), count(t, dir, "demo.events"))

	// Running again at the same time finds nothing due and changes nothing.
	mustRun(t, dir, "run", "--execution-time", t1)
	require.Equal(t, float64(29*12), count(t, dir, "demo.events"))

	// The project is deployed: a new plan has nothing to do.
	out = mustRun(t, dir, "plan", "--execution-time", t1)
	require.Contains(t, out, "No model changed.")
	require.Contains(t, out, "prod is up to date")

	var envs []environmentRow
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, dir, "environments", "--json")), &envs))
	require.Len(t, envs, 1)
	require.Equal(t, "prod", envs[0].Name)
	require.Equal(t, int64(1), envs[0].Generation)
	require.Equal(t, 5, envs[0].Models)
}

// Scenario: plan --out writes the plan and applies nothing; apply of that
// file deploys it; applying it again is harmless (it resumes and finds
// everything done).
func TestPlanOutThenApply(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	out := mustRun(t, dir, "plan", "--out", "plan.json", "--execution-time", t0)
	require.Contains(t, out, "nothing applied")
	file := filepath.Join(dir, "plan.json") // relative to the working folder
	require.FileExists(t, file)
	require.Equal(t, "[]\n", mustRun(t, dir, "environments", "--json"))

	out = mustRun(t, dir, "apply", "plan.json")
	require.Contains(t, out, "Applied plan")
	require.Equal(t, float64(24*12), count(t, dir, "demo.events"))

	mustRun(t, dir, "apply", file)
	require.Equal(t, float64(24*12), count(t, dir, "demo.events"))
}

// Scenario: plan outside a terminal and without --auto-apply prints the plan
// and how to apply it, and applies nothing.
func TestPlanWithoutAutoApplyAppliesNothing(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	out := mustRun(t, dir, "plan", "--execution-time", t0)
	require.Contains(t, out, "Not applied. To apply it, run:\n  gapless plan prod --auto-apply")
	require.Equal(t, "[]\n", mustRun(t, dir, "environments", "--json"))

	var sum planSummary
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, dir, "plan", "--json", "--execution-time", t0)), &sum))
	require.Equal(t, "prod", sum.Environment)
	require.Len(t, sum.Added, 5)
	require.Len(t, sum.Backfills, 5)
}

// Scenario: a plan file that was edited, truncated, or is not a plan at all
// is refused with its reason, exit 1, and nothing is applied.
func TestApplyRefusesACorruptPlan(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	file := filepath.Join(t.TempDir(), "plan.json")
	mustRun(t, dir, "plan", "--out", file, "--execution-time", t0)
	good, err := os.ReadFile(file)
	require.NoError(t, err)

	for name, tc := range map[string]struct{ body, reason string }{
		"edited":    {strings.Replace(string(good), `"environment": "prod"`, `"environment": "dev"`, 1), "checksum mismatch"},
		"truncated": {string(good[:len(good)/2]), "not JSON"},
		"foreign":   {`{"name": "something else"}`, "not a gapless plan"},
	} {
		bad := filepath.Join(t.TempDir(), name+".json")
		require.NoError(t, os.WriteFile(bad, []byte(tc.body), 0o644))
		r := run(t, dir, "apply", bad)
		require.Equal(t, ExitFailure, r.code, name)
		require.Contains(t, r.stderr, "invalid plan file", name)
		require.Contains(t, r.stderr, tc.reason, name)
		require.Contains(t, r.stderr, bad, name)
	}
	require.Equal(t, "[]\n", mustRun(t, dir, "environments", "--json"))
}

// Scenario: a broken model fails plan --auto-apply with the file, line and
// column, before anything is written: no warehouse and no state file (only
// the parse cache, which remembers the queries that did parse).
func TestBadModelExitsOneBeforeAnythingIsWritten(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "models", "broken.sql"),
		[]byte("MODEL (\n  name demo.broken,\n  kind FULL\n);\nSELECT * FROM demo.event\n"), 0o644))
	r := run(t, dir, "plan", "--auto-apply", "--execution-time", t0)
	require.Equal(t, ExitFailure, r.code)
	require.Contains(t, r.stderr, "models/broken.sql:5:15:")
	require.Contains(t, r.stderr, "did you mean demo.events?")
	require.NotContains(t, r.stderr, "goroutine")
	require.NoFileExists(t, filepath.Join(dir, "warehouse.duckdb"))
	entries, err := os.ReadDir(filepath.Join(dir, ".gapless"))
	require.NoError(t, err)
	require.Len(t, entries, 1, "nothing but the cache in .gapless: %v", entries)
	require.Equal(t, filepath.Base(project.CacheDir), entries[0].Name())
}

// Scenario: init never overwrites; it names the file that is in the way and
// writes nothing.
func TestInitRefusesToOverwrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gapless.yaml"), []byte("# mine\n"), 0o644))
	r := run(t, dir, "init")
	require.Equal(t, ExitFailure, r.code)
	require.Contains(t, r.stderr, filepath.Join(dir, "gapless.yaml")+" exists already")
	require.NoDirExists(t, filepath.Join(dir, "models"))
	b, err := os.ReadFile(filepath.Join(dir, "gapless.yaml"))
	require.NoError(t, err)
	require.Equal(t, "# mine\n", string(b))
}

// Scenario: another process holds the warehouse file. The command waits its
// bounded time, then fails with one line naming the file; no stack trace.
func TestLockedWarehouseIsReportedClearly(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	path := filepath.Join(dir, "warehouse.duckdb")
	startHolder(t, path)
	r := run(t, dir, "query", "SELECT 1", "--lock-wait", "0s")
	require.Equal(t, ExitFailure, r.code)
	require.Contains(t, r.stderr, "the warehouse file "+path+" is in use by another process")
	require.Equal(t, 1, strings.Count(strings.TrimSpace(r.stderr), "\n")+1, r.stderr)
	require.NotContains(t, r.stderr, "panic")

	// Commands that need only the state do not wait for the warehouse:
	// planning works while the file is held; applying reports the lock.
	require.Contains(t, mustRun(t, dir, "plan", "--execution-time", t0), "Not applied.")
	r = run(t, dir, "plan", "--auto-apply", "--lock-wait", "0s", "--execution-time", t0)
	require.Equal(t, ExitFailure, r.code)
	require.Contains(t, r.stderr, "is in use by another process")
	require.Equal(t, "[]\n", mustRun(t, dir, "environments", "--json"))
}

// Scenario: the tour of a change. A breaking edit is planned into dev,
// which reuses prod's tables for the models it does not change; prod is
// untouched; invalidating dev and running the janitor removes dev's views,
// its own tables (with --snapshot-ttl 0: at once) and its state, and prod
// still serves.
func TestDevEnvironmentThenJanitor(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", t0)
	prod := statusOf(t, dir, "--execution-time", t0)

	file := filepath.Join(dir, "models", "daily_revenue.sql")
	src, err := os.ReadFile(file)
	require.NoError(t, err)
	edited := strings.Replace(string(src), "sum(e.amount) AS revenue", "sum(e.amount) AS revenue,\n  max(e.amount) AS biggest", 1)
	require.NotEqual(t, string(src), edited)
	require.NoError(t, os.WriteFile(file, []byte(edited), 0o644))

	out := mustRun(t, dir, "plan", "dev", "--auto-apply", "--execution-time", t0)
	require.Contains(t, out, "~ demo.daily_revenue")
	require.Contains(t, out, "+  max(e.amount) AS biggest")
	require.Contains(t, out, "~ demo.customer_totals  indirect-breaking: reads demo.daily_revenue, which changes breakingly")
	require.NotContains(t, out, "demo.events  ", "dev reuses prod's events table")

	dev := statusOf(t, dir, "dev", "--execution-time", t0)
	require.Equal(t, prod["demo.events"].Version, dev["demo.events"].Version)
	require.NotEqual(t, prod["demo.daily_revenue"].Version, dev["demo.daily_revenue"].Version)
	res := queryRows(t, dir, "SELECT max(biggest)::DOUBLE FROM demo__dev.daily_revenue")
	require.Equal(t, 9.0, res.Rows[0][0])
	r := run(t, dir, "query", "SELECT biggest FROM demo.daily_revenue")
	require.Equal(t, ExitFailure, r.code, "prod does not have the new column")

	r = run(t, dir, "invalidate", "prod")
	require.Equal(t, ExitFailure, r.code)
	mustRun(t, dir, "invalidate", "dev", "--execution-time", t0)
	var rep janitorReport
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, dir, "janitor", "--json", "--snapshot-ttl", "0", "--execution-time", t0)), &rep))
	require.Equal(t, []string{"dev"}, rep.Environments)
	require.Contains(t, rep.Tables, "gapless__demo.demo__daily_revenue__"+dev["demo.daily_revenue"].Version)
	require.NotContains(t, rep.Tables, "gapless__demo.demo__events__"+prod["demo.events"].Version)

	var envs []environmentRow
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, dir, "environments", "--json")), &envs))
	require.Len(t, envs, 1)
	require.Equal(t, float64(24*12), count(t, dir, "demo.events"))
	require.Equal(t, float64(5), count(t, dir, "demo.daily_revenue"))
	r = run(t, dir, "query", "SELECT 1 FROM demo__dev.daily_revenue")
	require.Equal(t, ExitFailure, r.code, "dev's views are gone")
}

// Scenario: render prints the SQL a run would send: macros substituted and
// model references pointed at physical tables.
func TestRender(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	out := mustRun(t, dir, "render", "demo.daily_revenue", "--start", "2024-01-01", "--end", "2024-01-02", "--execution-time", t0)
	require.Contains(t, out, `"gapless__demo"."demo__events__`)
	require.Contains(t, out, "2024-01-01")
	require.NotContains(t, out, "@start_ts")
}

// Scenario: migrate opens the state store and prints its schema version.
func TestMigrate(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	out := mustRun(t, dir, "migrate")
	require.Contains(t, out, "is at schema version")
	require.FileExists(t, filepath.Join(dir, ".gapless", "state.db"))
}

// Scenario: mistakes in how a command is called exit 2 with one message.
func TestNewCommandsUsageErrors(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	for _, args := range [][]string{
		{"plan", "a", "b"},
		{"plan", "Bad__Env"},
		{"plan", "--start", "yesterday"},
		{"plan", "--out", "p.json", "--auto-apply"},
		{"plan", "--start", "2024-02-01", "--end", "2024-01-01"},
		{"apply"},
		{"run", "--select-model"},
		{"status", "a", "b"},
		{"environments", "x"},
		{"invalidate"},
		{"render"},
		{"render", "demo.events", "--start", "2024-01-01"},
		{"query"},
		{"migrate", "x"},
		{"init", "a", "b"},
		{"status", "--log-level", "loud"},
	} {
		r := run(t, dir, args...)
		require.Equal(t, ExitUsage, r.code, "%v: %s", args, r.stderr)
		require.True(t, strings.HasPrefix(r.stderr, "gapless: "), "%v: %s", args, r.stderr)
	}
	require.NoFileExists(t, filepath.Join(dir, "p.json"))
}

// Scenario: a breaking change deployed to prod retires the previous version
// of the model and of its descendants; the janitor with --snapshot-ttl 0
// drops exactly their tables (never one prod serves), and prod still serves
// every row.
func TestJanitorDropsRetiredProdVersions(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", t0)
	before := statusOf(t, dir, "--execution-time", t0)

	file := filepath.Join(dir, "models", "daily_revenue.sql")
	src, err := os.ReadFile(file)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(file, []byte(strings.Replace(string(src), "count(*) AS events", "count(*) + 0 AS events", 1)), 0o644))
	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", t0)
	after := statusOf(t, dir, "--execution-time", t0)
	require.NotEqual(t, before["demo.daily_revenue"].Version, after["demo.daily_revenue"].Version)

	var rep janitorReport
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, dir, "janitor", "--json", "--snapshot-ttl", "0", "--execution-time", t0)), &rep))
	require.Empty(t, rep.Environments)
	require.Contains(t, rep.Tables, "gapless__demo.demo__daily_revenue__"+before["demo.daily_revenue"].Version)
	for name, row := range after {
		require.NotContains(t, rep.Tables, "gapless__demo."+strings.ReplaceAll(name, ".", "__")+"__"+row.Version, "%s is served", name)
	}
	require.Equal(t, float64(5), count(t, dir, "demo.daily_revenue"))
	require.Equal(t, float64(3), count(t, dir, "demo.top_customers"))

	// A second pass finds nothing more to do.
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, dir, "janitor", "--json", "--snapshot-ttl", "0", "--execution-time", t0)), &rep))
	require.Empty(t, rep.Tables)
}

// Scenario: restating a model recomputes its intervals and its
// descendants', replacing exactly their rows (no duplicates).
func TestPlanRestateModel(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", t0)
	var sum planSummary
	out := mustRun(t, dir, "plan", "--json", "--restate-model", "demo.events", "--execution-time", t0)
	require.NoError(t, json.Unmarshal([]byte(out), &sum))
	names := map[string]int{}
	for _, b := range sum.Backfills {
		names[b.Name] = b.Buckets
	}
	require.Equal(t, 24, names["demo.events"])
	require.Contains(t, names, "demo.daily_revenue")

	mustRun(t, dir, "plan", "--auto-apply", "--restate-model", "demo.events", "--execution-time", t0)
	require.Equal(t, float64(24*12), count(t, dir, "demo.events"))
	require.Equal(t, float64(5), count(t, dir, "demo.daily_revenue"))
}

// Scenario: a model whose SQL fails at run time. The apply stops with exit
// 1 naming the model and the interval, prod is not created, and the work
// that committed is kept: after the fix, the next apply does not redo it.
func TestFailedBatchNamesModelAndIntervalThenResumes(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	bad := filepath.Join(dir, "models", "bad.sql")
	require.NoError(t, os.WriteFile(bad, []byte(`MODEL (
  name demo.bad,
  kind INCREMENTAL_BY_TIME_RANGE (time_column ts),
  cron '@daily'
);

SELECT e.event_ts AS ts, CAST('x' || e.customer_id AS INTEGER) AS v
FROM demo.events AS e
WHERE e.event_ts BETWEEN @start_ts AND @end_ts
`), 0o644))
	r := run(t, dir, "plan", "--auto-apply", "--execution-time", t0)
	require.Equal(t, ExitFailure, r.code, r.stdout)
	require.Contains(t, r.stderr, "model demo.bad")
	require.Contains(t, r.stderr, "interval [2024-01-01T00:00:00Z, 2024-01-02T00:00:00Z)")
	require.NotContains(t, r.stderr, "goroutine")
	require.Equal(t, "[]\n", mustRun(t, dir, "environments", "--json"))

	require.NoError(t, os.WriteFile(bad, []byte(`MODEL (
  name demo.bad,
  kind INCREMENTAL_BY_TIME_RANGE (time_column ts),
  cron '@daily'
);

SELECT e.event_ts AS ts, e.customer_id AS v
FROM demo.events AS e
WHERE e.event_ts BETWEEN @start_ts AND @end_ts
`), 0o644))
	var sum planSummary
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, dir, "plan", "--json", "--execution-time", t0)), &sum))
	for _, b := range sum.Backfills {
		require.NotEqual(t, "demo.events", b.Name, "events committed before the failure: not redone")
	}
	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", t0)
	require.Equal(t, float64(24*12), count(t, dir, "demo.bad"))
	require.Equal(t, float64(24*12), count(t, dir, "demo.events"))
}

// Scenario: the README's tour. A change planned into dev, then into prod:
// prod's plan reuses what dev computed (no interval of the changed model is
// computed twice), and prod then serves the new column with every row.
func TestTourDevThenProdReusesDevTables(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", t0)
	file := filepath.Join(dir, "models", "daily_revenue.sql")
	src, err := os.ReadFile(file)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(file, []byte(strings.Replace(string(src),
		"sum(e.amount) AS revenue", "sum(e.amount) AS revenue,\n  max(e.amount) AS biggest", 1)), 0o644))

	mustRun(t, dir, "plan", "dev", "--auto-apply", "--execution-time", t0)
	var sum planSummary
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, dir, "plan", "prod", "--json", "--execution-time", t1)), &sum))
	require.Equal(t, []string{"demo.daily_revenue"}, sum.Direct)
	for _, b := range sum.Backfills {
		require.NotEqual(t, "demo.daily_revenue", b.Name, "dev computed it already")
	}
	mustRun(t, dir, "plan", "prod", "--auto-apply", "--execution-time", t1)
	require.Equal(t, statusOf(t, dir, "dev", "--execution-time", t1)["demo.daily_revenue"].Version,
		statusOf(t, dir, "--execution-time", t1)["demo.daily_revenue"].Version)
	res := queryRows(t, dir, "SELECT count(*)::float8, max(biggest)::float8 FROM demo.daily_revenue")
	require.Equal(t, []any{5.0, 9.0}, res.Rows[0])

	mustRun(t, dir, "run", "--execution-time", t1)
	require.Equal(t, float64(29*12), count(t, dir, "demo.events"))
}

// Scenario: two deploys to prod before the janitor runs: the versions
// retired by both are dropped with --snapshot-ttl 0 (the janitor reads
// every saved plan, not only the latest), and none that prod serves.
func TestJanitorWalksBackThroughEarlierPlans(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", t0)
	v1 := statusOf(t, dir, "--execution-time", t0)["demo.daily_revenue"].Version
	file := filepath.Join(dir, "models", "daily_revenue.sql")
	src, err := os.ReadFile(file)
	require.NoError(t, err)
	for _, edit := range []string{"count(*) + 0 AS events", "count(*) + 0 + 0 AS events"} {
		require.NoError(t, os.WriteFile(file, []byte(strings.Replace(string(src), "count(*) AS events", edit, 1)), 0o644))
		mustRun(t, dir, "plan", "--auto-apply", "--execution-time", t0)
	}
	st := statusOf(t, dir, "--execution-time", t0)
	require.NotEqual(t, v1, st["demo.daily_revenue"].Version)

	var rep janitorReport
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, dir, "janitor", "--json", "--snapshot-ttl", "0", "--execution-time", t0)), &rep))
	require.Contains(t, rep.Tables, "gapless__demo.demo__daily_revenue__"+v1)
	require.NotContains(t, rep.Tables, "gapless__demo.demo__daily_revenue__"+st["demo.daily_revenue"].Version)
	require.Equal(t, float64(5), count(t, dir, "demo.daily_revenue"))
}

// Scenario (seed 000's race, strict path): a breaking change is planned
// with --out at t1; the scheduler then runs at t1 and advances the
// incumbent's frontier past the plan's end; applying the saved plan fails
// the no-gap check, naming the model, the missing range and both
// frontiers, and promotes nothing. A fresh plan backfills only the new tail.
func TestStrictPromotionFailsWhenRunAdvancedTheIncumbent(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", t0)
	before := statusOf(t, dir, "--execution-time", t1)

	file := filepath.Join(dir, "models", "events.sql")
	src, err := os.ReadFile(file)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(file, []byte(strings.Replace(string(src), "* 1.5 AS amount", "* 2.5 AS amount", 1)), 0o644))
	mustRun(t, dir, "plan", "--out", "plan.json", "--execution-time", t1)

	mustRun(t, dir, "run", "--execution-time", t1) // the incumbent reaches 05:00
	r := run(t, dir, "apply", "plan.json")
	require.Equal(t, ExitFailure, r.code, r.stdout)
	require.Contains(t, r.stderr, "demo.events [incumbent_advanced] under strict")
	require.Contains(t, r.stderr, "[2024-01-02T00:00:00Z, 2024-01-02T05:00:00Z)")
	require.Contains(t, r.stderr, "frontier 2024-01-02T00:00:00Z at plan time, 2024-01-02T05:00:00Z now")
	require.Contains(t, r.stderr, "was not promoted")
	after := statusOf(t, dir, "--execution-time", t1)
	require.Equal(t, before["demo.events"].Version, after["demo.events"].Version, "prod still serves the incumbent")

	var sum planSummary
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, dir, "plan", "--json", "--execution-time", t1)), &sum))
	for _, b := range sum.Backfills {
		if b.Name == "demo.events" {
			require.Equal(t, []string{"[2024-01-02T00:00:00Z, 2024-01-02T05:00:00Z)"}, b.Ranges, "only the new tail")
		}
	}
	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", t1)
	st := statusOf(t, dir, "--execution-time", t1)
	require.NotEqual(t, before["demo.events"].Version, st["demo.events"].Version)
	require.Equal(t, []string{"[2024-01-01T00:00:00Z, 2024-01-02T05:00:00Z)"}, st["demo.events"].Covered)
	require.Equal(t, float64(29*12), count(t, dir, "demo.events"))
}
