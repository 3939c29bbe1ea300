package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/config"
	"github.com/gapless-dev/gapless/cron"
	"github.com/gapless-dev/gapless/model"
)

// project writes gapless.yaml (unless content is nil) into a fresh directory
// and returns the directory.
func project(t *testing.T, content *string) string {
	t.Helper()
	dir := t.TempDir()
	if content != nil {
		require.NoError(t, os.WriteFile(filepath.Join(dir, config.FileName), []byte(*content), 0o600))
	}
	return dir
}

func ptr(s string) *string { return &s }

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

func TestLoad_MissingFileGivesDefaults(t *testing.T) {
	t.Parallel()
	dir := project(t, nil)
	cfg, err := config.LoadEnv(dir, nil)
	require.NoError(t, err)
	require.False(t, cfg.Found)
	require.Equal(t, dir, cfg.Dir)
	require.Equal(t, filepath.Join(dir, config.FileName), cfg.File)
	require.Equal(t, config.Conn{
		Driver: config.DriverDuckDB,
		Path:   filepath.Join(dir, "warehouse.duckdb"),
		DSN:    filepath.Join(dir, "warehouse.duckdb"),
	}, cfg.Warehouse)
	require.Equal(t, config.Conn{
		Driver: config.DriverSQLite,
		Path:   filepath.Join(dir, ".gapless", "state.db"),
		DSN:    filepath.Join(dir, ".gapless", "state.db"),
	}, cfg.State)
	require.Equal(t, model.Defaults{}, cfg.ModelDefaults)
	require.Empty(t, cfg.Environments)
	require.Equal(t, config.DefaultEnvironment, cfg.Environment("prod"))
	require.Equal(t, config.PolicyStrict, cfg.Environment("anything").OnIncumbentAdvance)
}

func TestLoad_EmptyFileGivesDefaults(t *testing.T) {
	t.Parallel()
	for _, content := range []string{"", "# only a comment\n", "---\n", "null\n"} {
		cfg, err := config.LoadEnv(project(t, ptr(content)), nil)
		require.NoError(t, err, "%q", content)
		require.True(t, cfg.Found)
		require.Equal(t, config.DriverDuckDB, cfg.Warehouse.Driver)
	}
}

func TestLoad_FullFile(t *testing.T) {
	t.Parallel()
	dir := project(t, ptr(`# project settings
warehouse: postgres://etl:${PGPASSWORD}@db.internal:5432/analytics?sslmode=require
state: sqlite:///var/lib/gapless/state.db?_busy_timeout=5000
model_defaults:
  dialect: postgres
  cron: '@hourly'
  start: 2024-01-01
  owner: data-eng
environments:
  prod:
    on_incumbent_advance: trailing-gap
    max_trailing_gap_intervals: 2
  dev: {on_incumbent_advance: lock}
  pr_42: {}
`))
	cfg, err := config.LoadEnv(dir, env(map[string]string{"PGPASSWORD": "s3cr$t"}))
	require.NoError(t, err)
	require.True(t, cfg.Found)
	require.Equal(t, config.Conn{
		Driver: config.DriverPostgres,
		DSN:    "postgres://etl:s3cr$t@db.internal:5432/analytics?sslmode=require",
	}, cfg.Warehouse)
	require.Equal(t, "postgres://etl:xxxxx@db.internal:5432/analytics?sslmode=require", cfg.Warehouse.String())
	require.Equal(t, config.Conn{
		Driver: config.DriverSQLite,
		Path:   "/var/lib/gapless/state.db",
		DSN:    "/var/lib/gapless/state.db?_busy_timeout=5000",
	}, cfg.State)
	require.Equal(t, model.Defaults{
		Dialect: model.DialectPostgres,
		Cron:    "@hourly",
		Start:   time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC),
		Owner:   "data-eng",
	}, cfg.ModelDefaults)
	require.Equal(t, map[string]config.Environment{
		"prod":  {OnIncumbentAdvance: config.PolicyTrailingGap, MaxTrailingGapIntervals: 2},
		"dev":   {OnIncumbentAdvance: config.PolicyLock},
		"pr_42": {OnIncumbentAdvance: config.PolicyStrict},
	}, cfg.Environments)
}

func TestLoad_DefaultsReachModels(t *testing.T) {
	t.Parallel()
	// Scenario: model_defaults in gapless.yaml apply to a model file that is
	// silent about them.
	dir := project(t, ptr("model_defaults:\n  cron: '0 * * * *'\n  owner: team-a\n"))
	cfg, err := config.LoadEnv(dir, nil)
	require.NoError(t, err)
	m, err := model.ParseFile("m.sql", []byte("MODEL (name s.t); SELECT 1"), cfg.ModelDefaults)
	require.NoError(t, err)
	require.Equal(t, "0 * * * *", m.Cron)
	require.Equal(t, "team-a", m.Owner)
}

func TestLoad_Errors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		content string
		env     map[string]string
		want    string // after "<dir>/gapless.yaml"
		key     string
	}{
		{
			name:    "unknown top-level key",
			content: "warehouse: duckdb://w.duckdb\nwarehose: duckdb://x.duckdb\n",
			want:    ":2:1: unknown key warehose at the top level: did you mean warehouse?",
			key:     "warehose",
		},
		{
			name:    "unknown nested key",
			content: "model_defaults:\n  dialet: duckdb\n",
			want:    ":2:3: unknown key dialet in model_defaults: did you mean dialect?",
			key:     "model_defaults.dialet",
		},
		{
			name:    "unknown environment key",
			content: "environments:\n  prod:\n    on_incumbent: strict\n",
			want:    ":3:5: unknown key on_incumbent in environments.prod: did you mean on_incumbent_advance?",
			key:     "environments.prod.on_incumbent",
		},
		{
			name:    "unknown key, nothing close",
			content: "plugins: []\n",
			want:    ":1:1: unknown key plugins at the top level (keys: warehouse, warehouse_settings, state, environment_ttl, snapshot_ttl, model_defaults, environments, github, variables, before_all, after_all)",
			key:     "plugins",
		},
		{
			name:    "duplicate key",
			content: "state: sqlite://a.db\nstate: sqlite://b.db\n",
			want:    `:2:1: mapping key "state" already defined at [1:1]`,
			key:     "",
		},
		{
			name:    "bad policy",
			content: "environments:\n  prod:\n    on_incumbent_advance: trailing_gap\n",
			want:    `:3:27: environments.prod.on_incumbent_advance: unknown promotion policy "trailing_gap": did you mean trailing-gap?`,
			key:     "environments.prod.on_incumbent_advance",
		},
		{
			name:    "negative trailing gap",
			content: "environments:\n  prod: {max_trailing_gap_intervals: -1}\n",
			want:    ":2:38: environments.prod.max_trailing_gap_intervals must not be negative, got -1",
			key:     "environments.prod.max_trailing_gap_intervals",
		},
		{
			name:    "fractional trailing gap",
			content: "environments:\n  prod: {max_trailing_gap_intervals: 1.5}\n",
			want:    ":2:38: environments.prod.max_trailing_gap_intervals: want a whole number, got 1.5",
			key:     "environments.prod.max_trailing_gap_intervals",
		},
		{
			name:    "wrong type",
			content: "environments:\n  prod:\n    max_trailing_gap_intervals: many\n",
			want:    ":3:33: environments.prod.max_trailing_gap_intervals: want an integer, got a string",
			key:     "environments.prod.max_trailing_gap_intervals",
		},
		{
			name:    "bad environment name",
			content: "environments:\n  Prod-EU: {}\n",
			want:    `:2:3: bad environment name "Prod-EU": use lower-case letters, digits and single underscores, starting with a letter`,
			key:     "environments.Prod-EU",
		},
		{
			name:    "unset variable",
			content: "warehouse: postgres://u:${PGPASSWORD}@h/db\n",
			want:    ":1:12: warehouse: environment variable is not set: ${PGPASSWORD} (set it, or write ${PGPASSWORD:-default})",
			key:     "warehouse",
		},
		{
			name:    "unknown driver",
			content: "\nstate: mysql://u@h/db\n",
			want:    `:2:8: state: bad connection string: unknown driver "mysql"; want duckdb, sqlite, postgres or trino`,
			key:     "state",
		},
		{
			name:    "no scheme",
			content: "warehouse: warehouse.duckdb\n",
			want:    ":1:12: warehouse: bad connection string: want DRIVER://..., with DRIVER one of duckdb, sqlite, postgres, trino",
			key:     "warehouse",
		},
		{
			name:    "bad default dialect",
			content: "model_defaults:\n  dialect: snowflak\n",
			want:    `:2:12: model_defaults.dialect: unknown dialect "snowflak": did you mean snowflake?`,
			key:     "model_defaults.dialect",
		},
		{
			name:    "ttl on prod",
			content: "environments:\n  dev: {ttl: 1d}\n  prod:\n    ttl: 7d\n",
			want:    ":4:5: environments.prod.ttl: prod never expires; remove ttl (environment_ttl and ttl apply to the other environments)",
			key:     "environments.prod.ttl",
		},
		{
			name:    "bad environment ttl",
			content: "environments:\n  dev:\n    ttl: 7 days\n",
			want:    `:3:10: environments.dev.ttl: bad duration "7 days": want a positive duration such as 12h, 7d, 2w, or never`,
			key:     "environments.dev.ttl",
		},
		{
			name:    "bad top-level ttl",
			content: "state: sqlite://s.db\nenvironment_ttl: 1 week\n",
			want:    `:2:18: environment_ttl: bad duration "1 week": want a positive duration such as 12h, 7d, 2w, or never`,
			key:     "environment_ttl",
		},
		{
			name:    "zero ttl",
			content: "environment_ttl: 0d\n",
			want:    `:1:18: environment_ttl: bad duration "0d": want a positive duration such as 12h, 7d, 2w, or never`,
			key:     "environment_ttl",
		},
		{
			name:    "negative ttl",
			content: "environment_ttl: -5h\n",
			want:    `:1:18: environment_ttl: bad duration "-5h": want a positive duration such as 12h, 7d, 2w, or never`,
			key:     "environment_ttl",
		},
		{
			name:    "ttl without a unit",
			content: "environment_ttl: 7\n",
			want:    `:1:18: environment_ttl: want a duration such as 12h, 7d, 2w or never, got 7`,
			key:     "environment_ttl",
		},
		{
			name:    "misspelt ttl key",
			content: "environments:\n  dev: {tll: 1d}\n",
			want:    ":2:9: unknown key tll in environments.dev: did you mean ttl?",
			key:     "environments.dev.tll",
		},
		{
			name:    "misspelt warehouse setting",
			content: "warehouse_settings:\n  memroy_limit: 2GB\n",
			want:    ":2:3: unknown key memroy_limit in warehouse_settings: did you mean memory_limit?",
			key:     "warehouse_settings.memroy_limit",
		},
		{
			name:    "memory limit without a unit",
			content: "warehouse_settings:\n  memory_limit: '2'\n",
			want:    `:2:17: warehouse_settings.memory_limit: bad warehouse setting: memory_limit "2" is not a size: want a number and a unit, such as 2GB, 512MB or 1.5GiB`,
			key:     "warehouse_settings.memory_limit",
		},
		{
			name:    "memory limit as a bare number",
			content: "warehouse_settings:\n  memory_limit: 2000000000\n",
			want:    `:2:17: warehouse_settings.memory_limit: want a size with its unit, such as 2GB, got 2000000000`,
			key:     "warehouse_settings.memory_limit",
		},
		{
			name:    "no threads",
			content: "warehouse_settings:\n  threads: 0\n",
			want:    `:2:12: warehouse_settings.threads: want at least 1, got 0`,
			key:     "warehouse_settings.threads",
		},
		{
			name:    "warehouse settings on postgres",
			content: "warehouse: postgres://h/db\nwarehouse_settings:\n  threads: 2\n",
			want:    `:2:1: warehouse_settings: applies to a duckdb:// warehouse only; the warehouse is postgres, whose settings are the server's`,
			key:     "warehouse_settings",
		},
		{
			name:    "options on a duckdb path",
			content: "warehouse: duckdb://w.duckdb?memory_limit=2GB\n",
			want:    `:1:12: warehouse: bad connection string: duckdb:// takes no ?options; set DuckDB's memory_limit and threads under warehouse_settings`,
			key:     "warehouse",
		},
		{
			name:    "bad default start",
			content: "model_defaults:\n  start: '2024-02-30'\n",
			want:    `:2:10: model_defaults.start: bad time "2024-02-30": parsing time "2024-02-30": day out of range`,
			key:     "model_defaults.start",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := project(t, ptr(tt.content))
			_, err := config.LoadEnv(dir, env(tt.env))
			require.EqualError(t, err, filepath.Join(dir, config.FileName)+tt.want)
			var ce *config.Error
			require.True(t, errors.As(err, &ce))
			require.Equal(t, tt.key, ce.Key)
		})
	}
}

// Scenario: a project on a small machine bounds the embedded warehouse
// with warehouse_settings, as dbt-duckdb's settings do; a project that
// says nothing keeps DuckDB's defaults.
func TestLoad_WarehouseSettings(t *testing.T) {
	t.Parallel()
	cfg, err := config.LoadEnv(project(t, ptr("warehouse: duckdb://w.duckdb\nwarehouse_settings:\n  memory_limit: 1.5 GiB\n  threads: 2\n")), nil)
	require.NoError(t, err)
	require.Equal(t, config.DuckDBSettings{MemoryLimit: "1.5 GiB", Threads: 2}, cfg.Warehouse.Settings)
	cfg, err = config.LoadEnv(project(t, ptr("warehouse_settings:\n  memory_limit: 512MB\n")), nil)
	require.NoError(t, err)
	require.Equal(t, config.DuckDBSettings{MemoryLimit: "512MB"}, cfg.Warehouse.Settings, "the default warehouse is DuckDB's")
	cfg, err = config.LoadEnv(project(t, nil), nil)
	require.NoError(t, err)
	require.True(t, cfg.Warehouse.Settings.IsZero())
	for _, ok := range []string{"2GB", "512 mb", "100KiB", "1TB", "3 gigabytes", "1000000 bytes"} {
		_, err := config.ParseMemoryLimit(ok)
		require.NoError(t, err, ok)
	}
	for _, bad := range []string{"", "2", "GB", "-1GB", "2 GB'; SET x = '1", "80%", "2XB"} {
		_, err := config.ParseMemoryLimit(bad)
		require.ErrorIs(t, err, config.ErrBadSetting, bad)
	}
}

// Scenario: environment_ttl sets how long every non-prod environment lives
// after a promotion (default one week, as in SQLMesh); environments.<name>.ttl
// overrides it, never is 0, and prod never expires whatever the file says.
func TestLoad_EnvironmentTTL(t *testing.T) {
	t.Parallel()
	day := 24 * time.Hour
	cfg, err := config.LoadEnv(project(t, nil), nil)
	require.NoError(t, err)
	require.Equal(t, config.DefaultEnvironmentTTL, cfg.EnvironmentTTL)
	require.Equal(t, 7*day, cfg.TTL("dev"))
	require.Zero(t, cfg.TTL("prod"))

	cfg, err = config.LoadEnv(project(t, ptr(`environment_ttl: 12h
environments:
  pr_1: {ttl: 2w}
  demo: {ttl: never}
  ci: {ttl: 90m}
  prod: {on_incumbent_advance: strict}
`)), nil)
	require.NoError(t, err)
	require.Equal(t, 12*time.Hour, cfg.EnvironmentTTL)
	require.Equal(t, 12*time.Hour, cfg.TTL("dev"), "not configured: the top-level ttl")
	require.Equal(t, 14*day, cfg.TTL("pr_1"))
	require.Zero(t, cfg.TTL("demo"), "never")
	require.Equal(t, 90*time.Minute, cfg.TTL("ci"))
	require.Zero(t, cfg.TTL("prod"))

	cfg, err = config.LoadEnv(project(t, ptr("environment_ttl: never\n")), nil)
	require.NoError(t, err)
	require.Zero(t, cfg.TTL("dev"))
}

func TestParseTTL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{
		"never": 0, "NEVER": 0, "7d": 7 * 24 * time.Hour, "2w": 14 * 24 * time.Hour, "12h": 12 * time.Hour,
		"1h30m": 90 * time.Minute, " 3d ": 3 * 24 * time.Hour,
	} {
		got, err := config.ParseTTL(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "0", "0h", "-1d", "d", "1.5d", "7 days", "forever", "99999999d", "1000000h"} {
		_, err := config.ParseTTL(in)
		require.ErrorIs(t, err, config.ErrBadTTL, in)
	}
}

// Scenario: snapshot_ttl sets how long the janitor keeps the tables of
// versions no environment serves (default one week, as in SQLMesh); 0 (bare
// or as a duration) drops them at once, never keeps them; anything else
// unreadable names the file, line and column.
func TestLoad_SnapshotTTL(t *testing.T) {
	t.Parallel()
	cfg, err := config.LoadEnv(project(t, nil), nil)
	require.NoError(t, err)
	require.Equal(t, config.DefaultSnapshotTTL, cfg.SnapshotTTL)
	require.Equal(t, 7*24*time.Hour, cfg.SnapshotTTL)
	for content, want := range map[string]time.Duration{
		"snapshot_ttl: 2w\n":    14 * 24 * time.Hour,
		"snapshot_ttl: '36h'\n": 36 * time.Hour,
		"snapshot_ttl: 0\n":     0,
		"snapshot_ttl: 0s\n":    0,
		"snapshot_ttl: never\n": config.NeverExpire,
	} {
		cfg, err := config.LoadEnv(project(t, ptr(content)), nil)
		require.NoError(t, err, content)
		require.Equal(t, want, cfg.SnapshotTTL, content)
	}
	for content, want := range map[string]string{
		"snapshot_ttl: soon\n":          `:1:15: snapshot_ttl: bad duration "soon": want a duration such as 12h, 7d, 2w, 0 (drop at once) or never`,
		"snapshot_ttl: -1d\n":           `:1:15: snapshot_ttl: bad duration "-1d": want a duration such as 12h, 7d, 2w, 0 (drop at once) or never`,
		"snapshot_ttl: 7\n":             `:1:15: snapshot_ttl: want a duration such as 12h, 7d, 2w, 0 or never, got 7`,
		"snapshot_tll: 7d\n":            `:1:1: unknown key snapshot_tll at the top level: did you mean snapshot_ttl?`,
		"state: s\nsnapshot_ttl: [1]\n": ":2:15: ",
	} {
		dir := project(t, ptr(content))
		_, err := config.LoadEnv(dir, nil)
		require.Error(t, err, content)
		require.Contains(t, err.Error(), filepath.Join(dir, config.FileName)+want, content)
		var ce *config.Error
		require.ErrorAs(t, err, &ce)
	}
}

func TestLoad_YAMLErrorsHavePositions(t *testing.T) {
	t.Parallel()
	for _, content := range []string{
		"warehouse: [unclosed\n",
		"environments:\n  prod:\n    max_trailing_gap_intervals: many\n",
		"- a list\n- not a mapping\n",
	} {
		dir := project(t, ptr(content))
		_, err := config.LoadEnv(dir, nil)
		var ce *config.Error
		require.True(t, errors.As(err, &ce), "%q: %v", content, err)
		require.Equal(t, filepath.Join(dir, config.FileName), ce.File)
		require.Positive(t, ce.Line, "%q: %v", content, err)
		require.Positive(t, ce.Col, "%q: %v", content, err)
	}
}

func TestLoad_BadDefaultCronWrapsCronError(t *testing.T) {
	t.Parallel()
	dir := project(t, ptr("model_defaults:\n  cron: '* * * * *'\n"))
	_, err := config.LoadEnv(dir, nil)
	require.ErrorIs(t, err, cron.ErrTooFrequent)
	require.ErrorContains(t, err, "gapless.yaml:2:9: model_defaults.cron: ")
}

func TestLoad_ReadsProcessEnvironment(t *testing.T) {
	// Not parallel: it sets a process environment variable.
	t.Setenv("GAPLESS_TEST_WAREHOUSE_FILE", "from-env.duckdb")
	dir := project(t, ptr("warehouse: duckdb://${GAPLESS_TEST_WAREHOUSE_FILE}\n"))
	cfg, err := config.Load(dir)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "from-env.duckdb"), cfg.Warehouse.Path)
}

func TestLoad_NotADirectory(t *testing.T) {
	t.Parallel()
	dir := project(t, nil)
	file := filepath.Join(dir, "plain")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	_, err := config.LoadEnv(file, nil)
	var ce *config.Error
	require.True(t, errors.As(err, &ce), "%v", err)
	require.Zero(t, ce.Line)
	require.Contains(t, err.Error(), "cannot read")
}

func TestExpand(t *testing.T) {
	t.Parallel()
	lookup := env(map[string]string{"USER": "etl", "EMPTY": "", "PW": "p$w"})
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"${USER}@host", "etl@host"},
		{"${MISSING:-fallback}", "fallback"},
		{"${EMPTY:-fallback}", "fallback"},
		{"${USER:-fallback}", "etl"},
		{"a$b $1 $USER", "a$b $1 $USER"},
		{"$${USER}", "${USER}"},
		{"${PW}", "p$w"},
		{"${EMPTY}", ""},
	}
	for _, tt := range tests {
		got, err := config.Expand(tt.in, lookup)
		require.NoError(t, err, tt.in)
		require.Equal(t, tt.want, got, tt.in)
	}
	_, err := config.Expand("${MISSING}", lookup)
	require.ErrorIs(t, err, config.ErrUnsetVariable)
	_, err = config.Expand("${USER", lookup)
	require.ErrorContains(t, err, "unterminated ${")
	_, err = config.Expand("${1X}", lookup)
	require.ErrorContains(t, err, `bad variable name "1X"`)
}

func TestParseConn(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want config.Conn
	}{
		{"duckdb://w.duckdb", config.Conn{Driver: config.DriverDuckDB, Path: "/p/w.duckdb", DSN: "/p/w.duckdb"}},
		{"DuckDB://../shared/w.duckdb", config.Conn{Driver: config.DriverDuckDB, Path: "/shared/w.duckdb", DSN: "/shared/w.duckdb"}},
		{"duckdb:///abs/w.duckdb", config.Conn{Driver: config.DriverDuckDB, Path: "/abs/w.duckdb", DSN: "/abs/w.duckdb"}},
		{"duckdb://:memory:", config.Conn{Driver: config.DriverDuckDB, Path: config.Memory, DSN: config.Memory}},
		{"sqlite3://s.db?_fk=1", config.Conn{Driver: config.DriverSQLite, Path: "/p/s.db", DSN: "/p/s.db?_fk=1"}},
		{"postgresql://h/db", config.Conn{Driver: config.DriverPostgres, DSN: "postgres://h/db"}},
		{"trino://ci@h:8080/iceberg", config.Conn{Driver: config.DriverTrino, DSN: "trino://ci@h:8080/iceberg"}},
		{"Trino://u:p@h/lake?secure=true", config.Conn{Driver: config.DriverTrino, DSN: "trino://u:p@h/lake?secure=true"}},
	}
	for _, tt := range tests {
		got, err := config.ParseConn(tt.in, "/p")
		require.NoError(t, err, tt.in)
		require.Equal(t, tt.want, got, tt.in)
	}
	for _, bad := range []string{"", "duckdb://", "sqlite://?x=1", "oracle://h", "postgres://u:p@h:bad/db",
		"trino://u:p@h:bad/c", "trino://h:8080/iceberg", "trino://u:p@h:8080", "trino://u:p@h/a/b", "trino:///c"} {
		_, err := config.ParseConn(bad, "/p")
		require.ErrorIs(t, err, config.ErrBadConn, bad)
		require.NotContains(t, err.Error(), "u:p", "errors never quote a connection string")
	}
	require.Equal(t, "duckdb:///p/w.duckdb", config.Conn{Driver: config.DriverDuckDB, Path: "/p/w.duckdb", DSN: "/p/w.duckdb"}.String())
	require.Equal(t, "trino://u:xxxxx@h/lake", config.Conn{Driver: config.DriverTrino, DSN: "trino://u:secret@h/lake"}.String())
}

func TestParsePolicy(t *testing.T) {
	t.Parallel()
	for _, p := range config.Policies {
		got, err := config.ParsePolicy(string(p))
		require.NoError(t, err)
		require.Equal(t, p, got)
	}
	got, err := config.ParsePolicy(" Catch-Up ")
	require.NoError(t, err)
	require.Equal(t, config.PolicyCatchUp, got)
	_, err = config.ParsePolicy("yolo")
	require.ErrorIs(t, err, config.ErrUnknownPolicy)
	require.ErrorContains(t, err, "policies: strict, trailing-gap, catch-up, replan, lock")
}
