package warehousetest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
)

var insertRowsScenarios = []scenario{
	{"ValuesAreBound", testInsertRowsBound},
	{"SubsetOfColumns", testInsertRowsSubset},
	{"DecimalValues", testInsertRowsDecimal},
	{"ManyRows", testInsertRowsMany},
	{"AllOrNothing", testInsertRowsAllOrNothing},
	{"RowOfWrongLengthIsAnError", testInsertRowsWrongLength},
	{"NoRows", testInsertRowsNone},
}

// seedTable creates wt.seed (id BIGINT, name TEXT, ts TIMESTAMP, ok
// BOOLEAN, x DOUBLE PRECISION), empty.
func (f *fixture) seedTable() warehouse.Table {
	f.t.Helper()
	tbl := f.table("seed")
	require.NoError(f.t, f.e.CreateTable(f.ctx, warehouse.CreateTableParams{Table: tbl, Columns: []warehouse.Column{
		{Name: "id", Type: "BIGINT"},
		{Name: "name", Type: "TEXT"},
		{Name: "ts", Type: "TIMESTAMP"},
		{Name: "ok", Type: "BOOLEAN"},
		{Name: "x", Type: "DOUBLE PRECISION"},
	}}))
	return tbl
}

var seedColumns = []string{"id", "name", "ts", "ok", "x"}

// Scenario: a SEED model's CSV holds quotes, SQL-looking text, Unicode,
// empty strings and missing values; every value lands exactly as given.
func testInsertRowsBound(t *testing.T, f *fixture) {
	c := f.canary()
	tbl := f.seedTable()
	rows := [][]any{
		{int64(1), `O'Reilly`, ts(1, 0, 0), true, 1.5},
		{int64(2), `it's "quoted"; DROP TABLE canary.x; --`, ts(2, 30, 0), false, -0.25},
		{int64(3), `'); DELETE FROM canary.x; --`, nil, nil, nil},
		{int64(4), "données 表 🚀", ts(0, 0, 0), true, 0.0},
		{int64(5), "", ts(23, 59, 59), false, 1e10},
		{int64(6), nil, nil, nil, nil},
	}
	n, err := f.e.InsertRows(f.ctx, warehouse.InsertRowsParams{Table: tbl, Columns: seedColumns, Rows: rows})
	require.NoError(t, err)
	require.Equal(t, int64(len(rows)), n)
	want := make([][]any, len(rows))
	for i, r := range rows {
		want[i] = row(r...)
	}
	require.Equal(t, want, f.rowsOf(tbl, "id, name, ts, ok, x", "id"))
	f.requireCanary(c)
}

// Scenario: a seed fills some columns; the others are NULL.
func testInsertRowsSubset(t *testing.T, f *fixture) {
	tbl := f.seedTable()
	n, err := f.e.InsertRows(f.ctx, warehouse.InsertRowsParams{Table: tbl, Columns: []string{"name", "id"},
		Rows: [][]any{{"a", int64(1)}, {"b", int64(2)}}})
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
	require.Equal(t, [][]any{row(1, "a", nil), row(2, "b", nil)}, f.rowsOf(tbl, "id, name, ts", "id"))
}

// Scenario: a seed of prices fills a NUMERIC(12,2) column from floats,
// strings and integers; they read back as the same numbers. (Engines
// return decimals as they like, so the suite reads them cast to DOUBLE
// PRECISION.)
func testInsertRowsDecimal(t *testing.T, f *fixture) {
	tbl := f.table("prices")
	require.NoError(t, f.e.CreateTable(f.ctx, warehouse.CreateTableParams{Table: tbl, Columns: []warehouse.Column{
		{Name: "id", Type: "BIGINT"}, {Name: "amount", Type: "NUMERIC(12,2)"},
	}}))
	n, err := f.e.InsertRows(f.ctx, warehouse.InsertRowsParams{Table: tbl, Columns: []string{"id", "amount"},
		Rows: [][]any{{int64(1), 1.5}, {int64(2), "2.25"}, {int64(3), nil}, {int64(4), int64(7)}}})
	require.NoError(t, err)
	require.Equal(t, int64(4), n)
	require.Equal(t, [][]any{row(1, 1.5), row(2, 2.25), row(3, nil), row(4, 7.0)},
		f.rowsOf(tbl, "id, "+f.cast("amount", "DOUBLE PRECISION"), "id"))
	require.Equal(t, [][]any{row(10.75)}, f.query("SELECT "+f.cast("sum(amount)", "DOUBLE PRECISION")+" FROM "+f.q(tbl)))
}

// Scenario: a seed of thousands of rows, more than one statement's worth
// of parameters on any engine, lands whole.
func testInsertRowsMany(t *testing.T, f *fixture) {
	tbl := f.seedTable()
	const total = 7001
	rows := make([][]any, total)
	for i := range rows {
		rows[i] = []any{int64(i), fmt.Sprintf("row %d", i), ts(i%24, i%60, 0), i%2 == 0, float64(i) / 4}
	}
	n, err := f.e.InsertRows(f.ctx, warehouse.InsertRowsParams{Table: tbl, Columns: seedColumns, Rows: rows})
	require.NoError(t, err)
	require.Equal(t, int64(total), n)
	require.Equal(t, int64(total), f.count(tbl))
	require.Equal(t, [][]any{row(int64(total-1), fmt.Sprintf("row %d", total-1))},
		f.query("SELECT id, name FROM "+f.q(tbl)+" WHERE id = "+f.param(1), int64(total-1)))
}

// Scenario: the 6,000th row of a seed does not fit its column; no row of
// the seed lands, so a retry after fixing the CSV does not duplicate the
// first 5,999.
func testInsertRowsAllOrNothing(t *testing.T, f *fixture) {
	tbl := f.seedTable()
	rows := make([][]any, 7000)
	for i := range rows {
		rows[i] = []any{int64(i), "ok", nil, nil, nil}
	}
	rows[5999][0] = "not a number"
	_, err := f.e.InsertRows(f.ctx, warehouse.InsertRowsParams{Table: tbl, Columns: seedColumns, Rows: rows})
	requireEngineError(t, err, tbl)
	require.Equal(t, int64(0), f.count(tbl))
}

// Scenario: a malformed CSV line has fewer values than columns; the call
// fails before anything lands.
func testInsertRowsWrongLength(t *testing.T, f *fixture) {
	tbl := f.seedTable()
	_, err := f.e.InsertRows(f.ctx, warehouse.InsertRowsParams{Table: tbl, Columns: []string{"id", "name"},
		Rows: [][]any{{int64(1), "a"}, {int64(2)}}})
	requireEngineError(t, err, tbl)
	_, err = f.e.InsertRows(f.ctx, warehouse.InsertRowsParams{Table: tbl, Columns: nil, Rows: [][]any{{}}})
	requireEngineError(t, err, tbl)
	require.Equal(t, int64(0), f.count(tbl))
}

// Scenario: an empty seed inserts nothing and is not an error.
func testInsertRowsNone(t *testing.T, f *fixture) {
	tbl := f.seedTable()
	n, err := f.e.InsertRows(f.ctx, warehouse.InsertRowsParams{Table: tbl, Columns: seedColumns})
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, int64(0), f.count(tbl))
}
