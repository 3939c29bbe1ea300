// Package warehousetest is the conformance suite of warehouse.Engine: the
// contract every engine (warehouse/duckdb, warehouse/postgres) passes. An
// engine's tests call Run with a Factory that returns a fresh, empty engine
// per test; benchmarks call RunBenchmarks.
//
// The suite is written in SQL that DuckDB and PostgreSQL both accept:
// VALUES lists with column aliases, generate_series(a, b) AS s(g),
// TIMESTAMP '…' and DATE '…' literals, CAST(… AS BIGINT|TEXT|VARCHAR|DOUBLE
// PRECISION), information_schema, and $1-style parameters. Values read back
// are compared after Normalize, so that int32 and int64, []byte and string,
// or a time.Time's location do not matter.
//
// # The contract, beyond the comments of warehouse.Engine
//
// Names:
//   - Schema, table and column names are used exactly as given, quoted: a
//     name may hold Unicode, spaces, quotes, dots, or be a reserved word.
//     An empty name, or one with a NUL byte or invalid UTF-8, is an error
//     and creates nothing.
//   - A column type in CreateTable is SQL text and the one thing rendered
//     raw, so an engine refuses types that could end the statement
//     ("BIGINT); DROP TABLE x; --").
//
// Queries:
//   - Every method that takes a query runs it as exactly one statement: a
//     query that smuggles in a second one ("SELECT 1) AS q; DROP TABLE x;
//     SELECT (1") is an error and runs nothing. So does Query.
//   - A query may end with semicolons or a line comment.
//   - ReadOnlyQuery runs reads (SELECT, WITH ... SELECT, VALUES, EXPLAIN)
//     and refuses, with warehouse.ErrNotARead, every other statement:
//     writes, DDL, COPY, SET, transaction control, several statements, and
//     a write hidden in a read (EXPLAIN ANALYZE DELETE, nextval). A refused
//     statement changes nothing, and leaves the engine able to write.
//
// Tables and views:
//   - CreateSchema is idempotent, also when racing itself.
//   - CreateTable and CreateTableAs fail when the name is taken, changing
//     nothing.
//   - DropTable and DropView succeed when the object or its schema does not
//     exist, and fail, dropping nothing, when the name is the other kind.
//   - CreateOrReplaceView may change the view's columns (added, removed,
//     renamed, retyped), fails when a table has that name, and is safe to
//     race on one view.
//   - CreateOrReplaceViews is all or nothing: when any view of the batch
//     fails (a bad query, a table's name, an invalid name, a view named
//     twice) every view keeps its old definition and none is created; it
//     may change columns, may create a view that reads one created earlier
//     in the batch, and a read joining two views of one batch sees both old
//     or both new. An empty batch is a no-op.
//   - Columns fails for a missing table and returns, for a view, the view's
//     columns. Its types are the engine's spelling of the actual type, and
//     CreateTable accepts them back unchanged.
//
// Errors:
//   - Every error is a *warehouse.Error. The same mistake wraps the same
//     sentinel of package warehouse on every engine (errors.Is):
//     ErrInvalidIdentifier, ErrInvalidType, ErrInvalidArgument,
//     ErrDuplicateKey, ErrNotFound (a missing table, for Columns and the
//     writes) and ErrNotATable (a write into a view), and no other of them.
//
// Writes:
//   - InsertInterval's query must produce every column of the table (other
//     columns are ignored); rows with a NULL time are not inserted; Start
//     must be before End. Racing InsertInterval calls on one table, on the
//     same interval or on different ones, end with each row exactly once.
//   - MergeByKey compares keys NULL-safely (a NULL key matches a NULL key),
//     refuses a query that returns one key twice (changing nothing), and
//     racing merges end with one row per key.
//   - ReplaceTable gives the table the query's columns, creates a missing
//     table, fails on a view's name, serves concurrent readers the old or
//     the new content and never neither, leaves no temporary table behind
//     when it fails, and keeps views over the table working: after a swap a
//     view over the table serves the new rows, as long as the columns it
//     names still exist. Racing swaps of one table all succeed and leave
//     one of them.
//   - InsertRows is all-or-nothing and binds every value as a parameter.
//   - InsertInterval with Text bounds compares a text time column with
//     them byte by byte.
//
// Describing:
//   - Describe returns a query's columns with the types Columns spells
//     (CreateTable accepts them back), reads a real table rather than its
//     stand-in, and leaves nothing behind: no stand-in, no schema, also
//     when the query fails; a query it cannot bind fails with the SQL.
//
// Errors and lifecycle:
//   - Every failure is a *warehouse.Error with Op and Object set; Object and
//     the message name the table; SQL is set when a statement failed.
//   - A cancelled context fails the call with an error wrapping
//     context.Canceled and changes nothing.
//   - Close may be called twice; calls after Close fail and never panic.
package warehousetest

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
)

// Factory returns a fresh, empty engine for one test (its own database or
// file). The suite closes it.
type Factory func(t *testing.T) warehouse.Engine

// scenario is one conformance test: it gets a fixture on a fresh engine.
type scenario struct {
	name string
	run  func(t *testing.T, f *fixture)
}

// Run runs the conformance suite against the engines newEngine returns.
// Every scenario runs in parallel with the others, each on its own engine.
func Run(t *testing.T, newEngine Factory) {
	t.Helper()
	groups := []struct {
		name      string
		scenarios []scenario
		// concurrent runs every InsertInterval with Concurrent set (see
		// concurrentEngine).
		concurrent bool
	}{
		{"Schema", schemaScenarios, false},
		{"Table", tableScenarios, false},
		{"View", viewScenarios, false},
		{"Views", viewBatchScenarios, false},
		{"Query", queryScenarios, false},
		{"ReadOnlyQuery", readOnlyScenarios, false},
		{"Describe", describeScenarios, false},
		{"InsertInterval", insertIntervalScenarios, false},
		{"MergeByKey", mergeScenarios, false},
		{"ReplaceTable", replaceScenarios, false},
		{"InsertRows", insertRowsScenarios, false},
		{"Identifiers", identifierScenarios, false},
		{"Errors", errorScenarios, false},
		{"Concurrency", concurrencyScenarios, false},
		{"InsertIntervalConcurrent", insertIntervalScenarios, true},
		{"ConcurrencyConcurrent", concurrencyScenarios, true},
		{"Ingest", ingestScenarios, false},
		{"IngestSkip", skipScenarios, false},
		{"DropGeneration", dropGenerationScenarios, false},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			for _, s := range g.scenarios {
				t.Run(s.name, func(t *testing.T) {
					t.Parallel()
					f := setup(t, newEngine)
					if g.concurrent {
						f.e = concurrentEngine{f.e}
					}
					s.run(t, f)
				})
			}
		})
	}
}

// concurrentEngine sets InsertIntervalParams.Concurrent on every
// InsertInterval, so that the scenarios check the staged path of engines
// that have one keeps every promise of the plain path.
type concurrentEngine struct{ warehouse.Engine }

func (c concurrentEngine) InsertInterval(ctx context.Context, p warehouse.InsertIntervalParams) (int64, error) {
	p.Concurrent = true
	return c.Engine.InsertInterval(ctx, p)
}

// fixture is one scenario's engine, with a schema created for it.
type fixture struct {
	t      *testing.T
	ctx    context.Context
	e      warehouse.Engine
	schema string
}

// testSchema is the schema every scenario starts with.
const testSchema = "wt"

func setup(t *testing.T, newEngine Factory) *fixture {
	t.Helper()
	e := newEngine(t)
	require.NotNil(t, e, "the factory returned no engine")
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("closing the engine: %v", err)
		}
	})
	f := &fixture{t: t, ctx: t.Context(), e: e, schema: testSchema}
	require.NoError(t, e.CreateSchema(f.ctx, testSchema))
	return f
}

// table names a table in the fixture's schema.
func (f *fixture) table(name string) warehouse.Table {
	return warehouse.Table{Schema: f.schema, Name: name}
}

// q quotes t for SQL.
func (f *fixture) q(t warehouse.Table) string { return f.e.QuoteTable(t) }

// qi quotes an identifier for SQL.
func (f *fixture) qi(name string) string { return f.e.QuoteIdent(name) }

// query runs sql and returns its normalised rows, failing the test on error.
func (f *fixture) query(sql string, args ...any) [][]any {
	f.t.Helper()
	res, err := f.e.Query(f.ctx, sql, args...)
	require.NoError(f.t, err, "query: %s", sql)
	require.NotNil(f.t, res)
	return NormalizeRows(res.Rows)
}

// rowsOf returns every row of t ordered by the given columns.
func (f *fixture) rowsOf(t warehouse.Table, cols string, orderBy string) [][]any {
	f.t.Helper()
	return f.query("SELECT " + cols + " FROM " + f.q(t) + " ORDER BY " + orderBy)
}

// count returns the number of rows of t.
func (f *fixture) count(t warehouse.Table) int64 {
	f.t.Helper()
	rows := f.query("SELECT count(*) FROM " + f.q(t))
	require.Len(f.t, rows, 1)
	n, ok := rows[0][0].(int64)
	require.True(f.t, ok, "count(*) returned %T", rows[0][0])
	return n
}

// createAs creates t from query, with its rows, failing the test on error.
func (f *fixture) createAs(t warehouse.Table, query string) {
	f.t.Helper()
	require.NoError(f.t, f.e.CreateTableAs(f.ctx, warehouse.CreateTableAsParams{Table: t, Query: query, WithData: true}))
}

// objects lists the names of the tables and views of schema, sorted.
func (f *fixture) objects(schema string) []string {
	f.t.Helper()
	rows := f.query("SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name", schema)
	names := make([]string, 0, len(rows))
	for _, r := range rows {
		names = append(names, fmt.Sprint(r[0]))
	}
	return names
}

// canary creates canary.x with one row; an injection test ends with
// requireCanary proving it survived.
func (f *fixture) canary() warehouse.Table {
	f.t.Helper()
	c := warehouse.Table{Schema: "canary", Name: "x"}
	require.NoError(f.t, f.e.CreateSchema(f.ctx, c.Schema))
	f.createAs(c, "SELECT 1 AS alive")
	return c
}

func (f *fixture) requireCanary(c warehouse.Table) {
	f.t.Helper()
	ok, err := f.e.TableExists(f.ctx, c)
	require.NoError(f.t, err)
	require.True(f.t, ok, "the canary table %s was dropped", c)
	require.Equal(f.t, [][]any{{int64(1)}}, f.query("SELECT alive FROM "+f.q(c)))
}

// requireEngineError checks err is a *warehouse.Error for op on t: Op and
// Object are set, and Object and the message name the table.
func requireEngineError(t *testing.T, err error, table warehouse.Table) *warehouse.Error {
	t.Helper()
	require.Error(t, err)
	var we *warehouse.Error
	require.True(t, errors.As(err, &we), "error is %T, not a *warehouse.Error: %v", err, err)
	require.NotEmpty(t, we.Op, "Error.Op is empty: %v", err)
	require.NotEmpty(t, we.Object, "Error.Object is empty: %v", err)
	require.Contains(t, we.Object, table.Name, "Error.Object does not name the table")
	require.Contains(t, err.Error(), table.Name, "the message does not name the table")
	return we
}

// ts returns 2024-01-01 at hour:minute:second UTC.
func ts(hour, minute, second int) time.Time {
	return time.Date(2024, 1, 1, hour, minute, second, 0, time.UTC)
}

// Normalize maps a value read from an engine to a comparable Go value:
// every integer to int64, float32 to float64, []byte to string, time.Time
// to UTC. Driver-specific values (DuckDB's Decimal and HUGEINT, pgx's
// Numeric) go through their driver.Valuer or fmt.Stringer: a result that
// reads as an integer becomes an int64, as a number a float64, anything
// else stays a string. Plain strings are never converted. Other values are
// returned as they are.
func Normalize(v any) any {
	switch x := v.(type) {
	case nil:
		return nil
	case int:
		return int64(x)
	case int8:
		return int64(x)
	case int16:
		return int64(x)
	case int32:
		return int64(x)
	case int64:
		return x
	case uint8:
		return int64(x)
	case uint16:
		return int64(x)
	case uint32:
		return int64(x)
	case uint64:
		return int64(x)
	case uint:
		return int64(x)
	case float32:
		return float64(x)
	case float64, string, bool:
		return x
	case []byte:
		return string(x)
	case time.Time:
		return x.UTC()
	case driver.Valuer:
		if rv := reflect.ValueOf(x); rv.Kind() == reflect.Pointer && rv.IsNil() {
			return nil
		}
		val, err := x.Value()
		if err != nil {
			return fmt.Sprintf("!Value: %v", err)
		}
		if s, ok := val.(string); ok {
			return number(s)
		}
		return Normalize(val)
	case fmt.Stringer:
		return number(x.String())
	}
	return v
}

// number reads s as an int64 or a float64 if it can, or returns it.
func number(s string) any {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return f
	}
	return s
}

// NormalizeRows applies Normalize to every value.
func NormalizeRows(rows [][]any) [][]any {
	out := make([][]any, len(rows))
	for i, r := range rows {
		out[i] = make([]any, len(r))
		for j, v := range r {
			out[i][j] = Normalize(v)
		}
	}
	return out
}

// row builds an expected row, normalised.
func row(vals ...any) []any {
	out := make([]any, len(vals))
	for i, v := range vals {
		out[i] = Normalize(v)
	}
	return out
}

// typeFamily maps an engine's spelling of a column type to a name shared by
// DuckDB and PostgreSQL, for checking Columns.
func typeFamily(typ string) string {
	s := strings.Join(strings.Fields(strings.ToLower(typ)), " ")
	switch s {
	case "bigint", "int8", "int64":
		return "bigint"
	case "integer", "int", "int4", "int32":
		return "integer"
	case "text", "varchar", "character varying", "string":
		return "text"
	case "timestamp", "timestamp without time zone":
		return "timestamp"
	case "timestamp with time zone", "timestamptz":
		return "timestamptz"
	case "boolean", "bool":
		return "boolean"
	case "double", "double precision", "float8":
		return "double"
	case "date":
		return "date"
	}
	for _, prefix := range []string{"decimal", "numeric"} {
		if rest, ok := strings.CutPrefix(s, prefix); ok && strings.HasPrefix(rest, "(") {
			return "numeric" + strings.ReplaceAll(rest, " ", "")
		}
	}
	return s
}
