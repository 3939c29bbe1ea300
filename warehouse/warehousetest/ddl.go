package warehousetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
)

var schemaScenarios = []scenario{
	{"CreateIsIdempotent", testCreateSchemaIdempotent},
}

var tableScenarios = []scenario{
	{"CreateWithColumns", testCreateTableColumns},
	{"CreateTwiceFails", testCreateTableTwice},
	{"CreateRefusesBadInput", testCreateTableBadInput},
	{"CreateAsWithData", testCreateTableAsWithData},
	{"CreateAsWithoutData", testCreateTableAsWithoutData},
	{"Exists", testTableExists},
	{"ExistInOneCall", testTablesExist},
	{"ColumnsOfMissingTableFails", testColumnsMissing},
	{"DropIsIdempotent", testDropTable},
	{"DropTableRefusesView", testDropTableRefusesView},
}

var viewScenarios = []scenario{
	{"CreateAndRepoint", testViewRepoint},
	{"RepointChangesColumns", testViewChangesColumns},
	{"RefusesTableName", testViewRefusesTable},
	{"DropIsIdempotent", testDropView},
}

var queryScenarios = []scenario{
	{"BoundArgs", testQueryBoundArgs},
	{"NoRows", testQueryNoRows},
	{"ColumnTypes", testQueryColumnTypes},
}

// Scenario: gapless creates the schemas of a plan's tables at every apply;
// creating one that exists must succeed and keep what is in it.
func testCreateSchemaIdempotent(t *testing.T, f *fixture) {
	s := "analytics"
	require.NoError(t, f.e.CreateSchema(f.ctx, s))
	tbl := warehouse.Table{Schema: s, Name: "kept"}
	f.createAs(tbl, "SELECT 1 AS id")
	require.NoError(t, f.e.CreateSchema(f.ctx, s))
	require.NoError(t, f.e.CreateSchema(f.ctx, f.schema))
	require.Equal(t, int64(1), f.count(tbl))
}

// portableColumns are types both engines spell, with their families.
var portableColumns = []struct {
	col    warehouse.Column
	family string
}{
	{warehouse.Column{Name: "id", Type: "BIGINT"}, "bigint"},
	{warehouse.Column{Name: "n", Type: "INTEGER"}, "integer"},
	{warehouse.Column{Name: "name", Type: "TEXT"}, "text"},
	{warehouse.Column{Name: "ts", Type: "TIMESTAMP"}, "timestamp"},
	{warehouse.Column{Name: "ts_tz", Type: "TIMESTAMP WITH TIME ZONE"}, "timestamptz"},
	{warehouse.Column{Name: "ok", Type: "BOOLEAN"}, "boolean"},
	{warehouse.Column{Name: "x", Type: "DOUBLE PRECISION"}, "double"},
	{warehouse.Column{Name: "amount", Type: "NUMERIC(12,2)"}, "numeric(12,2)"},
	{warehouse.Column{Name: "day", Type: "DATE"}, "date"},
}

// Scenario: a model declares its columns; the physical table gets them in
// order, Columns reports them with their real types, and those types
// create an identical table (gapless copies a table's shape that way).
func testCreateTableColumns(t *testing.T, f *fixture) {
	tbl := f.table("typed")
	cols := make([]warehouse.Column, len(portableColumns))
	for i, pc := range portableColumns {
		cols[i] = pc.col
	}
	require.NoError(t, f.e.CreateTable(f.ctx, warehouse.CreateTableParams{Table: tbl, Columns: cols}))
	ok, err := f.e.TableExists(f.ctx, tbl)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(0), f.count(tbl))

	got, err := f.e.Columns(f.ctx, tbl)
	require.NoError(t, err)
	require.Len(t, got, len(portableColumns))
	for i, pc := range portableColumns {
		require.Equal(t, pc.col.Name, got[i].Name, "column %d", i)
		require.Equal(t, pc.family, typeFamily(got[i].Type), "column %s reported as %q", pc.col.Name, got[i].Type)
	}

	copyTbl := f.table("typed_copy")
	require.NoError(t, f.e.CreateTable(f.ctx, warehouse.CreateTableParams{Table: copyTbl, Columns: got}))
	again, err := f.e.Columns(f.ctx, copyTbl)
	require.NoError(t, err)
	require.Equal(t, got, again, "Columns' types do not round-trip through CreateTable")
}

// Scenario: creating a physical table that exists (a retried apply that
// does not check first) fails loudly and leaves the table and its rows.
func testCreateTableTwice(t *testing.T, f *fixture) {
	tbl := f.table("once")
	f.createAs(tbl, "SELECT 1 AS id")
	err := f.e.CreateTable(f.ctx, warehouse.CreateTableParams{Table: tbl, Columns: []warehouse.Column{{Name: "other", Type: "TEXT"}}})
	requireEngineError(t, err, tbl)
	err = f.e.CreateTableAs(f.ctx, warehouse.CreateTableAsParams{Table: tbl, Query: "SELECT 2 AS id", WithData: true})
	requireEngineError(t, err, tbl)
	require.Equal(t, [][]any{{int64(1)}}, f.rowsOf(tbl, "id", "id"))
}

// Scenario: a table without columns, or with a column type written to end
// the statement and run another, is refused before anything is created.
func testCreateTableBadInput(t *testing.T, f *fixture) {
	c := f.canary()
	tbl := f.table("bad")
	err := f.e.CreateTable(f.ctx, warehouse.CreateTableParams{Table: tbl})
	requireEngineError(t, err, tbl)
	for _, typ := range []string{
		`BIGINT); DROP TABLE "canary"."x"; --`,
		`BIGINT, "y" TEXT); DROP TABLE canary.x; CREATE TABLE "wt"."bad2" ("z" TEXT`,
		"BIGINT /* comment",
		"",
	} {
		err := f.e.CreateTable(f.ctx, warehouse.CreateTableParams{Table: tbl, Columns: []warehouse.Column{{Name: "id", Type: typ}}})
		requireEngineError(t, err, tbl)
	}
	f.requireCanary(c)
	require.Empty(t, f.objects(f.schema))
}

// Scenario: a FULL model's first build and a seed's table come from a
// query, with its rows.
func testCreateTableAsWithData(t *testing.T, f *fixture) {
	tbl := f.table("from_query")
	f.createAs(tbl, `SELECT id, name FROM (VALUES (1, 'a'), (2, 'b')) AS v(id, name) -- trailing comment`)
	require.Equal(t, [][]any{row(1, "a"), row(2, "b")}, f.rowsOf(tbl, "id, name", "id"))

	semi := f.table("with_semicolon")
	f.createAs(semi, "SELECT 3 AS id;\n")
	require.Equal(t, [][]any{row(3)}, f.rowsOf(semi, "id", "id"))
}

// Scenario: an incremental model's physical table is created empty with
// its query's columns, then filled interval by interval.
func testCreateTableAsWithoutData(t *testing.T, f *fixture) {
	tbl := f.table("shape_only")
	require.NoError(t, f.e.CreateTableAs(f.ctx, warehouse.CreateTableAsParams{
		Table: tbl,
		Query: `SELECT CAST(id AS BIGINT) AS id, name, ts FROM (VALUES (1, 'a', TIMESTAMP '2024-01-01 00:00:00')) AS v(id, name, ts)`,
	}))
	require.Equal(t, int64(0), f.count(tbl))
	cols, err := f.e.Columns(f.ctx, tbl)
	require.NoError(t, err)
	require.Len(t, cols, 3)
	names := []string{cols[0].Name, cols[1].Name, cols[2].Name}
	require.Equal(t, []string{"id", "name", "ts"}, names)
	require.Equal(t, "bigint", typeFamily(cols[0].Type))
	require.Equal(t, "timestamp", typeFamily(cols[2].Type))
}

// Scenario: gapless asks whether a physical table or an environment's view
// exists before creating it; a missing table, or a missing schema, is
// "no", not an error.
func testTableExists(t *testing.T, f *fixture) {
	tbl := f.table("present")
	f.createAs(tbl, "SELECT 1 AS id")
	view := f.table("present_view")
	require.NoError(t, f.e.CreateOrReplaceView(f.ctx, warehouse.ViewParams{View: view, Query: "SELECT id FROM " + f.q(tbl)}))

	for _, c := range []struct {
		t    warehouse.Table
		want bool
	}{
		{tbl, true},
		{view, true},
		{f.table("absent"), false},
		{warehouse.Table{Schema: "no_such_schema", Name: "present"}, false},
	} {
		got, err := f.e.TableExists(f.ctx, c.t)
		require.NoError(t, err, "%s", c.t)
		require.Equal(t, c.want, got, "%s", c.t)
	}
}

// Scenario: the create-tables stage of a deploy asks about every table of
// the plan at once; each answer is the one TableExists gives for that name
// (whatever the engine's rule on case), across schemas, for views, for
// missing tables and schemas, in the order asked. An empty batch is empty;
// a bad name fails the whole call.
func testTablesExist(t *testing.T, f *fixture) {
	tbl := f.table("present")
	f.createAs(tbl, "SELECT 1 AS id")
	view := f.table("present_view")
	require.NoError(t, f.e.CreateOrReplaceView(f.ctx, warehouse.ViewParams{View: view, Query: "SELECT id FROM " + f.q(tbl)}))
	other := warehouse.Table{Schema: "other_schema", Name: "elsewhere"}
	require.NoError(t, f.e.CreateSchema(f.ctx, other.Schema))
	f.createAs(other, "SELECT 2 AS id")

	ask := []warehouse.Table{
		f.table("absent"), tbl, other, view,
		{Schema: "no_such_schema", Name: "present"},
		{Schema: other.Schema, Name: tbl.Name}, // a name of another schema
		{Schema: f.schema, Name: "PRESENT"},    // the engine's case rule
		{Schema: "OTHER_SCHEMA", Name: "Elsewhere"},
		tbl, // twice
	}
	got, err := f.e.TablesExist(f.ctx, ask)
	require.NoError(t, err)
	require.Len(t, got, len(ask))
	for i, a := range ask {
		one, err := f.e.TableExists(f.ctx, a)
		require.NoError(t, err, "%s", a)
		require.Equal(t, one, got[i], "%s: TablesExist disagrees with TableExists", a)
	}
	require.Equal(t, []bool{false, true, true, true, false, false}, got[:6])
	require.True(t, got[8])

	none, err := f.e.TablesExist(f.ctx, nil)
	require.NoError(t, err)
	require.Empty(t, none)

	_, err = f.e.TablesExist(f.ctx, []warehouse.Table{tbl, {Schema: f.schema, Name: ""}})
	require.ErrorIs(t, err, warehouse.ErrInvalidIdentifier)
}

// Scenario: reading the columns of a table that is not there is an error
// naming it, not an empty list gapless could mistake for a table without
// columns.
func testColumnsMissing(t *testing.T, f *fixture) {
	missing := f.table("nowhere")
	_, err := f.e.Columns(f.ctx, missing)
	requireEngineError(t, err, missing)
}

// Scenario: janitor drops old physical tables; a table already gone, or
// whose schema is gone, is not an error.
func testDropTable(t *testing.T, f *fixture) {
	tbl := f.table("doomed")
	f.createAs(tbl, "SELECT 1 AS id")
	require.NoError(t, f.e.DropTable(f.ctx, tbl))
	ok, err := f.e.TableExists(f.ctx, tbl)
	require.NoError(t, err)
	require.False(t, ok)
	require.NoError(t, f.e.DropTable(f.ctx, tbl))
	require.NoError(t, f.e.DropTable(f.ctx, warehouse.Table{Schema: "no_such_schema", Name: "doomed"}))
}

// Scenario: dropping a "table" whose name is an environment's view (a
// mix-up of names) fails and the view keeps serving; likewise the other
// way round.
func testDropTableRefusesView(t *testing.T, f *fixture) {
	tbl := f.table("base")
	f.createAs(tbl, "SELECT 1 AS id")
	view := f.table("served")
	require.NoError(t, f.e.CreateOrReplaceView(f.ctx, warehouse.ViewParams{View: view, Query: "SELECT id FROM " + f.q(tbl)}))

	requireEngineError(t, f.e.DropTable(f.ctx, view), view)
	require.Equal(t, [][]any{row(1)}, f.rowsOf(view, "id", "id"))

	requireEngineError(t, f.e.DropView(f.ctx, tbl), tbl)
	require.Equal(t, [][]any{row(1)}, f.rowsOf(tbl, "id", "id"))
}

// Scenario: promotion re-points an environment's view from the old
// physical table to the new one; readers of the view then see the new
// table.
func testViewRepoint(t *testing.T, f *fixture) {
	v1, v2 := f.table("events__v1"), f.table("events__v2")
	f.createAs(v1, "SELECT id FROM (VALUES (1), (2)) AS v(id)")
	f.createAs(v2, "SELECT id FROM (VALUES (10), (20), (30)) AS v(id)")
	view := f.table("events")

	require.NoError(t, f.e.CreateOrReplaceView(f.ctx, warehouse.ViewParams{View: view, Query: "SELECT id FROM " + f.q(v1)}))
	require.Equal(t, [][]any{row(1), row(2)}, f.rowsOf(view, "id", "id"))

	require.NoError(t, f.e.CreateOrReplaceView(f.ctx, warehouse.ViewParams{View: view, Query: "SELECT id FROM " + f.q(v2) + ";"}))
	require.Equal(t, [][]any{row(10), row(20), row(30)}, f.rowsOf(view, "id", "id"))

	cols, err := f.e.Columns(f.ctx, view)
	require.NoError(t, err)
	require.Len(t, cols, 1)
	require.Equal(t, "id", cols[0].Name)
}

// Scenario: a breaking change adds, drops, renames and retypes columns;
// promotion re-points the view to a table of a different shape.
func testViewChangesColumns(t *testing.T, f *fixture) {
	view := f.table("shape_shifter")
	require.NoError(t, f.e.CreateOrReplaceView(f.ctx, warehouse.ViewParams{View: view,
		Query: "SELECT id, name, score FROM (VALUES (1, 'a', 10)) AS v(id, name, score)"}))
	require.NoError(t, f.e.CreateOrReplaceView(f.ctx, warehouse.ViewParams{View: view,
		Query: "SELECT " + f.cast("id", "TEXT") + " AS id, label, extra FROM (VALUES (1, 'b', TIMESTAMP '2024-01-01 00:00:00')) AS v(id, label, extra)"}))
	cols, err := f.e.Columns(f.ctx, view)
	require.NoError(t, err)
	require.Len(t, cols, 3)
	require.Equal(t, []string{"id", "label", "extra"}, []string{cols[0].Name, cols[1].Name, cols[2].Name})
	require.Equal(t, "text", typeFamily(cols[0].Type))
	require.Equal(t, [][]any{row("1", "b", ts(0, 0, 0))}, f.rowsOf(view, "id, label, extra", "id"))
}

// Scenario: a view whose name is a physical table's (a mix-up of names)
// is refused and the table keeps its rows.
func testViewRefusesTable(t *testing.T, f *fixture) {
	tbl := f.table("solid")
	f.createAs(tbl, "SELECT 1 AS id")
	err := f.e.CreateOrReplaceView(f.ctx, warehouse.ViewParams{View: tbl, Query: "SELECT 2 AS id"})
	requireEngineError(t, err, tbl)
	require.Equal(t, [][]any{row(1)}, f.rowsOf(tbl, "id", "id"))
}

// Scenario: dropping an environment's views; a view already gone is not
// an error.
func testDropView(t *testing.T, f *fixture) {
	view := f.table("passing")
	require.NoError(t, f.e.CreateOrReplaceView(f.ctx, warehouse.ViewParams{View: view, Query: "SELECT 1 AS id"}))
	require.NoError(t, f.e.DropView(f.ctx, view))
	ok, err := f.e.TableExists(f.ctx, view)
	require.NoError(t, err)
	require.False(t, ok)
	require.NoError(t, f.e.DropView(f.ctx, view))
	require.NoError(t, f.e.DropView(f.ctx, warehouse.Table{Schema: "no_such_schema", Name: "passing"}))
}

// Scenario: audits and the CLI read rows with values bound as parameters,
// never spliced into the SQL.
func testQueryBoundArgs(t *testing.T, f *fixture) {
	tbl := f.table("readable")
	f.createAs(tbl, `SELECT id, name, ts FROM (VALUES
		(1, 'a', TIMESTAMP '2024-01-01 00:00:00'),
		(2, 'it''s "b"', TIMESTAMP '2024-01-01 01:00:00'),
		(3, 'c', TIMESTAMP '2024-01-01 02:00:00'),
		(4, 'd', TIMESTAMP '2024-01-01 03:00:00')) AS v(id, name, ts)`)
	res, err := f.e.Query(f.ctx, "SELECT id, name AS label, ts FROM "+f.q(tbl)+
		" WHERE id >= "+f.param(1)+" AND name <> "+f.param(2)+" AND ts < "+f.param(3)+" ORDER BY id", 2, "c", ts(3, 0, 0))
	require.NoError(t, err)
	require.Equal(t, []string{"id", "label", "ts"}, res.Columns)
	require.Equal(t, [][]any{row(2, `it's "b"`, ts(1, 0, 0))}, NormalizeRows(res.Rows))

	quoted := `x'); DROP TABLE canary.x; --`
	require.Equal(t, [][]any{row(quoted)}, f.query("SELECT "+f.cast(f.param(1), "TEXT")+" AS s", quoted))
}

// Scenario: a query that matches nothing returns its columns and no rows.
func testQueryNoRows(t *testing.T, f *fixture) {
	tbl := f.table("empty_read")
	f.createAs(tbl, "SELECT 1 AS id")
	res, err := f.e.Query(f.ctx, "SELECT id FROM "+f.q(tbl)+" WHERE id > "+f.param(1), 5)
	require.NoError(t, err)
	require.Equal(t, []string{"id"}, res.Columns)
	require.Empty(t, res.Rows)
}

// Scenario: `gapless query` prints a DATE as a date and a TIMESTAMP as a
// time, though both come back as a time.Time at midnight: the result names
// each column's type, with rows or without.
func testQueryColumnTypes(t *testing.T, f *fixture) {
	q := "SELECT CAST('2024-01-02' AS DATE) AS d, CAST('2024-01-02 00:00:00' AS TIMESTAMP) AS ts, " + f.cast("'x'", "TEXT") + " AS s"
	res, err := f.e.Query(f.ctx, q)
	require.NoError(t, err)
	require.Len(t, res.Types, 3)
	require.Equal(t, "DATE", res.Types[0])
	require.Equal(t, "TIMESTAMP", res.Types[1])
	require.NotEmpty(t, res.Types[2])
	require.Equal(t, res.Rows[0][0], res.Rows[0][1], "the same Go value: only the type tells them apart")

	res, err = f.e.Query(f.ctx, "SELECT * FROM ("+q+") AS v WHERE s = "+f.param(1), "none")
	require.NoError(t, err)
	require.Empty(t, res.Rows)
	require.Equal(t, []string{"DATE", "TIMESTAMP"}, res.Types[:2])
}
