package warehousetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
)

var insertIntervalScenarios = []scenario{
	{"InsertsOnlyRowsInRange", testIntervalOnlyInRange},
	{"ReinsertLeavesOneCopy", testIntervalReinsert},
	{"OtherIntervalsUntouched", testIntervalOthersUntouched},
	{"ColumnsMatchedByName", testIntervalColumnsByName},
	{"FailingQueryKeepsPreviousRows", testIntervalFailingQuery},
	{"FailingQueryIntoAnEmptyRangeLeavesItEmpty", testIntervalFailingIntoEmpty},
	{"QueryMissingAColumnKeepsPreviousRows", testIntervalMissingColumn},
	{"EmptyOrInvertedIntervalIsAnError", testIntervalInverted},
	{"DateTimeColumn", testIntervalDateColumn},
	{"TimestampWithTimeZoneColumn", testIntervalTimestampTZ},
	{"BoundsAreInstants", testIntervalBoundsAreInstants},
	{"TrailingCommentOrSemicolon", testIntervalTrailing},
	{"TextTimeColumnWithTextBounds", testIntervalTextBounds},
}

// eventsTable creates wt.events (ts TIMESTAMP, id BIGINT, v TEXT), empty.
func (f *fixture) eventsTable() warehouse.Table {
	f.t.Helper()
	tbl := f.table("events")
	require.NoError(f.t, f.e.CreateTable(f.ctx, warehouse.CreateTableParams{Table: tbl, Columns: []warehouse.Column{
		{Name: "ts", Type: "TIMESTAMP"},
		{Name: "id", Type: "BIGINT"},
		{Name: "v", Type: "TEXT"},
	}}))
	return tbl
}

func (f *fixture) insertInterval(tbl warehouse.Table, start, end time.Time, query string) int64 {
	f.t.Helper()
	n, err := f.e.InsertInterval(f.ctx, warehouse.InsertIntervalParams{Table: tbl, TimeColumn: "ts", Start: start, End: end, Query: query})
	require.NoError(f.t, err)
	return n
}

// Scenario: a backfill of hour 1 runs a query that also returns rows of
// hours 0 and 2, at both edges of the hour, and with no time at all; only
// the rows of [01:00, 02:00) land.
func testIntervalOnlyInRange(t *testing.T, f *fixture) {
	tbl := f.eventsTable()
	q := `SELECT ts, id, v FROM (VALUES
		(TIMESTAMP '2024-01-01 00:59:59', 1, 'before'),
		(TIMESTAMP '2024-01-01 01:00:00', 2, 'start'),
		(TIMESTAMP '2024-01-01 01:30:00', 3, 'middle'),
		(TIMESTAMP '2024-01-01 01:59:59', 4, 'last'),
		(TIMESTAMP '2024-01-01 02:00:00', 5, 'end'),
		(NULL, 6, 'no time')) AS src(ts, id, v)`
	n := f.insertInterval(tbl, ts(1, 0, 0), ts(2, 0, 0), q)
	require.Equal(t, int64(3), n)
	require.Equal(t, [][]any{
		row(ts(1, 0, 0), 2, "start"),
		row(ts(1, 30, 0), 3, "middle"),
		row(ts(1, 59, 59), 4, "last"),
	}, f.rowsOf(tbl, "ts, id, v", "id"))
}

// Scenario: the scheduler retries an hour after a crash, then a restatement
// recomputes it with new values: each run replaces the hour's rows, so the
// table never holds two copies.
func testIntervalReinsert(t *testing.T, f *fixture) {
	tbl := f.eventsTable()
	for range 2 {
		n := f.insertInterval(tbl, ts(1, 0, 0), ts(2, 0, 0), f.hourly(0, 3, 4, "first"))
		require.Equal(t, int64(4), n)
		require.Equal(t, int64(4), f.count(tbl))
	}
	n := f.insertInterval(tbl, ts(1, 0, 0), ts(2, 0, 0), f.hourly(1, 2, 4, "restated"))
	require.Equal(t, int64(4), n)
	require.Equal(t, [][]any{row(100, "restated"), row(101, "restated"), row(102, "restated"), row(103, "restated")},
		f.rowsOf(tbl, "id, v", "id"))
}

// Scenario: hours 0, 1 and 2 are backfilled; hour 1 is then re-run by a
// query whose rows for hours 0 and 2 changed. Hours 0 and 2 keep their
// rows, including those at exactly 02:00 (the end of hour 1), and hour 1
// has exactly the new rows, including the one at exactly 01:00.
func testIntervalOthersUntouched(t *testing.T, f *fixture) {
	tbl := f.eventsTable()
	for h := range 3 {
		require.Equal(t, int64(3), f.insertInterval(tbl, ts(h, 0, 0), ts(h+1, 0, 0), f.hourly(0, 3, 3, "old")))
	}
	require.Equal(t, int64(3), f.insertInterval(tbl, ts(1, 0, 0), ts(2, 0, 0), f.hourly(0, 3, 3, "new")))
	require.Equal(t, [][]any{
		row(ts(0, 0, 0), 0, "old"), row(ts(0, 20, 0), 1, "old"), row(ts(0, 40, 0), 2, "old"),
		row(ts(1, 0, 0), 100, "new"), row(ts(1, 20, 0), 101, "new"), row(ts(1, 40, 0), 102, "new"),
		row(ts(2, 0, 0), 200, "old"), row(ts(2, 20, 0), 201, "old"), row(ts(2, 40, 0), 202, "old"),
	}, f.rowsOf(tbl, "ts, id, v", "ts, id"))
}

// Scenario: a model's query lists its columns in another order than the
// physical table, and computes a helper column the table does not have;
// columns are matched by name and the helper is ignored.
func testIntervalColumnsByName(t *testing.T, f *fixture) {
	tbl := f.eventsTable()
	q := `SELECT 'x' AS v, 7 AS helper, id, ts FROM (VALUES (TIMESTAMP '2024-01-01 05:15:00', 1)) AS src(ts, id)`
	require.Equal(t, int64(1), f.insertInterval(tbl, ts(5, 0, 0), ts(6, 0, 0), q))
	require.Equal(t, [][]any{row(ts(5, 15, 0), 1, "x")}, f.rowsOf(tbl, "ts, id, v", "id"))
}

// failsLate is a query whose 9,000th row fails to cast at run time, after
// thousands of rows were produced; every row is in hour 1.
func (f *fixture) failsLate() string {
	return `SELECT TIMESTAMP '2024-01-01 01:00:00' AS ts,
       CAST(CASE WHEN g = 9000 THEN 'oops' ELSE CAST(g AS VARCHAR) END AS BIGINT) AS id,
       ` + f.cast("'bad'", "TEXT") + ` AS v
FROM ` + f.series(1, 10000)
}

// Scenario: a re-run of hour 1 fails halfway through its query; the delete
// of the hour's old rows is rolled back, so the hour keeps serving them.
func testIntervalFailingQuery(t *testing.T, f *fixture) {
	tbl := f.eventsTable()
	f.insertInterval(tbl, ts(0, 0, 0), ts(2, 0, 0), f.hourly(0, 2, 2, "good"))
	before := f.rowsOf(tbl, "ts, id, v", "ts, id")
	require.Len(t, before, 4)

	for _, q := range []string{f.failsLate(), "SELECT ts, id, v FROM " + f.q(f.table("no_such_source"))} {
		n, err := f.e.InsertInterval(f.ctx, warehouse.InsertIntervalParams{Table: tbl, TimeColumn: "ts", Start: ts(1, 0, 0), End: ts(2, 0, 0), Query: q})
		we := requireEngineError(t, err, tbl)
		require.NotEmpty(t, we.SQL, "Error.SQL is empty")
		require.Zero(t, n)
		require.Equal(t, before, f.rowsOf(tbl, "ts, id, v", "ts, id"))
	}
}

// Scenario: the first run of hour 1, into a range that holds no rows yet
// (the hours around it do), fails halfway through its query. None of the
// thousands of rows it produced before failing stays, and the other hours
// keep theirs; the retry then fills the hour.
func testIntervalFailingIntoEmpty(t *testing.T, f *fixture) {
	tbl := f.eventsTable()
	f.insertInterval(tbl, ts(0, 0, 0), ts(1, 0, 0), f.hourly(0, 1, 2, "good"))
	f.insertInterval(tbl, ts(2, 0, 0), ts(3, 0, 0), f.hourly(2, 3, 2, "good"))
	before := f.rowsOf(tbl, "ts, id, v", "ts, id")
	require.Len(t, before, 4)

	n, err := f.e.InsertInterval(f.ctx, warehouse.InsertIntervalParams{Table: tbl, TimeColumn: "ts", Start: ts(1, 0, 0), End: ts(2, 0, 0), Query: f.failsLate()})
	we := requireEngineError(t, err, tbl)
	require.NotEmpty(t, we.SQL, "Error.SQL is empty")
	require.Zero(t, n)
	require.Equal(t, before, f.rowsOf(tbl, "ts, id, v", "ts, id"))

	require.EqualValues(t, 2, f.insertInterval(tbl, ts(1, 0, 0), ts(2, 0, 0), f.hourly(1, 2, 2, "retry")))
	require.Len(t, f.rowsOf(tbl, "ts, id, v", "ts, id"), 6)
}

// Scenario: a model's query lost a column the physical table has; the run
// fails instead of filling it with NULLs, and the hour keeps its rows.
func testIntervalMissingColumn(t *testing.T, f *fixture) {
	tbl := f.eventsTable()
	f.insertInterval(tbl, ts(1, 0, 0), ts(2, 0, 0), f.hourly(1, 2, 2, "good"))
	before := f.rowsOf(tbl, "ts, id, v", "ts, id")
	_, err := f.e.InsertInterval(f.ctx, warehouse.InsertIntervalParams{Table: tbl, TimeColumn: "ts", Start: ts(1, 0, 0), End: ts(2, 0, 0),
		Query: `SELECT ts, id FROM (VALUES (TIMESTAMP '2024-01-01 01:10:00', 9)) AS src(ts, id)`})
	requireEngineError(t, err, tbl)
	require.Equal(t, before, f.rowsOf(tbl, "ts, id, v", "ts, id"))

	_, err = f.e.InsertInterval(f.ctx, warehouse.InsertIntervalParams{Table: tbl, TimeColumn: "no_such_column", Start: ts(1, 0, 0), End: ts(2, 0, 0),
		Query: f.hourly(1, 2, 2, "bad")})
	requireEngineError(t, err, tbl)
	require.Equal(t, before, f.rowsOf(tbl, "ts, id, v", "ts, id"))
}

// Scenario: a bug in interval arithmetic asks for [02:00, 01:00) or
// [01:00, 01:00); the engine refuses instead of deleting nothing or
// everything, and the rows stay.
func testIntervalInverted(t *testing.T, f *fixture) {
	tbl := f.eventsTable()
	f.insertInterval(tbl, ts(1, 0, 0), ts(2, 0, 0), f.hourly(1, 2, 2, "good"))
	before := f.rowsOf(tbl, "ts, id, v", "ts, id")
	for _, iv := range [][2]time.Time{{ts(2, 0, 0), ts(1, 0, 0)}, {ts(1, 0, 0), ts(1, 0, 0)}} {
		_, err := f.e.InsertInterval(f.ctx, warehouse.InsertIntervalParams{Table: tbl, TimeColumn: "ts", Start: iv[0], End: iv[1], Query: f.hourly(0, 3, 2, "bad")})
		requireEngineError(t, err, tbl)
	}
	require.Equal(t, before, f.rowsOf(tbl, "ts, id, v", "ts, id"))
}

// Scenario: a daily model's time column is a DATE; the interval
// [2024-01-02, 2024-01-03) is bound as instants and selects that day.
func testIntervalDateColumn(t *testing.T, f *fixture) {
	tbl := f.table("daily")
	require.NoError(t, f.e.CreateTable(f.ctx, warehouse.CreateTableParams{Table: tbl, Columns: []warehouse.Column{
		{Name: "day", Type: "DATE"}, {Name: "total", Type: "BIGINT"},
	}}))
	q := `SELECT day, total FROM (VALUES (DATE '2024-01-01', 1), (DATE '2024-01-02', 2), (DATE '2024-01-03', 3)) AS src(day, total)`
	for range 2 {
		n, err := f.e.InsertInterval(f.ctx, warehouse.InsertIntervalParams{Table: tbl, TimeColumn: "day",
			Start: time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC), End: time.Date(2024, 1, 3, 0, 0, 0, 0, time.UTC), Query: q})
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
	}
	require.Equal(t, [][]any{row(time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC), 2)}, f.rowsOf(tbl, "day, total", "day"))
}

// Scenario: model files end their query with a semicolon or a comment; the
// engine embeds the query so neither breaks the statement.
func testIntervalTrailing(t *testing.T, f *fixture) {
	tbl := f.eventsTable()
	require.Equal(t, int64(2), f.insertInterval(tbl, ts(1, 0, 0), ts(2, 0, 0), f.hourly(1, 2, 2, "a")+" -- the end"))
	require.Equal(t, int64(2), f.insertInterval(tbl, ts(2, 0, 0), ts(3, 0, 0), f.hourly(2, 3, 2, "b")+";\n"))
	require.Equal(t, int64(4), f.count(tbl))
}

// Scenario: a model's time column is TIMESTAMP WITH TIME ZONE and its
// source writes offsets other than UTC; [01:00, 02:00) UTC selects the
// rows of that UTC hour, whatever the session's zone.
func testIntervalTimestampTZ(t *testing.T, f *fixture) {
	tbl := f.table("zoned")
	require.NoError(t, f.e.CreateTable(f.ctx, warehouse.CreateTableParams{Table: tbl, Columns: []warehouse.Column{
		{Name: "ts", Type: "TIMESTAMP WITH TIME ZONE"}, {Name: "id", Type: "BIGINT"},
	}}))
	q := `SELECT CAST(ts AS TIMESTAMP WITH TIME ZONE) AS ts, id FROM (VALUES
		('2024-01-01 00:59:59+00', 1),
		('2024-01-01 01:00:00+00', 2),
		('2024-01-01 02:30:00+01', 3),
		('2024-01-01 02:00:00+00', 4),
		('2024-01-01 03:00:00+05', 5)) AS v(ts, id)`
	n, err := f.e.InsertInterval(f.ctx, warehouse.InsertIntervalParams{Table: tbl, TimeColumn: "ts", Start: ts(1, 0, 0), End: ts(2, 0, 0), Query: q})
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
	require.Equal(t, [][]any{row(ts(1, 0, 0), 2), row(ts(1, 30, 0), 3)}, f.rowsOf(tbl, "ts, id", "id"))
}

// Scenario: a caller hands the interval in a local zone (UTC+05:30); the
// engine compares instants, so it is the same UTC hour and the same rows,
// for TIMESTAMP and DATE time columns alike.
func testIntervalBoundsAreInstants(t *testing.T, f *fixture) {
	local := time.FixedZone("UTC+05:30", 5*3600+1800)
	tbl := f.eventsTable()
	n, err := f.e.InsertInterval(f.ctx, warehouse.InsertIntervalParams{Table: tbl, TimeColumn: "ts",
		Start: ts(1, 0, 0).In(local), End: ts(2, 0, 0).In(local), Query: f.hourly(0, 3, 2, "v")})
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
	require.Equal(t, [][]any{row(ts(1, 0, 0), 100), row(ts(1, 30, 0), 101)}, f.rowsOf(tbl, "ts, id", "id"))

	daily := f.table("daily_local")
	require.NoError(t, f.e.CreateTable(f.ctx, warehouse.CreateTableParams{Table: daily, Columns: []warehouse.Column{
		{Name: "day", Type: "DATE"}, {Name: "total", Type: "BIGINT"},
	}}))
	day := time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC)
	n, err = f.e.InsertInterval(f.ctx, warehouse.InsertIntervalParams{Table: daily, TimeColumn: "day",
		Start: day.In(local), End: day.AddDate(0, 0, 1).In(local),
		Query: `SELECT day, total FROM (VALUES (DATE '2024-01-01', 1), (DATE '2024-01-02', 2), (DATE '2024-01-03', 3)) AS src(day, total)`})
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	require.Equal(t, [][]any{row(day, 2)}, f.rowsOf(daily, "day, total", "day"))
}

// Scenario: a model keeps its time as text ('%Y-%m-%d %H:%M', SQLMesh's
// time_column (ds, format)). The hour [01:00, 02:00) is written with its
// bounds rendered in that format: only the rows whose text falls in
// ['2024-01-01 01:00', '2024-01-01 02:00') land, compared as text byte by
// byte; a re-run replaces them and leaves the other hours alone.
func testIntervalTextBounds(t *testing.T, f *fixture) {
	tbl := f.table("text_events")
	require.NoError(t, f.e.CreateTable(f.ctx, warehouse.CreateTableParams{Table: tbl, Columns: []warehouse.Column{
		{Name: "ds", Type: "TEXT"}, {Name: "id", Type: "BIGINT"}, {Name: "v", Type: "TEXT"},
	}}))
	q := func(tag string) string {
		return `SELECT ds, id, ` + f.cast("'"+tag+"'", "TEXT") + ` AS v FROM (VALUES
		('2024-01-01 00:59', 1), ('2024-01-01 01:00', 2), ('2024-01-01 01:59', 3),
		('2024-01-01 02:00', 4), ('2024-01-01 10:00', 5), (NULL, 6)) AS src(ds, id)`
	}
	write := func(start, end time.Time, tag string) int64 {
		n, err := f.e.InsertInterval(f.ctx, warehouse.InsertIntervalParams{Table: tbl, TimeColumn: "ds", Start: start, End: end,
			Query: q(tag), Text: &warehouse.TextBounds{Start: start.Format("2006-01-02 15:04"), End: end.Format("2006-01-02 15:04")}})
		require.NoError(t, err)
		return n
	}
	require.Equal(t, int64(2), write(ts(1, 0, 0), ts(2, 0, 0), "first"))
	require.Equal(t, int64(1), write(ts(10, 0, 0), ts(11, 0, 0), "ten"))
	require.Equal(t, int64(2), write(ts(1, 0, 0), ts(2, 0, 0), "again"))
	require.Equal(t, [][]any{
		row("2024-01-01 01:00", 2, "again"),
		row("2024-01-01 01:59", 3, "again"),
		row("2024-01-01 10:00", 5, "ten"),
	}, f.rowsOf(tbl, "ds, id, v", "id"))

	_, err := f.e.InsertInterval(f.ctx, warehouse.InsertIntervalParams{Table: tbl, TimeColumn: "ds", Start: ts(1, 0, 0), End: ts(2, 0, 0),
		Query: q("inverted"), Text: &warehouse.TextBounds{Start: "2024-01-01 02:00", End: "2024-01-01 01:00"}})
	requireEngineError(t, err, tbl)
	require.Len(t, f.rowsOf(tbl, "ds", "ds"), 3)
}
