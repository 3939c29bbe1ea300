// Package warehouse defines the engine that runs model SQL: creating schemas,
// tables and views, inserting an interval's rows, merging by key, swapping a
// rebuilt table in, and reading rows.
//
// Each backend (warehouse/duckdb, the embedded default, warehouse/postgres
// and warehouse/trino) implements Engine and passes the one conformance
// suite in warehouse/warehousetest. Where engines differ (whether several
// views change in one transaction, whether names keep their case, whether
// sources can land exactly once), each declares what it guarantees
// (Capabilities) and the suite asserts exactly that.
//
// Invariants every engine keeps:
//   - identifiers are always quoted with the engine's own quoting, so a name
//     with quotes, spaces, Unicode or a reserved word is just a name; values
//     are always bound parameters or literals rendered by the engine;
//   - InsertInterval replaces exactly the rows of [Start, End) in the time
//     column, in one transaction (on Trino, one MERGE: one Iceberg commit):
//     re-running an interval never duplicates and never touches rows
//     outside it;
//   - ReplaceTable builds the new table beside the old one and swaps it in
//     within one transaction (on Trino, CREATE OR REPLACE TABLE ... AS): if
//     anything fails, the old table still serves, intact;
//   - CreateOrReplaceViews repoints a whole environment in one transaction
//     where the engine declares Capabilities.AtomicViews: a reader never
//     sees some views old and others new, and a batch that fails changes no
//     view. Elsewhere (Trino) it checks the whole batch first and then
//     repoints the views one at a time in the order given;
//   - every error is an *Error naming the operation, the object and the SQL;
//     the mistakes errors.go names (a bad name or type, a missing table, a
//     view where a table is needed, ...) wrap its sentinels, the same on
//     every engine.
//
// DuckDB and PostgreSQL also implement Ingester (ingest.go): the steps that
// land a source exactly once, each one transaction holding the fence check,
// the data write and the marker. Trino, without multi-statement
// transactions, does not (Capabilities.Ingest is false).
package warehouse

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrNotARead is wrapped by Engine.ReadOnlyQuery when the statement is not
// a read (a write, DDL, COPY, ATTACH, SET, several statements, ...): the
// statement did not run, or ran in a read-only transaction that was rolled
// back, so nothing changed.
var ErrNotARead = errors.New("not a read")

// Table names a table or view: a schema and a name, both unquoted.
type Table struct {
	Schema string `json:"schema"`
	Name   string `json:"name"`
}

// String renders the name for messages (not for SQL: engines quote).
func (t Table) String() string { return t.Schema + "." + t.Name }

// Column is a column name and its SQL type as the engine spells it.
type Column struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// Result is the rows of a query, fully read.
type Result struct {
	Columns []string `json:"columns"`
	// Types are the columns' types as the engine names them, upper case
	// (DATE, TIMESTAMP, ...; "" where the engine does not say), one per
	// column: a DATE and a TIMESTAMP at midnight are the same time.Time, and
	// only the type tells a printer which to show.
	Types []string `json:"types,omitempty"`
	Rows  [][]any  `json:"rows"`
}

// CreateTableParams creates an empty table with the given columns.
type CreateTableParams struct {
	Table   Table
	Columns []Column
	// Layout is applied to the new table (see Layout); the zero Layout
	// asks nothing.
	Layout Layout
}

// CreateTableAsParams creates a table from a query. With WithData false the
// table gets the query's columns and no rows.
type CreateTableAsParams struct {
	Table    Table
	Query    string
	WithData bool
	// Columns is a hint for a table made without data: the columns Query
	// produces, derived beforehand (execute.Check's, a deploy's create
	// stage passes them for FULL models). An engine may make the table
	// from them without binding Query again; it may ignore them. A hint
	// gone wrong costs nothing but speed: a FULL model's first build
	// (ReplaceTableParams.FirstBuild) compares the table with its query
	// and swaps in the query's columns when they differ.
	Columns []Column
	// Layout is applied to the new table (see Layout).
	Layout Layout
}

// InsertIntervalParams replaces the rows of [Start, End) of TimeColumn in
// Table with the rows of Query that fall in that range. Rows of Query
// outside the range are not inserted. Columns are matched by name.
type InsertIntervalParams struct {
	Table      Table
	TimeColumn string
	Start, End time.Time
	Query      string
	// Concurrent says other InsertIntervals of disjoint ranges of Table may
	// be running (a backfill's concurrent batches). An engine that makes a
	// table's writers take turns then computes the rows before it takes
	// its turn, so that the queries overlap and only the writes wait. The
	// outcome is the same: exactly the interval's rows are replaced.
	Concurrent bool
	// Text, when set, says that TimeColumn holds text (a string time column
	// with a format, as time_column (ds, '%Y-%m-%d')): the interval's rows
	// are those whose time column is at least Text.Start and below
	// Text.End, compared as text, byte by byte. Start and End still name the
	// interval.
	Text *TextBounds
}

// TextBounds are an interval's bounds rendered in the format of a string
// time column. The format sorts as time does, so comparing text compares
// times.
type TextBounds struct {
	Start, End string
}

// DescribeParams asks for the columns a query produces, writing nothing.
// StandIns are empty tables that exist only for the description, in a
// transaction that is rolled back: the parents of a model that are not
// built yet. A stand-in whose name a table or view already has is skipped:
// the query then reads the real one.
type DescribeParams struct {
	Query    string
	StandIns []CreateTableParams
}

// Described is one query's answer from DescribeAll: its columns, or the
// error Describe would have returned for it alone.
type Described struct {
	Columns []Column
	Err     error
}

// BatchDescriber is an Engine that describes many queries at once, for
// less than one Describe each (DuckDB: one transaction, each stand-in
// created once). DescribeAll answers ps in order, each exactly as
// Describe(ctx, ps[i]) would: one query's failure is its own Described.Err
// and leaves the others' answers as they would be alone. Its error is the
// engine's (no connection, a cancelled context), for the whole batch. Like
// Describe it leaves nothing behind.
type BatchDescriber interface {
	DescribeAll(ctx context.Context, ps []DescribeParams) ([]Described, error)
}

// RowReplacer is an Engine whose ReplaceTable can tell, for no further
// statement, how many rows the table holds afterwards. ReplaceTableRows is
// ReplaceTable; known says whether rows is that count (otherwise the
// caller counts).
type RowReplacer interface {
	ReplaceTableRows(ctx context.Context, p ReplaceTableParams) (rows int64, known bool, err error)
}

// MergeParams upserts Query's rows into Table by Key: rows whose key exists
// are replaced, others inserted. Columns are matched by name.
type MergeParams struct {
	Table Table
	Key   []string
	Query string
}

// ReplaceTableParams rebuilds Table from Query beside it and swaps it in.
type ReplaceTableParams struct {
	Table Table
	Query string
	// FirstBuild is a hint: the caller expects Table to exist empty, as
	// the create stage made it from Query (nothing of it is recorded
	// yet). An engine may then append Query's rows into it when it is
	// empty and has exactly Query's columns, which commits faster than a
	// swap; the outcome is the same either way.
	FirstBuild bool
	// Layout is the table's layout, applied again to the rebuilt table:
	// it keeps its partitioning, properties and comments (see Layout).
	Layout Layout
}

// ViewParams creates or replaces View as Query.
type ViewParams struct {
	View  Table
	Query string
}

// InsertRowsParams appends literal rows (for SEED models): values are bound
// as parameters, never rendered into SQL.
type InsertRowsParams struct {
	Table   Table
	Columns []string
	Rows    [][]any
}

// Engine runs SQL on one warehouse.
type Engine interface {
	// Dialect is "duckdb", "postgres" or "trino".
	Dialect() string
	// Capabilities declares what the engine guarantees where engines
	// differ (see Capabilities); it never changes for an engine.
	Capabilities() Capabilities
	// QuoteIdent quotes one identifier; QuoteTable quotes schema.name.
	QuoteIdent(name string) string
	QuoteTable(t Table) string

	CreateSchema(ctx context.Context, schema string) error
	CreateTable(ctx context.Context, p CreateTableParams) error
	CreateTableAs(ctx context.Context, p CreateTableAsParams) error
	// InsertInterval returns the number of rows inserted.
	InsertInterval(ctx context.Context, p InsertIntervalParams) (int64, error)
	// MergeByKey returns the number of rows inserted or updated.
	MergeByKey(ctx context.Context, p MergeParams) (int64, error)
	ReplaceTable(ctx context.Context, p ReplaceTableParams) error
	InsertRows(ctx context.Context, p InsertRowsParams) (int64, error)
	CreateOrReplaceView(ctx context.Context, p ViewParams) error
	// CreateOrReplaceViews creates or replaces every view in one transaction:
	// readers see all the old definitions or all the new ones, never a mix. On
	// any failure nothing changes. Views are created in the order given (a
	// view may read one created earlier in the batch); an empty batch is a
	// no-op, and a batch naming one view twice is refused. The error names
	// the view that failed.
	CreateOrReplaceViews(ctx context.Context, views []ViewParams) error
	// DropTable and DropView succeed when the object does not exist.
	DropTable(ctx context.Context, t Table) error
	DropView(ctx context.Context, t Table) error
	// TableExists reports whether a table or view named t exists.
	TableExists(ctx context.Context, t Table) (bool, error)
	// TablesExist is TableExists for every table of tables at once, in one
	// catalog read per schema (DuckDB) or in one query (PostgreSQL): found[i]
	// is what TableExists(tables[i]) reports, names matched by the same
	// rule. It is what a stage asks about thousands of tables calls, since
	// one catalog read costs about as much as one TableExists. An invalid
	// name fails the whole call, naming it.
	TablesExist(ctx context.Context, tables []Table) (found []bool, err error)
	// Columns returns t's columns in order.
	Columns(ctx context.Context, t Table) ([]Column, error)
	// Describe returns the columns p.Query produces, in order, with their
	// types as Columns spells them (CreateTable accepts them back), without
	// running the query and without leaving anything behind: no stand-in,
	// no schema, no row. A query the engine cannot bind (an unknown table,
	// column or function) fails as it would at its first run.
	Describe(ctx context.Context, p DescribeParams) ([]Column, error)
	// Query runs one statement with bound args and returns every row. It
	// does not check that the statement only reads: gapless's own reads
	// use it, and `gapless query --allow-writes`.
	Query(ctx context.Context, sql string, args ...any) (*Result, error)
	// ReadOnlyQuery runs one statement with bound args, only if it is a
	// read, and returns every row. A statement that is not a read is
	// refused with an error wrapping ErrNotARead, and nothing in the
	// warehouse changes: the engine decides by its own means (DuckDB: the
	// prepared statement's type, PostgreSQL: the statement's description),
	// and runs the statement in a read-only transaction that it then rolls
	// back, so a write hidden inside a read (a data-modifying CTE,
	// EXPLAIN ANALYZE of a DELETE) fails in the engine too. Several
	// statements in one string are refused the same way.
	ReadOnlyQuery(ctx context.Context, sql string, args ...any) (*Result, error)
	// CheckLayout says, without I/O, what the engine does with l: notes
	// name each part it does not apply because it has no such thing
	// (partitions on an engine without them), for plan output and a
	// warning; err, wrapping ErrUnsupportedLayout in a *LayoutError, names
	// a part it refuses (a table property it lacks). CreateTable,
	// CreateTableAs and ReplaceTable refuse the same Layout the same way.
	CheckLayout(l Layout) (notes []string, err error)
	// SetComments registers comments on an existing table or view (see
	// CommentParams).
	Commenter
	Close() error
}

// Error is an engine failure: what it was doing, to what, with which SQL.
type Error struct {
	Op     string // e.g. "insert interval"
	Object string // e.g. "gapless__demo.demo__events__0a75ef46"
	SQL    string
	Err    error
}

func (e *Error) Error() string {
	if e.SQL == "" {
		return fmt.Sprintf("%s %s: %v", e.Op, e.Object, e.Err)
	}
	return fmt.Sprintf("%s %s: %v\n  SQL: %s", e.Op, e.Object, e.Err, e.SQL)
}

func (e *Error) Unwrap() error { return e.Err }
