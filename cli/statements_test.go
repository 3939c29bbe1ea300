package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// statementsProject writes a project whose daily model has pre- and
// post-statements and whose gapless.yaml has before_all and after_all
// statements logging into ops.runs, and creates the ops tables they use.
func statementsProject(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"gapless.yaml": `warehouse: duckdb://warehouse.duckdb
state: sqlite://.gapless/state.db
model_defaults:
  start: '2024-01-01'
variables:
  who: ops
before_all:
  - INSERT INTO ops.runs VALUES ('before', @this_env, @execution_ds, @who)
after_all:
  - INSERT INTO ops.runs VALUES ('after', @this_env, @execution_ds, @who)
`,
		"models/param.sql": "MODEL (name ops.param, kind EXTERNAL, columns (v VARCHAR));\n",
		"models/items.sql": `MODEL (
  name shop.items,
  kind INCREMENTAL_BY_TIME_RANGE (time_column ds, batch_size 1),
  cron '@daily'
);
DELETE FROM ops.param;
INSERT INTO ops.param VALUES (@start_ds);
SELECT CAST(p.v AS DATE) AS ds, 'x' AS tag FROM ops.param AS p;
INSERT INTO ops.log SELECT @start_ds, count(*) FROM @this_model WHERE ds = @start_ds;
ON_VIRTUAL_UPDATE_BEGIN;
INSERT INTO ops.vu SELECT count(*) FROM @this_model;
ON_VIRTUAL_UPDATE_END;
`,
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
	for _, sql := range []string{
		"CREATE SCHEMA ops",
		"CREATE TABLE ops.param (v VARCHAR)",
		"CREATE TABLE ops.log (ds VARCHAR, n BIGINT)",
		"CREATE TABLE ops.runs (stage VARCHAR, env VARCHAR, day VARCHAR, who VARCHAR)",
		"CREATE TABLE ops.vu (n BIGINT)",
	} {
		mustRun(t, dir, "query", "--allow-writes", sql)
	}
	return dir
}

// Scenario: through gapless plan --auto-apply and gapless run, a model's
// pre-statements run before each batch and the query reads what they
// wrote; its post-statement runs after each batch's rows are written.
// before_all and after_all run exactly once per apply and once per run,
// with @this_env and the execution time. A failing post-statement fails
// the run naming the model, the statement's file:line and the interval;
// the interval is not recorded and after_all does not run; the next run
// computes it again without duplicating its rows.
func TestStatements_PlanAndRunRunThemAroundBatches(t *testing.T) {
	t.Parallel()
	dir := statementsProject(t)
	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", "2024-01-03T00:30:00Z")
	require.Equal(t, [][]any{{"2024-01-01", "x"}, {"2024-01-02", "x"}},
		queryRows(t, dir, "SELECT CAST(ds AS VARCHAR), tag FROM shop.items ORDER BY ds").Rows)
	require.Equal(t, [][]any{{"2024-01-01", float64(1)}, {"2024-01-02", float64(1)}},
		queryRows(t, dir, "SELECT ds, n FROM ops.log ORDER BY ds").Rows)
	require.Equal(t, [][]any{{"before", "prod", "2024-01-03", "ops"}, {"after", "prod", "2024-01-03", "ops"}},
		queryRows(t, dir, "SELECT * FROM ops.runs").Rows)

	mustRun(t, dir, "run", "--execution-time", "2024-01-04T00:30:00Z")
	require.Equal(t, [][]any{{"2024-01-03", float64(1)}},
		queryRows(t, dir, "SELECT ds, n FROM ops.log WHERE ds = '2024-01-03'").Rows)
	require.Equal(t, [][]any{{"before", "2024-01-04"}, {"after", "2024-01-04"}},
		queryRows(t, dir, "SELECT stage, day FROM ops.runs WHERE day = '2024-01-04'").Rows)
	require.Equal(t, [][]any{{float64(2)}}, queryRows(t, dir, "SELECT n FROM ops.vu").Rows,
		"the on-virtual-update statement ran once, after the view was pointed at the table, and not on run")

	// A change to the on-virtual-update block alone is metadata: the plan
	// rebuilds nothing, and its apply runs the new statements.
	items := filepath.Join(dir, "models", "items.sql")
	src, err := os.ReadFile(items)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(items, []byte(strings.Replace(string(src), "SELECT count(*) FROM @this_model;", "SELECT count(*) + 100 FROM @this_model;", 1)), 0o644))
	out := mustRun(t, dir, "plan", "--auto-apply", "--execution-time", "2024-01-04T00:30:00Z")
	require.Contains(t, out, "metadata")
	require.Equal(t, [][]any{{float64(2)}, {float64(103)}}, queryRows(t, dir, "SELECT n FROM ops.vu ORDER BY n").Rows)

	mustRun(t, dir, "query", "--allow-writes", "DROP TABLE ops.log")
	r := run(t, dir, "run", "--execution-time", "2024-01-05T00:30:00Z")
	require.Equal(t, ExitFailure, r.code, r.stdout)
	require.Contains(t, r.stderr, "model shop.items (version ")
	require.Contains(t, r.stderr, "interval [2024-01-04T00:00:00Z, 2024-01-05T00:00:00Z): post-statement at models/items.sql:9:1: ")
	require.Equal(t, [][]any{{"before", "2024-01-05"}},
		queryRows(t, dir, "SELECT stage, day FROM ops.runs WHERE day = '2024-01-05'").Rows, "after_all does not run after a failure")
	require.Equal(t, [][]any{{float64(1)}},
		queryRows(t, dir, "SELECT count(*) FROM shop.items WHERE ds = DATE '2024-01-04'").Rows, "written before the post-statement failed")

	mustRun(t, dir, "query", "--allow-writes", "CREATE TABLE ops.log (ds VARCHAR, n BIGINT)")
	mustRun(t, dir, "run", "--execution-time", "2024-01-05T00:30:00Z")
	require.Equal(t, [][]any{{"2024-01-04", float64(1)}},
		queryRows(t, dir, "SELECT ds, n FROM ops.log").Rows, "the interval was not recorded, so it ran again")
	require.Equal(t, [][]any{{float64(1)}},
		queryRows(t, dir, "SELECT count(*) FROM shop.items WHERE ds = DATE '2024-01-04'").Rows, "and replaced its rows")
}

// Scenario: a model statement or a before_all item whose effect lasts only
// for a session is refused when the project loads, with its file:line.
func TestStatements_SessionScopedAreRefusedWithTheirLine(t *testing.T) {
	t.Parallel()
	dir := statementsProject(t)
	items := filepath.Join(dir, "models", "items.sql")
	require.NoError(t, os.WriteFile(items, []byte("MODEL (name shop.items, kind FULL);\nSET threads = 1;\nSELECT 1 AS id;\n"), 0o644))
	r := run(t, dir, "plan", "--execution-time", "2024-01-03T00:30:00Z")
	require.Equal(t, ExitFailure, r.code, r.stdout)
	require.Contains(t, r.stderr, "models/items.sql:2:1: model shop.items: pre-statement \"SET threads = 1\": SET changes a setting of the session that runs it")

	yaml := filepath.Join(dir, "gapless.yaml")
	require.NoError(t, os.WriteFile(yaml, []byte("model_defaults:\n  start: '2024-01-01'\nbefore_all:\n  - CREATE TABLE IF NOT EXISTS ops.t (a INT)\n  - USE ops\n"), 0o644))
	r = run(t, dir, "plan", "--execution-time", "2024-01-03T00:30:00Z")
	require.Equal(t, ExitFailure, r.code, r.stdout)
	require.Contains(t, r.stderr, "gapless.yaml:5:5: before_all: item 2: USE changes the current catalog or schema")
}
