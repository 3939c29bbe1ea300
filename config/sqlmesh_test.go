package config_test

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/config"
	"github.com/gapless-dev/gapless/model"
)

// initConfig is the config.yaml `sqlmesh init duckdb` (0.236.4) writes.
const initConfig = `# --- Gateway Connection ---
gateways:
  duckdb:
    connection:
      # For more information on configuring the connection to your execution engine, visit:
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
`

func writeFile(t *testing.T, dir, name, body string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
}

func TestSQLMesh_InitDuckDBConfig(t *testing.T) {
	t.Parallel()
	// Scenario: a folder made by `sqlmesh init duckdb`, without gapless.yaml:
	// its gateway's DuckDB file (relative to the project) is the warehouse,
	// the state is gapless's own default SQLite file, model_defaults apply,
	// and the linter block is named as ignored with its line.
	dir := t.TempDir()
	writeFile(t, dir, config.SQLMeshFile, initConfig)
	cfg, err := config.LoadEnv(dir, nil)
	require.NoError(t, err)
	require.True(t, cfg.SQLMesh)
	require.Equal(t, filepath.Join(dir, config.SQLMeshFile), cfg.File)
	require.Equal(t, "duckdb", cfg.Gateway)
	require.Equal(t, config.DriverDuckDB, cfg.Warehouse.Driver)
	require.Equal(t, filepath.Join(dir, "db.db"), cfg.Warehouse.Path)
	require.Equal(t, config.DriverSQLite, cfg.State.Driver)
	require.Equal(t, filepath.Join(dir, ".gapless", "state.db"), cfg.State.Path)
	require.Equal(t, model.DialectDuckDB, cfg.ModelDefaults.Dialect)
	require.Equal(t, "@daily", cfg.ModelDefaults.Cron)
	require.Equal(t, time.Date(2024, 2, 28, 0, 0, 0, 0, time.UTC), cfg.ModelDefaults.Start)
	require.Len(t, cfg.Warnings, 1)
	require.Contains(t, cfg.Warnings[0].Error(), "config.yaml:19:1: linter is not supported by gapless and is ignored")
	require.Equal(t, "db", config.WarehouseCatalog(cfg.Warehouse))

	// config.yml is read the same way.
	dir2 := t.TempDir()
	writeFile(t, dir2, config.SQLMeshFileAlt, "model_defaults:\n  dialect: duckdb\n  owner: data\n")
	cfg, err = config.LoadEnv(dir2, nil)
	require.NoError(t, err)
	require.Equal(t, "data", cfg.ModelDefaults.Owner)
	require.Equal(t, filepath.Join(dir2, "warehouse.duckdb"), cfg.Warehouse.Path)
}

func TestSQLMesh_PostgresGateway(t *testing.T) {
	t.Parallel()
	// Scenario: the second gateway is the default; its PostgreSQL connection
	// reads the password as SQLMesh writes env vars and the user as gapless
	// does; its state_connection is PostgreSQL too; gateway variables
	// override the root's.
	dir := t.TempDir()
	writeFile(t, dir, config.SQLMeshFile, `gateways:
  local:
    connection:
      type: duckdb
  pg:
    connection:
      type: postgres
      host: 127.0.0.1
      port: 5432
      user: ${PGUSER_X}
      password: {{ env_var('PG_PASS') }}
      database: analytics
      sslmode: disable
      concurrent_tasks: 4
    state_connection:
      type: postgres
      host: db.internal
      user: state
      password: "{{ env_var('STATE_PASS', 's3') }}"
      database: gapless_state
    variables:
      region: eu
default_gateway: pg
variables:
  region: us
  min_amount: 10
`)
	env := map[string]string{"PGUSER_X": "alice", "PG_PASS": "p@ss:w/rd"}
	cfg, err := config.LoadEnv(dir, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err)
	require.Equal(t, "pg", cfg.Gateway)
	require.Equal(t, config.DriverPostgres, cfg.Warehouse.Driver)
	require.Equal(t, "postgres://alice:p%40ss%3Aw%2Frd@127.0.0.1:5432/analytics?sslmode=disable", cfg.Warehouse.DSN)
	require.NotContains(t, cfg.Warehouse.String(), "p%40ss")
	require.Equal(t, "postgres://state:s3@db.internal/gapless_state", cfg.State.DSN)
	require.Equal(t, map[string]any{"region": "eu", "min_amount": int64(10)}, cfg.Variables)
	require.Equal(t, "analytics", config.WarehouseCatalog(cfg.Warehouse))
	require.Len(t, cfg.Warnings, 1)
	require.Contains(t, cfg.Warnings[0].Error(), "config.yaml:14:7: gateways.pg.connection.concurrent_tasks is not supported")
}

func TestSQLMesh_GaplessYAMLWins(t *testing.T) {
	t.Parallel()
	// Scenario: both files: gapless.yaml is the configuration.
	dir := t.TempDir()
	writeFile(t, dir, config.SQLMeshFile, "gateways:\n  x:\n    connection:\n      type: duckdb\n      database: other.db\n")
	writeFile(t, dir, config.FileName, "warehouse: duckdb://mine.duckdb\n")
	cfg, err := config.LoadEnv(dir, nil)
	require.NoError(t, err)
	require.False(t, cfg.SQLMesh)
	require.Equal(t, filepath.Join(dir, "mine.duckdb"), cfg.Warehouse.Path)
}

func TestSQLMesh_Errors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, file, yaml, want string
		is                     error
	}{
		{"a typo", config.SQLMeshFile, "model_defaults:\n  dialect: duckdb\ngatways:\n  x: {}\n", "config.yaml:3:1: unknown key gatways at the top level: did you mean gateways?", nil},
		{"a key changing results", config.SQLMeshFile, "model_defaults:\n  dialect: duckdb\nignore_patterns:\n  - x\n", "config.yaml:3:1: ignore_patterns is not supported by gapless, and ignoring it would change results", config.ErrUnsupported},
		{"a default kind", config.SQLMeshFile, "model_defaults:\n  dialect: duckdb\n  kind: FULL\n", "config.yaml:3:3: model_defaults.kind is not supported by gapless, and ignoring it would change results", config.ErrUnsupported},
		{"default audits not a list", config.SQLMeshFile, "model_defaults:\n  audits: not_null\n", "config.yaml:2:11: model_defaults.audits: want a list of audit calls", nil},
		{"a default audit that does not parse", config.SQLMeshFile, "model_defaults:\n  audits:\n    - not_null(columns := [id]\n", "config.yaml:3:7: model_defaults.audits: entry 1 (\"not_null(columns := [id]\")", nil},
		{"an unknown default", config.SQLMeshFile, "model_defaults:\n  crons: '@daily'\n", "config.yaml:2:3: unknown key crons in model_defaults", nil},
		{"a bad cron", config.SQLMeshFile, "model_defaults:\n  cron: 'every day'\n", "config.yaml:2:9: model_defaults.cron", nil},
		{"an unknown gateway", config.SQLMeshFile, "gateways:\n  a:\n    connection:\n      type: duckdb\n      database: x.db\ndefault_gateway: b\n", "config.yaml:6:18: default_gateway: b is not a gateway; gateways: a", nil},
		{"an unset env var", config.SQLMeshFile, "gateways:\n  a:\n    connection:\n      type: postgres\n      host: h\n      password: {{ env_var('NOPE_X') }}\n", "config.yaml:6:1: env_var('NOPE_X'): environment variable is not set", config.ErrUnsetVariable},
		{"an engine gapless does not read", config.SQLMeshFile, "gateways:\n  a:\n    connection:\n      type: snowflake\n", "config.yaml:4:13: gateways.a.connection.type: snowflake", config.ErrUnsupported},
		{"an in-memory duckdb", config.SQLMeshFile, "gateways:\n  a:\n    connection:\n      type: duckdb\n", "config.yaml:3:5: gateways.a.connection: a DuckDB database in memory is gone when the command ends", nil},
		{"a duckdb extension", config.SQLMeshFile, "gateways:\n  a:\n    connection:\n      type: duckdb\n      database: x.db\n      extensions: [spatial]\n", "config.yaml:6:7: gateways.a.connection.extensions is not supported", config.ErrUnsupported},
		{"an airflow scheduler", config.SQLMeshFile, "default_scheduler:\n  type: airflow\n", "config.yaml:1:1: default_scheduler is not supported", config.ErrUnsupported},
		{"config.py", config.SQLMeshPythonFile, "from sqlmesh.core.config import Config\n", "config.py: gapless runs no Python: write the configuration as config.yaml (SQLMesh's YAML form) or gapless.yaml", config.ErrPythonConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeFile(t, dir, tt.file, tt.yaml)
			_, err := config.LoadEnv(dir, nil)
			require.Error(t, err)
			var ce *config.Error
			require.True(t, errors.As(err, &ce), "%v", err)
			require.Contains(t, err.Error(), tt.want)
			if tt.is != nil {
				require.ErrorIs(t, err, tt.is)
			}
		})
	}
}

func TestExternalModels_Load(t *testing.T) {
	t.Parallel()
	// Scenario: external_models.yaml as SQLMesh writes it, schema.yaml (its
	// older name) and external_models/*.yaml; an entry for another gateway
	// is left out.
	dir := t.TempDir()
	writeFile(t, dir, config.ExternalModelsFile, `- name: '"db"."raw"."events"'
  description: landed events
  columns:
    id: INT
    ts: TIMESTAMP
    amount: DECIMAL(10, 2)
- name: raw.elsewhere
  gateway: prod
  columns:
    x: INT
`)
	writeFile(t, dir, config.ExternalModelsOldFile, "- name: raw.customers\n  columns:\n    \"Customer Id\": BIGINT\n")
	writeFile(t, dir, filepath.Join(config.ExternalModelsDir, "more.yaml"), "- name: raw.orders\n  columns: {id: INT}\n")
	ems, err := config.LoadExternalModels(dir, "local")
	require.NoError(t, err)
	require.Len(t, ems, 3)
	require.Equal(t, "db", ems[0].Catalog)
	require.Equal(t, "raw", ems[0].Schema)
	require.Equal(t, "events", ems[0].Table)
	require.Equal(t, "landed events", ems[0].Description)
	require.Equal(t, []config.ExternalColumn{{Name: "id", Type: "INT"}, {Name: "ts", Type: "TIMESTAMP"}, {Name: "amount", Type: "DECIMAL(10, 2)"}}, ems[0].Columns)
	require.Equal(t, 1, ems[0].Line)
	require.Equal(t, []config.ExternalColumn{{Name: "Customer Id", Type: "BIGINT"}}, ems[1].Columns)
	require.Equal(t, "orders", ems[2].Table)
}

func TestExternalModels_Errors(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, yaml, want string }{
		{"not a list", "name: raw.x\n", "external_models.yaml:1:5: want a list of external models"},
		{"an unknown key", "- name: raw.x\n  columns: {a: INT}\n- name: raw.y\n  colums: {a: INT}\n", "external_models.yaml:4:3: external model: unknown field \"colums\""},
		{"no columns", "- name: raw.x\n  columns: {a: INT}\n- name: raw.y\n", "external_models.yaml:3:1: external model raw.y declares no columns"},
		{"a bad name", "- name: a.b.c.d\n  columns: {a: INT}\n", "external_models.yaml:1:1: external model a.b.c.d: want schema.table or catalog.schema.table"},
		{"a type not a string", "- name: raw.x\n  columns:\n    a: INT\n    b: [1]\n", "external_models.yaml:4:1: external model raw.x: column b: want its type as a string"},
		{"a duplicate", "- name: raw.x\n  columns: {a: INT}\n- name: '\"raw\".\"x\"'\n  columns: {a: INT}\n", "external_models.yaml:3:1: external model \"raw\".\"x\" is already declared at"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeFile(t, dir, config.ExternalModelsFile, tt.yaml)
			_, err := config.LoadExternalModels(dir, "")
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestExternalModels_WriteMerges(t *testing.T) {
	t.Parallel()
	// Scenario: create_external_models' file: existing entries kept, new
	// ones added, all sorted by name; the file reads back.
	dir := t.TempDir()
	writeFile(t, dir, config.ExternalModelsFile, "- name: raw.zeta\n  description: kept\n  columns:\n    z: TEXT\n")
	file, err := config.WriteExternalModels(dir, []config.ExternalModel{
		{Name: config.QualifiedName("db", "raw", "alpha"), Catalog: "db", Schema: "raw", Table: "alpha", Columns: []config.ExternalColumn{{Name: "id", Type: "INTEGER"}, {Name: "note: x", Type: "VARCHAR"}}},
		{Name: "raw.zeta", Schema: "raw", Table: "zeta", Columns: []config.ExternalColumn{{Name: "other", Type: "INT"}}},
	})
	require.NoError(t, err)
	body, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, `- name: '"db"."raw"."alpha"'
  columns:
    id: INTEGER
    'note: x': VARCHAR
- name: raw.zeta
  description: kept
  columns:
    z: TEXT
`, string(body))
	ems, err := config.LoadExternalModels(dir, "")
	require.NoError(t, err)
	require.Len(t, ems, 2)
	require.Equal(t, "note: x", ems[0].Columns[1].Name)
}

// TestSQLMesh_GaplessYAMLWinsSaysSoOnce is not parallel: it reads what is
// logged through slog's default logger.
func TestSQLMesh_GaplessYAMLWinsSaysSoOnce(t *testing.T) {
	// Scenario: loading a folder with both files twice says once, at info
	// level, that gapless.yaml is read and config.yaml is not.
	var buf bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	t.Cleanup(func() { slog.SetDefault(prev) })
	dir := t.TempDir()
	writeFile(t, dir, config.SQLMeshFile, "model_defaults:\n  dialect: duckdb\n")
	writeFile(t, dir, config.FileName, "model_defaults:\n  cron: '@hourly'\n")
	for range 2 {
		cfg, err := config.LoadEnv(dir, nil)
		require.NoError(t, err)
		require.Equal(t, "@hourly", cfg.ModelDefaults.Cron)
	}
	require.Equal(t, 1, strings.Count(buf.String(), "gapless.yaml is the configuration; config.yaml (SQLMesh's) is not read"), buf.String())
	require.Contains(t, buf.String(), "level=INFO")
}
