package cli

import (
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/internal/pgtest"
)

// sqlmeshInitFiles are the files `sqlmesh init duckdb` (0.236.4) writes,
// as it writes them (the config's comments shortened).
var sqlmeshInitFiles = map[string]string{
	"config.yaml": `# --- Gateway Connection ---
gateways:
  duckdb:
    connection:
      # https://sqlmesh.readthedocs.io/en/stable/integrations/engines/duckdb/#connection-options
      type: duckdb
      database: db.db
      # concurrent_tasks: 1

default_gateway: duckdb

# --- Model Defaults ---
model_defaults:
  dialect: duckdb
  start: 2024-02-28 # Start date for backfill history
  cron: '@daily'    # Run models daily at 12am UTC (can override per model)

# --- Linting Rules ---
linter:
  enabled: true
  rules:
    - ambiguousorinvalidcolumn
    - invalidselectstarexpansion
    - noambiguousprojections
`,
	"models/full_model.sql": `MODEL (
  name sqlmesh_example.full_model,
  kind FULL,
  cron '@daily',
  grain item_id,
  audits (assert_positive_order_ids),
);

SELECT
  item_id,
  COUNT(DISTINCT id) AS num_orders,
FROM
  sqlmesh_example.incremental_model
GROUP BY item_id
  `,
	"models/incremental_model.sql": `MODEL (
  name sqlmesh_example.incremental_model,
  kind INCREMENTAL_BY_TIME_RANGE (
    time_column event_date
  ),
  start '2020-01-01',
  cron '@daily',
  grain (id, event_date)
);

SELECT
  id,
  item_id,
  event_date,
FROM
  sqlmesh_example.seed_model
WHERE
  event_date BETWEEN @start_date AND @end_date
  `,
	"models/seed_model.sql": `MODEL (
  name sqlmesh_example.seed_model,
  kind SEED (
    path '../seeds/seed_data.csv'
  ),
  columns (
    id INTEGER,
    item_id INTEGER,
    event_date DATE
  ),
  grain (id, event_date)
);
  `,
	"audits/assert_positive_order_ids.sql": `AUDIT (
  name assert_positive_order_ids,
);

SELECT *
FROM @this_model
WHERE
  item_id < 0
  `,
	"seeds/seed_data.csv": `id,item_id,event_date
1,2,2020-01-01
2,1,2020-01-01
3,3,2020-01-03
4,1,2020-01-04
5,1,2020-01-05
6,1,2020-01-06
7,1,2020-01-07
`,
	"tests/test_full_model.yaml": `test_example_full_model:
  model: sqlmesh_example.full_model
  inputs:
    sqlmesh_example.incremental_model:
      rows:
      - id: 1
        item_id: 1
      - id: 2
        item_id: 1
      - id: 3
        item_id: 2
  outputs:
    query:
      rows:
      - item_id: 1
        num_orders: 2
      - item_id: 2
        num_orders: 1
`,
	"macros/__init__.py": "",
	"models/.gitkeep":    "",
	"audits/.gitkeep":    "",
	"seeds/.gitkeep":     "",
	"macros/.gitkeep":    "",
}

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
	return dir
}

// overlay is base with files written over it; a file whose body is ""
// is left out.
func overlay(base, files map[string]string) map[string]string {
	out := map[string]string{}
	for name, body := range base {
		out[name] = body
	}
	for name, body := range files {
		out[name] = body
	}
	for name, body := range out {
		if body == "" {
			delete(out, name)
		}
	}
	return out
}

func TestSQLMeshInitProject_PlansAsIs(t *testing.T) {
	t.Parallel()
	// Scenario: the folder `sqlmesh init duckdb` makes, with no gapless.yaml:
	// plan --auto-apply builds it in the gateway's DuckDB file (db.db, in
	// the project), with gapless's state in .gapless/state.db, and serves
	// SQLMesh's rows.
	dir := writeFiles(t, sqlmeshInitFiles)
	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", "2024-03-01 10:30:00")
	require.FileExists(t, filepath.Join(dir, "db.db"))
	require.FileExists(t, filepath.Join(dir, ".gapless", "state.db"))
	res := queryRows(t, dir, "SELECT item_id, CAST(num_orders AS INT) AS n FROM sqlmesh_example.full_model ORDER BY item_id")
	require.Equal(t, [][]any{{float64(1), float64(5)}, {float64(2), float64(1)}, {float64(3), float64(1)}}, res.Rows)
}

func TestCreateExternalModels_WritesWhatPlanUses(t *testing.T) {
	t.Parallel()
	// Scenario: a model reads raw.events, a table something else landed in
	// the warehouse: plan refuses it until create_external_models declares
	// it from the warehouse's columns in external_models.yaml; then the
	// plan uses the declaration. A second call keeps the entry and adds
	// nothing.
	dir := writeFiles(t, map[string]string{
		"config.yaml":       "gateways:\n  local:\n    connection:\n      type: duckdb\n      database: wh.duckdb\nmodel_defaults:\n  dialect: duckdb\n  start: 2024-02-28\n",
		"models/totals.sql": "MODEL (name mart.totals, kind FULL);\nSELECT kind, SUM(amount) AS total FROM raw.events GROUP BY kind",
	})
	mustRun(t, dir, "query", "--allow-writes", "CREATE SCHEMA raw")
	mustRun(t, dir, "query", "--allow-writes", "CREATE TABLE raw.events AS SELECT * FROM (VALUES (1, 'a', 2.5), (2, 'a', 1.5), (3, 'b', 4.0)) t(id, kind, amount)")

	r := run(t, dir, "plan", "--auto-apply", "--execution-time", "2024-03-01 10:30:00")
	require.Equal(t, ExitFailure, r.code)
	require.Contains(t, r.stderr, "reads raw.events, which is neither a model, a source nor a declared EXTERNAL table")

	out := mustRun(t, dir, "create_external_models")
	require.Contains(t, out, "1 external model(s) added")
	body, err := os.ReadFile(filepath.Join(dir, "external_models.yaml"))
	require.NoError(t, err)
	require.Equal(t, `- name: '"wh"."raw"."events"'
  columns:
    id: INTEGER
    kind: VARCHAR
    amount: DECIMAL(2,1)
`, string(body))

	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", "2024-03-01 10:30:00")
	res := queryRows(t, dir, "SELECT kind, CAST(total AS DOUBLE) AS t FROM mart.totals ORDER BY kind")
	require.Equal(t, [][]any{{"a", 4.0}, {"b", 4.0}}, res.Rows)

	out = mustRun(t, dir, "create_external_models")
	require.Contains(t, out, "0 external model(s) added")
	again, err := os.ReadFile(filepath.Join(dir, "external_models.yaml"))
	require.NoError(t, err)
	require.Equal(t, string(body), string(again))
}

func TestSQLMeshConfig_PythonRefused(t *testing.T) {
	t.Parallel()
	// Scenario: a project configured by config.py only: refused, saying
	// what to write instead.
	dir := writeFiles(t, map[string]string{
		"config.py":       "from sqlmesh.core.config import Config\nconfig = Config()\n",
		"models/a.sql":    "MODEL (name m.a, kind VIEW);\nSELECT 1 AS x",
		"models/.gitkeep": "",
	})
	r := run(t, dir, "plan", "--auto-apply", "--execution-time", "2024-03-01 10:30:00")
	require.Equal(t, ExitFailure, r.code)
	require.Contains(t, r.stderr, "config.py: gapless runs no Python: write the configuration as config.yaml (SQLMesh's YAML form) or gapless.yaml")
}

func TestSQLMeshConfig_PostgresGateway(t *testing.T) {
	t.Parallel()
	// Scenario: config.yaml's gateway is PostgreSQL, its password given as
	// SQLMesh writes env vars (here unset, so its default applies): the
	// models are built on that server.
	u, err := url.Parse(pgtest.NewDatabase(t))
	require.NoError(t, err)
	pass, _ := u.User.Password()
	cfg := "gateways:\n  pg:\n    connection:\n      type: postgres\n" +
		"      host: " + u.Hostname() + "\n      port: " + u.Port() + "\n      user: " + u.User.Username() + "\n" +
		"      password: \"{{ env_var('GAPLESS_TEST_SQLMESH_UNSET', '" + pass + "') }}\"\n      database: " + u.Path[1:] + "\n" +
		"      sslmode: disable\nmodel_defaults:\n  dialect: postgres\n  start: 2024-02-28\n"
	dir := writeFiles(t, map[string]string{
		"config.yaml":  cfg,
		"models/a.sql": "MODEL (name m.a, kind FULL);\nSELECT current_setting('server_version_num') IS NOT NULL AS on_postgres",
	})
	mustRun(t, dir, "plan", "--auto-apply", "--execution-time", "2024-03-01 10:30:00")
	res := queryRows(t, dir, "SELECT on_postgres FROM m.a")
	require.Equal(t, [][]any{{true}}, res.Rows)
}
