// Package executetest is the shared test bundle of the execute, apply and
// run packages: a real in-memory DuckDB warehouse, a real SQLite state store
// in a temporary folder, a SQL parser, and helpers to write projects, load
// them and build plans against the store. No database is ever mocked.
package executetest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/internal/pgtest"
	"github.com/gapless-dev/gapless/internal/trinotest"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/project"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/sqlparse"
	"github.com/gapless-dev/gapless/state"
	pgstate "github.com/gapless-dev/gapless/state/postgres"
	"github.com/gapless-dev/gapless/state/sqlite"
	"github.com/gapless-dev/gapless/warehouse"
	"github.com/gapless-dev/gapless/warehouse/duckdb"
	pgwarehouse "github.com/gapless-dev/gapless/warehouse/postgres"
	"github.com/gapless-dev/gapless/warehouse/trino"
)

// Bundle is what a scenario test works with. Everything is closed by
// t.Cleanup.
type Bundle struct {
	Ctx    context.Context
	Engine warehouse.Engine
	Store  state.Store
	Parser *sqlparse.Parser
	// Dir is the project folder.
	Dir string
	// Backends names the warehouse and state backends, for subtests.
	Backends string
}

// Setup opens a fresh DuckDB (in memory) and SQLite store, and copies the
// given project files (path -> content) into a temporary folder; with
// quickstart set, examples/quickstart is copied first.
func Setup(t testing.TB, quickstart bool, files map[string]string) *Bundle {
	t.Helper()
	return setup(t, quickstart, files, "duckdb+sqlite",
		func(ctx context.Context) (warehouse.Engine, error) { return duckdb.Open(ctx, "", duckdb.Options{}) },
		func(ctx context.Context) (state.Store, error) {
			return sqlite.Open(ctx, filepath.Join(t.TempDir(), "state.db"))
		})
}

// SetupPostgres is Setup on the production backends: a PostgreSQL warehouse
// and a PostgreSQL state store, each in its own fresh database
// (internal/pgtest; skipped with the reason when no server is reachable,
// failed under CI=true).
func SetupPostgres(t testing.TB, quickstart bool, files map[string]string) *Bundle {
	t.Helper()
	pgtest.Require(t)
	return setup(t, quickstart, files, "postgres+postgres",
		func(ctx context.Context) (warehouse.Engine, error) {
			return pgwarehouse.Open(ctx, pgtest.NewDatabase(t))
		},
		func(ctx context.Context) (state.Store, error) { return pgstate.Open(ctx, pgtest.NewDatabase(t)) })
}

// SetupTrino is Setup on a Trino warehouse (a catalog of its own on the
// test cluster, internal/trinotest) with PostgreSQL state, as a production
// deployment on Trino keeps its state outside Trino.
func SetupTrino(t testing.TB, files map[string]string) *Bundle {
	t.Helper()
	return setup(t, false, files, "trino+postgres",
		func(ctx context.Context) (warehouse.Engine, error) { return trino.Open(ctx, trinotest.NewCatalog(t)) },
		func(ctx context.Context) (state.Store, error) { return pgstate.Open(ctx, pgtest.NewDatabase(t)) })
}

// setup writes the project (examples/quickstart first, with quickstart)
// and opens the engine, the store and a parser, each closed when t ends.
func setup(t testing.TB, quickstart bool, files map[string]string, backends string,
	openEngine func(context.Context) (warehouse.Engine, error), openStore func(context.Context) (state.Store, error)) *Bundle {
	t.Helper()
	ctx := t.Context()
	dir := t.TempDir()
	if quickstart {
		copyDir(t, filepath.Join(RepoRoot(), "examples", "quickstart"), dir)
	}
	WriteFiles(t, dir, files)
	eng, err := openEngine(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, eng.Close()) })
	st, err := openStore(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	p, err := sqlparse.Open()
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	return &Bundle{Ctx: ctx, Engine: eng, Store: st, Parser: p, Dir: dir, Backends: backends}
}

// RepoRoot is the module's root folder.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// WriteFiles writes files (path relative to dir -> content).
func WriteFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for rel, content := range files {
		p := filepath.Join(dir, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
}

func copyDir(t testing.TB, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o644)
	})
	require.NoError(t, err)
}

// Load loads the project folder afresh (snapshots carry fresh versions, so
// a project must be loaded once per plan).
func (b *Bundle) Load(t testing.TB) *project.Project {
	t.Helper()
	pr, _, err := project.Load(b.Ctx, b.Dir, b.Parser)
	require.NoError(t, err)
	return pr
}

// Served returns the snapshots environment env serves now, by name (empty
// when it does not exist), and the environment (nil then).
func (b *Bundle) Served(t testing.TB, env string) (map[string]*snapshot.Snapshot, *state.Environment) {
	t.Helper()
	e, err := b.Store.GetEnvironment(b.Ctx, env)
	if errors.Is(err, state.ErrNotFound) {
		return map[string]*snapshot.Snapshot{}, nil
	}
	require.NoError(t, err)
	if e.Invalidated {
		return map[string]*snapshot.Snapshot{}, nil
	}
	out, err := plan.Served(b.Ctx, b.Store, e)
	require.NoError(t, err)
	return out, e
}

// Plan loads the project and builds a plan with id for env at exec, the
// way the CLI does: a new development environment starts from prod.
// opts are the plan's as given: the zero value runs the no-gap check.
func (b *Bundle) Plan(t testing.TB, id, env string, exec time.Time, opts plan.Options) *plan.Plan {
	t.Helper()
	pr := b.Load(t)
	p, err := plan.Assemble(b.Ctx, plan.AssembleParams{
		Store: b.Store, Environment: env, Snapshots: pr.Snapshots, Graph: pr.Graph,
		Additive: project.Additive(b.Ctx, b.Parser), IDs: plan.Fixed(id), ExecutionTime: exec, Now: exec, Options: opts,
	})
	require.NoError(t, err)
	return p
}

// Replanner is the replanner apply's replan policy calls (plan.Replanner)
// on b's store and parser: replans of a plan get the ids prefix+"1",
// prefix+"2", ... and record their execution time as their creation time.
func (b *Bundle) Replanner(prefix string) func(ctx context.Context, prev *plan.Plan, at time.Time) (*plan.Plan, error) {
	return plan.Replanner(plan.ReplannerParams{Store: b.Store, IDs: plan.Numbered(prefix),
		Additive: func(ctx context.Context) snapshot.Additive { return project.Additive(ctx, b.Parser) }})
}

// Rows runs a query and returns its rows as text (values separated by a
// space), sorted, for comparisons that do not depend on the engine's Go
// types.
func (b *Bundle) Rows(t testing.TB, sql string) []string {
	t.Helper()
	res, err := b.Engine.Query(b.Ctx, sql)
	require.NoError(t, err)
	out := make([]string, len(res.Rows))
	for i, r := range res.Rows {
		out[i] = strings.TrimSuffix(fmt.Sprintln(r...), "\n")
	}
	sort.Strings(out)
	return out
}

// Count returns SELECT count(*) of sql's FROM target.
func (b *Bundle) Count(t testing.TB, from string) int64 {
	t.Helper()
	res, err := b.Engine.Query(b.Ctx, "SELECT count(*) FROM "+from)
	require.NoError(t, err)
	require.Len(t, res.Rows, 1)
	switch v := res.Rows[0][0].(type) {
	case int64:
		return v
	case int32:
		return int64(v)
	default:
		t.Fatalf("count returned %T", v)
		return 0
	}
}

// Intervals returns the covered set of name at version, as a string.
func (b *Bundle) Intervals(t testing.TB, name, version string) string {
	t.Helper()
	key := state.VersionKey{Name: name, Version: version}
	got, err := b.Store.GetIntervals(b.Ctx, []state.VersionKey{key})
	require.NoError(t, err)
	return got[key].String()
}

// At is a UTC time for tests: At(2024, 1, 2, 3) is 2024-01-02T03:00Z.
func At(y int, m time.Month, d, h int) time.Time { return time.Date(y, m, d, h, 0, 0, 0, time.UTC) }
