// Package warehousetest is the conformance suite of warehouse.Engine: the
// contract every engine (warehouse/duckdb, warehouse/postgres,
// warehouse/trino) passes. An engine's tests call Run with a Factory that
// returns a fresh, empty engine per test (its own file, database or
// catalog); benchmarks call RunBenchmarks. Every scenario runs on every
// engine; none is skipped.
//
// # Portable SQL
//
// The suite's SQL is what DuckDB, PostgreSQL and Trino all read: SELECT
// with VALUES lists and column aliases ((VALUES (1, 'a')) AS v(id, name)),
// joins ON a condition (Trino refuses a qualified column of JOIN USING),
// TIMESTAMP '2024-01-01 01:00:00' and DATE '…' literals, INTERVAL 'k' UNIT
// literals, CAST(… AS …) (never ::) to BIGINT, INTEGER, VARCHAR, DOUBLE
// PRECISION, DECIMAL(p,s), DATE, TIMESTAMP [WITH TIME ZONE],
// information_schema, count, sum, floor, %, CASE and UNION ALL. The few
// spellings that differ come from the dialect of Engine.Dialect
// (dialect.go), chosen when a scenario starts; an unknown dialect fails
// the test naming it:
//   - param(n): the n-th bound argument, $n (DuckDB, PostgreSQL) or ?
//     (Trino);
//   - text() and cast(x, "TEXT"): the text type, TEXT or Trino's VARCHAR
//     (CreateTable is still given TEXT, which every engine accepts);
//   - series(a, b): a FROM item s(g) of the integers a..b,
//     generate_series or Trino's UNNEST(sequence(a, b));
//   - hourly(from, to, n, tag): n rows per hour between two hours;
//   - listObjects() and listSchemas(): a schema's tables and views, and a
//     schema, from information_schema (on Trino the session catalog's);
//   - the statements ReadOnlyQuery must refuse (readOnlyRefusals): COPY,
//     SET and nextval on DuckDB and PostgreSQL; CALL, SET SESSION, START
//     TRANSACTION, GRANT, ANALYZE and EXPLAIN ANALYZE of an INSERT on
//     Trino, besides the writes and DDL all three share.
//
// Values read back are compared after Normalize, so that int32 and int64,
// []byte and string, or a time.Time's location do not matter.
//
// # Capabilities
//
// Where engines differ, each declares what it guarantees
// (Engine.Capabilities) and the suite asserts the declaration: the strong
// guarantee where it is claimed, the weaker stated one elsewhere. The group
// Capabilities checks the declaration is stable and honest. Run opens one
// engine first to read it, which picks the scenarios below.
//   - AtomicViews: a batch of views changes in one transaction, and a
//     reader joining two views sees both old or both new. Without it the
//     views change one at a time in the order given, and a reader sees a
//     prefix of the batch new, never a missing view (Views/ReadersSeeAPrefix
//     instead of Views/ReadersNeverSeeAMix).
//   - CaseSensitiveNames: names round-trip as given. Without it names fold
//     to lower case: Columns and information_schema return them folded,
//     and "MixedCase" and "mixedcase" are one object.
//   - Ingest: the groups Ingest, IngestSkip and DropGeneration run where it
//     is declared; elsewhere the group Ingest holds one scenario proving
//     the engine implements neither warehouse.Ingester nor
//     GenerationDropper.
//
// # The contract, beyond the comments of warehouse.Engine
//
// Names:
//   - Schema, table and column names are used exactly as given, quoted: a
//     name may hold Unicode, spaces, quotes, dots, or be a reserved word
//     (folded to lower case where the engine declares no
//     CaseSensitiveNames). An empty name, or one with a NUL byte or
//     invalid UTF-8, is an error and creates nothing. An engine that cannot
//     hold some other name refuses it up front with ErrInvalidIdentifier,
//     creating nothing; DuckDB and PostgreSQL refuse none.
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
//     writes, DDL, COPY, SET, CALL, GRANT, transaction control, several
//     statements, and a write hidden in a read (EXPLAIN ANALYZE of a
//     write, nextval). A refused statement changes nothing, and leaves the
//     engine able to write.
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
//   - CreateOrReplaceViews checks the whole batch first: when any view of
//     it fails a check (a bad query, a table's name, an invalid name, a
//     view named twice, a smuggled statement) every view keeps its old
//     definition and none is created. It replaces the views in the order
//     given, may change columns, and may create a view that reads one
//     created (or re-columned) earlier in the batch. With AtomicViews a
//     read joining two views of one batch sees both old or both new;
//     without, a reader of the views sees a prefix of the batch new. A
//     replace failing after the checks (PartialViewsError) cannot be
//     induced through Engine: engines test it with hooks of their own. An
//     empty batch is a no-op.
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
// One more engine, opened first, tells what the engine declares
// (Engine.Capabilities), which picks the scenarios of the groups whose
// contract depends on it: the strong guarantee where it is declared, the
// weaker stated one elsewhere, never a skip.
func Run(t *testing.T, newEngine Factory) {
	t.Helper()
	declared := probe(t, newEngine)
	type group struct {
		name      string
		scenarios []scenario
		// concurrent runs every InsertInterval with Concurrent set (see
		// concurrentEngine).
		concurrent bool
	}
	groups := []group{
		{"Capabilities", capabilityScenarios, false},
		{"Schema", schemaScenarios, false},
		{"Table", tableScenarios, false},
		{"View", viewScenarios, false},
		{"Views", viewBatchScenarios(declared), false},
		{"Query", queryScenarios, false},
		{"ReadOnlyQuery", readOnlyScenarios, false},
		{"Describe", describeScenarios, false},
		{"InsertInterval", insertIntervalScenarios, false},
		{"MergeByKey", mergeScenarios, false},
		{"ReplaceTable", replaceScenarios, false},
		{"Layout", layoutScenarios, false},
		{"InsertRows", insertRowsScenarios, false},
		{"Identifiers", identifierScenarios, false},
		{"Errors", errorScenarios, false},
		{"Concurrency", concurrencyScenarios, false},
		{"InsertIntervalConcurrent", insertIntervalScenarios, true},
		{"ConcurrencyConcurrent", concurrencyScenarios, true},
	}
	if declared.Ingest {
		groups = append(groups,
			group{"Ingest", ingestScenarios, false},
			group{"IngestSkip", skipScenarios, false},
			group{"DropGeneration", dropGenerationScenarios, false})
	} else {
		groups = append(groups, group{"Ingest", notIngestingScenarios, false})
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			for _, s := range g.scenarios {
				t.Run(s.name, func(t *testing.T) {
					t.Parallel()
					f := setup(t, newEngine)
					f.declared = declared
					if g.concurrent {
						f.e = concurrentEngine{f.e}
					}
					s.run(t, f)
				})
			}
		})
	}
}

// probe opens one engine of newEngine, checks the suite knows its dialect,
// and returns what it declares.
func probe(t *testing.T, newEngine Factory) warehouse.Capabilities {
	t.Helper()
	e := newEngine(t)
	require.NotNil(t, e, "the factory returned no engine")
	dialectOf(t, e)
	caps := e.Capabilities()
	require.NoError(t, e.Close(), "closing the engine that declared its capabilities")
	return caps
}

// concurrentEngine sets InsertIntervalParams.Concurrent on every
// InsertInterval, so that the scenarios check the staged path of engines
// that have one keeps every promise of the plain path.
type concurrentEngine struct{ warehouse.Engine }

func (c concurrentEngine) InsertInterval(ctx context.Context, p warehouse.InsertIntervalParams) (int64, error) {
	p.Concurrent = true
	return c.Engine.InsertInterval(ctx, p)
}

// fixture is one scenario's engine, with a schema created for it, and the
// SQL spellings of its dialect (dialect's methods: f.param, f.series,
// f.cast, ...).
type fixture struct {
	t      *testing.T
	ctx    context.Context
	e      warehouse.Engine
	schema string
	dialect
	// caps is what the engine declares, declared what the engine Run
	// opened first declared.
	caps, declared warehouse.Capabilities
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
	f := &fixture{t: t, ctx: t.Context(), e: e, schema: testSchema, dialect: dialectOf(t, e), caps: e.Capabilities()}
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

// fold is name as the engine keeps it: as given where names are case
// sensitive, else folded to lower case.
func (f *fixture) fold(name string) string {
	if f.caps.CaseSensitiveNames {
		return name
	}
	return strings.ToLower(name)
}

// objects lists the names of the tables and views of schema, sorted, as
// information_schema spells them (folded where the engine folds names).
func (f *fixture) objects(schema string) []string {
	f.t.Helper()
	rows := f.query(f.listObjects(), f.fold(schema))
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
// DuckDB, PostgreSQL and Trino, for checking Columns: Trino spells text
// varchar, a timestamp timestamp(6) (any precision is a timestamp), a
// timestamp with time zone timestamp(6) with time zone.
func typeFamily(typ string) string {
	s := strings.Join(strings.Fields(strings.ToLower(typ)), " ")
	if rest, ok := strings.CutPrefix(s, "timestamp("); ok {
		if digits, zone, ok := strings.Cut(rest, ")"); ok && digits != "" && strings.Trim(digits, "0123456789") == "" {
			s = "timestamp" + zone
		}
	}
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
