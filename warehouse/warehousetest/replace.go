package warehousetest

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
)

var replaceScenarios = []scenario{
	{"NewContentReplacesOld", testReplaceContent},
	{"FailedSwapKeepsOldTable", testReplaceFailedSwap},
	{"ViewOverTableKeepsWorking", testReplaceKeepsViews},
	{"CreatesMissingTable", testReplaceCreates},
	{"RefusesViewName", testReplaceRefusesView},
	{"ReadersSeeOldOrNew", testReplaceReaders},
	{"FirstBuildHintKeepsTheOutcome", testReplaceFirstBuild},
}

// fullTable creates wt.full (id BIGINT, v TEXT) holding ids 1..3 "old".
func (f *fixture) fullTable() warehouse.Table {
	f.t.Helper()
	tbl := f.table("full")
	f.createAs(tbl, f.idsAndTag(1, 3, "old"))
	return tbl
}

// idsAndTag is a query of rows (id BIGINT, v TEXT): ids from..to, each
// with v = tag.
func (f *fixture) idsAndTag(from, to int, tag string) string {
	return "SELECT CAST(g AS BIGINT) AS id, " + f.cast("'"+tag+"'", "TEXT") + " AS v FROM " + f.series(from, to)
}

func (f *fixture) replace(tbl warehouse.Table, query string) {
	f.t.Helper()
	require.NoError(f.t, f.e.ReplaceTable(f.ctx, warehouse.ReplaceTableParams{Table: tbl, Query: query}))
}

// Scenario: a FULL model is rebuilt with other rows and one more column;
// the table holds exactly the new rows, with the new column.
func testReplaceContent(t *testing.T, f *fixture) {
	tbl := f.fullTable()
	f.replace(tbl, `SELECT id, v, id * 10 AS extra FROM (VALUES (7, 'new'), (8, 'new')) AS s(id, v)`)
	require.Equal(t, [][]any{row(7, "new", 70), row(8, "new", 80)}, f.rowsOf(tbl, "id, v, extra", "id"))
	cols, err := f.e.Columns(f.ctx, tbl)
	require.NoError(t, err)
	require.Equal(t, []string{"id", "v", "extra"}, []string{cols[0].Name, cols[1].Name, cols[2].Name})
}

// Scenario: the rebuild of a FULL model fails after producing thousands
// of rows (a cast error near the end), or at once (a missing source). The
// old table keeps serving all its rows, and no half-built table is left
// in the schema.
func testReplaceFailedSwap(t *testing.T, f *fixture) {
	tbl := f.fullTable()
	before := f.rowsOf(tbl, "id, v", "id")
	objects := f.objects(f.schema)
	for _, q := range []string{
		`SELECT CAST(CASE WHEN g = 9000 THEN 'oops' ELSE CAST(g AS VARCHAR) END AS BIGINT) AS id, ` + f.cast("'new'", "TEXT") + ` AS v
		 FROM ` + f.series(1, 10000),
		"SELECT id, v FROM " + f.q(f.table("no_such_source")),
	} {
		err := f.e.ReplaceTable(f.ctx, warehouse.ReplaceTableParams{Table: tbl, Query: q})
		we := requireEngineError(t, err, tbl)
		require.NotEmpty(t, we.SQL)
		require.Equal(t, before, f.rowsOf(tbl, "id, v", "id"))
		require.Equal(t, objects, f.objects(f.schema), "a failed swap left objects behind")
	}
}

// Scenario: an environment's view points at a FULL model's physical table,
// which the scheduler rebuilds every run. After each rebuild the view
// serves the new rows; after a failed one, the old. (PostgreSQL binds
// views to a table's identity, so a drop-and-rename swap must re-create
// them; gapless relies on the engine for this between promotions.)
func testReplaceKeepsViews(t *testing.T, f *fixture) {
	tbl := f.fullTable()
	view := f.table("full_view")
	require.NoError(t, f.e.CreateOrReplaceView(f.ctx, warehouse.ViewParams{View: view, Query: "SELECT id, v FROM " + f.q(tbl)}))
	other := warehouse.Table{Schema: "served", Name: "full"}
	require.NoError(t, f.e.CreateSchema(f.ctx, other.Schema))
	require.NoError(t, f.e.CreateOrReplaceView(f.ctx, warehouse.ViewParams{View: other, Query: "SELECT id FROM " + f.q(view) + " WHERE id > 1"}))

	f.replace(tbl, f.idsAndTag(1, 4, "new"))
	require.Equal(t, [][]any{row(1, "new"), row(2, "new"), row(3, "new"), row(4, "new")}, f.rowsOf(view, "id, v", "id"))
	require.Equal(t, [][]any{row(2), row(3), row(4)}, f.rowsOf(other, "id", "id"))

	err := f.e.ReplaceTable(f.ctx, warehouse.ReplaceTableParams{Table: tbl, Query: "SELECT id, v FROM " + f.q(f.table("no_such_source"))})
	requireEngineError(t, err, tbl)
	require.Len(t, f.rowsOf(view, "id, v", "id"), 4)

	f.replace(tbl, f.idsAndTag(1, 2, "newer"))
	require.Equal(t, [][]any{row(1, "newer"), row(2, "newer")}, f.rowsOf(view, "id, v", "id"))
	require.Equal(t, [][]any{row(2)}, f.rowsOf(other, "id", "id"))
}

// Scenario: the first build of a FULL model whose table does not exist
// yet creates it.
func testReplaceCreates(t *testing.T, f *fixture) {
	tbl := f.table("fresh")
	f.replace(tbl, "SELECT 1 AS id")
	require.Equal(t, [][]any{row(1)}, f.rowsOf(tbl, "id", "id"))
}

// Scenario: the first build of a FULL model says so (FirstBuild), the way
// a deploy does after its create stage. Whatever the table really is, the
// outcome is the swap's: an empty table made from the query holds exactly
// the query's rows; an empty table of other columns takes the query's; a
// table that holds rows after all (a hint gone stale) holds only the new
// ones, none twice; a missing table is made; a view is refused and keeps
// serving; a failing query keeps the table as it was and reports the SQL.
func testReplaceFirstBuild(t *testing.T, f *fixture) {
	query := f.idsAndTag(1, 2, "new")
	first := func(tbl warehouse.Table, q string) error {
		return f.e.ReplaceTable(f.ctx, warehouse.ReplaceTableParams{Table: tbl, Query: q, FirstBuild: true})
	}
	empty := f.table("empty")
	require.NoError(t, f.e.CreateTableAs(f.ctx, warehouse.CreateTableAsParams{Table: empty, Query: query}))
	require.NoError(t, first(empty, query))
	require.Equal(t, [][]any{row(1, "new"), row(2, "new")}, f.rowsOf(empty, "id, v", "id"))

	other := f.table("other_columns")
	require.NoError(t, f.e.CreateTable(f.ctx, warehouse.CreateTableParams{Table: other, Columns: []warehouse.Column{{Name: "v", Type: "TEXT"}, {Name: "id", Type: "BIGINT"}}}))
	require.NoError(t, first(other, query))
	cols, err := f.e.Columns(f.ctx, other)
	require.NoError(t, err)
	require.Equal(t, []string{"id", "v"}, []string{cols[0].Name, cols[1].Name}, "the query's columns, in its order")
	require.Equal(t, [][]any{row(1, "new"), row(2, "new")}, f.rowsOf(other, "id, v", "id"))

	full := f.fullTable()
	require.NoError(t, first(full, query))
	require.Equal(t, [][]any{row(1, "new"), row(2, "new")}, f.rowsOf(full, "id, v", "id"), "the old rows replaced, not added to")

	fresh := f.table("fresh_first")
	require.NoError(t, first(fresh, query))
	require.Equal(t, [][]any{row(1, "new"), row(2, "new")}, f.rowsOf(fresh, "id, v", "id"))

	view := f.table("first_view")
	require.NoError(t, f.e.CreateOrReplaceView(f.ctx, warehouse.ViewParams{View: view, Query: "SELECT id, v FROM " + f.q(full)}))
	requireEngineError(t, first(view, query), view)
	require.Len(t, f.rowsOf(view, "id, v", "id"), 2)

	failing := f.table("failing")
	bad := `SELECT CAST(CASE WHEN g = 900 THEN 'oops' ELSE CAST(g AS VARCHAR) END AS BIGINT) AS id, ` + f.cast("'new'", "TEXT") + ` AS v FROM ` + f.series(1, 1000)
	require.NoError(t, f.e.CreateTableAs(f.ctx, warehouse.CreateTableAsParams{Table: failing, Query: query}))
	we := requireEngineError(t, first(failing, bad), failing)
	require.Contains(t, we.SQL, "oops")
	require.Empty(t, f.rowsOf(failing, "id, v", "id"))
}

// Scenario: a rebuild aimed at an environment's view (a mix-up of names)
// fails and the view keeps serving.
func testReplaceRefusesView(t *testing.T, f *fixture) {
	tbl := f.fullTable()
	view := f.table("full_view")
	require.NoError(t, f.e.CreateOrReplaceView(f.ctx, warehouse.ViewParams{View: view, Query: "SELECT id, v FROM " + f.q(tbl)}))
	err := f.e.ReplaceTable(f.ctx, warehouse.ReplaceTableParams{Table: view, Query: "SELECT 1 AS id, 'x' AS v"})
	requireEngineError(t, err, view)
	require.Len(t, f.rowsOf(view, "id, v", "id"), 3)
}

// Scenario: dashboards read a FULL model's table and its view while the
// scheduler swaps in a rebuild. Every read sees the whole old content or
// the whole new content: never an empty or missing table, never an error.
func testReplaceReaders(t *testing.T, f *fixture) {
	tbl := f.table("hot")
	f.createAs(tbl, `SELECT CAST(g AS BIGINT) AS id FROM `+f.series(1, 1000))
	view := f.table("hot_view")
	require.NoError(t, f.e.CreateOrReplaceView(f.ctx, warehouse.ViewParams{View: view, Query: "SELECT id FROM " + f.q(tbl)}))

	const readers = 4
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	seen := make(chan [2]int64, readers)
	for r := range readers {
		wg.Go(func() {
			target := tbl
			if r%2 == 1 {
				target = view
			}
			var last [2]int64
			for finished := false; !finished; {
				select {
				case <-done:
					finished = true // one more read, after the swap
				default:
				}
				res, err := f.e.Query(f.ctx, "SELECT count(*), CAST(sum(id) AS BIGINT) FROM "+f.q(target))
				if err != nil {
					errs <- err
					return
				}
				got := NormalizeRows(res.Rows)
				n, _ := got[0][0].(int64)
				sum, _ := got[0][1].(int64)
				last = [2]int64{n, sum}
				if last != [2]int64{1000, 500500} && last != [2]int64{2000, 2001000} {
					seen <- last
					return
				}
			}
			seen <- last
		})
	}
	f.replace(tbl, `SELECT CAST(g AS BIGINT) AS id FROM `+f.series(1, 2000))
	close(done)
	wg.Wait()
	close(errs)
	close(seen)
	for err := range errs {
		require.NoError(t, err, "a reader failed during the swap")
	}
	for last := range seen {
		require.Equal(t, [2]int64{2000, 2001000}, last, "a reader saw neither the old nor the new table, or not the new one after the swap")
	}
}
