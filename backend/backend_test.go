package backend_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gapless-dev/gapless/backend"
	"github.com/gapless-dev/gapless/config"
	"github.com/gapless-dev/gapless/internal/pgtest"
	"github.com/gapless-dev/gapless/internal/trinotest"
	"github.com/gapless-dev/gapless/state/sqlite"
	"github.com/gapless-dev/gapless/warehouse"
)

// holdEnv, when set in the environment, turns this test binary into a
// process that holds the DuckDB file it names until its stdin closes.
const holdEnv = "GAPLESS_BACKEND_TEST_HOLD"

func TestMain(m *testing.M) {
	if path := os.Getenv(holdEnv); path != "" {
		os.Exit(hold(path))
	}
	goleak.VerifyTestMain(m)
}

func hold(path string) int {
	conn, err := config.ParseConn("duckdb://"+path, "/")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	e, err := backend.OpenEngine(context.Background(), conn, backend.Options{LockWait: -1})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("ready")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until stdin closes
	_ = e.Close()
	return 0
}

func writeConfig(t *testing.T, dir, yaml string) *config.Config {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, config.FileName), []byte(yaml), 0o644))
	cfg, err := config.LoadEnv(dir, nil)
	require.NoError(t, err)
	return cfg
}

// roundTrip checks that both halves of b answer.
func roundTrip(t *testing.T, b *backend.Backend) {
	t.Helper()
	ctx := context.Background()
	v, err := b.Store.SchemaVersion(ctx)
	require.NoError(t, err)
	require.Positive(t, v)
	require.NoError(t, b.Engine.CreateSchema(ctx, "s"))
	require.NoError(t, b.Engine.CreateTableAs(ctx, warehouse.CreateTableAsParams{
		Table: warehouse.Table{Schema: "s", Name: "t"}, Query: "SELECT 1 AS x", WithData: true}))
	res, err := b.Engine.Query(ctx, `SELECT x FROM s.t`)
	require.NoError(t, err)
	require.Len(t, res.Rows, 1)
}

// Scenario: a project without gapless.yaml gets the embedded default: a
// DuckDB warehouse and a SQLite state store, both files inside the project.
func TestOpenEmbeddedDefault(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg, err := config.LoadEnv(dir, nil)
	require.NoError(t, err)
	b, err := backend.Open(context.Background(), cfg, backend.Options{})
	require.NoError(t, err)
	roundTrip(t, b)
	require.NoError(t, b.Close())
	require.FileExists(t, filepath.Join(dir, "warehouse.duckdb"))
	require.FileExists(t, filepath.Join(dir, ".gapless", "state.db"))
}

// Scenario: gapless.yaml points both the warehouse and the state at one
// PostgreSQL database.
func TestOpenPostgres(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	cfg := writeConfig(t, t.TempDir(), "warehouse: "+url+"\nstate: "+url+"\n")
	b, err := backend.Open(context.Background(), cfg, backend.Options{})
	require.NoError(t, err)
	require.Equal(t, "postgres", b.Engine.Dialect())
	roundTrip(t, b)
	require.NoError(t, b.Close())
}

// Scenario: drivers in the wrong role are refused before anything opens.
func TestOpenRefusesWrongRoles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "warehouse: sqlite://w.db\n")
	_, err := backend.Open(context.Background(), cfg, backend.Options{})
	require.ErrorIs(t, err, backend.ErrUnsupported)
	require.Contains(t, err.Error(), "duckdb://, postgres:// or trino://")

	cfg = writeConfig(t, dir, "state: duckdb://s.duckdb\n")
	_, err = backend.Open(context.Background(), cfg, backend.Options{})
	require.ErrorIs(t, err, backend.ErrUnsupported)
	require.NoFileExists(t, filepath.Join(dir, "s.duckdb"))

	// Trino is a warehouse, never a state store (SQLMesh too keeps its
	// state outside Trino).
	cfg = writeConfig(t, dir, "state: trino://u@127.0.0.1:1/iceberg\n")
	_, err = backend.Open(context.Background(), cfg, backend.Options{})
	require.ErrorIs(t, err, backend.ErrUnsupported)
	require.Contains(t, err.Error(), "sqlite:// or postgres://")
}

// Scenario: gapless.yaml points the warehouse at a Trino cluster (a catalog
// of its own, Iceberg) with the state in PostgreSQL, the password of the
// Trino user, if any, from ${VAR}; tables round-trip and the engine
// declares that it cannot change several views at once.
func TestOpenTrino(t *testing.T) {
	t.Parallel()
	wh := trinotest.NewCatalog(t)
	cfg := writeConfig(t, t.TempDir(), "warehouse: "+wh+"\nstate: "+pgtest.NewDatabase(t)+"\n")
	b, err := backend.Open(context.Background(), cfg, backend.Options{})
	require.NoError(t, err)
	require.Equal(t, "trino", b.Engine.Dialect())
	require.False(t, b.Engine.Capabilities().AtomicViews)
	roundTrip(t, b)
	require.NoError(t, b.Close())
}

// Scenario: another process holds the warehouse file. Open gives up after
// its bounded wait with one line naming the file, and leaves no store open
// (opening again after the holder exits works).
func TestOpenReportsALockedWarehouse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg, err := config.LoadEnv(dir, nil)
	require.NoError(t, err)
	path := filepath.Join(dir, "warehouse.duckdb")

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holdEnv+"="+path)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	lines := bufio.NewScanner(stdout)
	require.True(t, lines.Scan())
	require.Equal(t, "ready", lines.Text())

	_, err = backend.Open(context.Background(), cfg, backend.Options{LockWait: -1})
	require.ErrorIs(t, err, backend.ErrLocked)
	require.Contains(t, err.Error(), path)
	require.Contains(t, err.Error(), "in use by another process")
	require.NotContains(t, err.Error(), "\n")

	require.NoError(t, stdin.Close())
	require.NoError(t, cmd.Wait())
	b, err := backend.Open(context.Background(), cfg, backend.Options{LockWait: -1})
	require.NoError(t, err)
	require.NoError(t, b.Close())
}

// Scenario: the halves mix: a DuckDB warehouse with PostgreSQL state.
func TestOpenDuckDBWarehouseWithPostgresState(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "warehouse: duckdb://data/w.duckdb\nstate: "+url+"\n")
	b, err := backend.Open(context.Background(), cfg, backend.Options{})
	require.NoError(t, err)
	require.Equal(t, "duckdb", b.Engine.Dialect())
	roundTrip(t, b)
	require.NoError(t, b.Close())
	require.FileExists(t, filepath.Join(dir, "data", "w.duckdb"))
}

// Scenario: StateOnly opens the store and leaves the warehouse closed, so a
// state-only command never waits for the DuckDB file.
func TestOpenStateOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg, err := config.LoadEnv(dir, nil)
	require.NoError(t, err)
	b, err := backend.Open(context.Background(), cfg, backend.Options{StateOnly: true})
	require.NoError(t, err)
	require.Nil(t, b.Engine)
	require.NoError(t, b.Close())
	require.NoFileExists(t, filepath.Join(dir, "warehouse.duckdb"))
}

// Scenario: gapless.yaml bounds the embedded warehouse with
// warehouse_settings (memory_limit and threads, as dbt-duckdb's settings);
// the warehouse the commands open, and the scratch engine plans describe
// on, run with them. Every size the file accepts, DuckDB reads.
func TestWarehouseSettingsReachDuckDB(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "warehouse_settings:\n  memory_limit: 300MiB\n  threads: 1\n")
	b, err := backend.Open(ctx, cfg, backend.Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, b.Close()) }()
	scratch, err := backend.OpenForPlanning(ctx, cfg.Warehouse)
	require.NoError(t, err)
	defer func() { require.NoError(t, scratch.Close()) }()
	for _, e := range []warehouse.Engine{b.Engine, scratch} {
		res, err := e.Query(ctx, "SELECT current_setting('memory_limit'), current_setting('threads')")
		require.NoError(t, err)
		require.Equal(t, "300.0 MiB", res.Rows[0][0])
		require.EqualValues(t, 1, res.Rows[0][1])
	}
	for _, size := range []string{"2GB", "512 mb", "100KiB", "1TB", "3 gigabytes", "1000000 bytes", "1.5GiB", "100B", "1 kilobyte", "2 terabytes"} {
		v, err := config.ParseMemoryLimit(size)
		require.NoError(t, err, size)
		e, err := backend.OpenEngine(ctx, config.Conn{Driver: config.DriverDuckDB, Path: config.Memory,
			Settings: config.DuckDBSettings{MemoryLimit: v}}, backend.Options{})
		require.NoError(t, err, "DuckDB reads %q", size)
		require.NoError(t, e.Close())
	}
}

func TestSQLiteStateSyncParameter(t *testing.T) {
	t.Parallel()
	// Scenario: a sqlite:// state store syncs its interval records and
	// leases as ?sync= says (normal when absent, full when asked); a bad
	// value or an unknown parameter is refused naming it, and creates no
	// file.
	dir := t.TempDir()
	for _, c := range []struct {
		query string
		want  sqlite.Sync
	}{{"", sqlite.SyncNormal}, {"?sync=normal", sqlite.SyncNormal}, {"?sync=full", sqlite.SyncFull}, {"?sync=FULL", sqlite.SyncFull}} {
		conn, err := config.ParseConn("sqlite://s"+fmt.Sprint(len(c.query))+".db"+c.query, dir)
		require.NoError(t, err)
		st, err := backend.OpenStore(t.Context(), conn)
		require.NoError(t, err, c.query)
		require.Equal(t, c.want, st.(*sqlite.Store).Sync(), c.query)
		require.NoError(t, st.Close())
	}
	for _, c := range []struct{ query, says string }{
		{"?sync=sometimes", `sync "sometimes"`},
		{"?synch=full", `unknown parameter "synch"`},
		{"?sync=full&sync=normal", "sync is given 2 times"},
	} {
		conn, err := config.ParseConn("sqlite://bad.db"+c.query, dir)
		require.NoError(t, err)
		_, err = backend.OpenStore(t.Context(), conn)
		require.ErrorIs(t, err, backend.ErrBadStateOption, c.query)
		require.ErrorContains(t, err, c.says)
		require.NoFileExists(t, filepath.Join(dir, "bad.db"))
	}
}
