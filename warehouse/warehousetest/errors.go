package warehousetest

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
)

var errorScenarios = []scenario{
	{"BadQueryNamesObjectAndSQL", testBadQueryError},
	{"QueryErrorCarriesSQL", testQueryError},
	{"CanceledContextChangesNothing", testCanceledContext},
	{"CloseTwiceThenCallsFail", testUseAfterClose},
	{"SentinelErrors", testSentinelErrors},
}

// Scenario: a model's query names a column that does not exist. Whatever
// the method, the error is a *warehouse.Error that says what was being
// done, to which table, and which SQL failed, so the CLI can show all three.
func testBadQueryError(t *testing.T, f *fixture) {
	src := f.table("source")
	f.createAs(src, "SELECT TIMESTAMP '2024-01-01 00:00:00' AS ts, CAST(1 AS BIGINT) AS id, "+f.cast("'x'", "TEXT")+" AS v")
	bad := "SELECT ts, id, v, no_such_column FROM " + f.q(src)
	events := f.eventsTable()
	target := f.table("target_of_bad_query")

	calls := []struct {
		name  string
		table warehouse.Table
		call  func() error
	}{
		{"create table as", target, func() error {
			return f.e.CreateTableAs(f.ctx, warehouse.CreateTableAsParams{Table: target, Query: bad, WithData: true})
		}},
		{"insert interval", events, func() error {
			_, err := f.e.InsertInterval(f.ctx, warehouse.InsertIntervalParams{Table: events, TimeColumn: "ts", Start: ts(0, 0, 0), End: ts(1, 0, 0), Query: bad})
			return err
		}},
		{"merge by key", events, func() error {
			_, err := f.e.MergeByKey(f.ctx, warehouse.MergeParams{Table: events, Key: []string{"id"}, Query: bad})
			return err
		}},
		{"replace table", events, func() error {
			return f.e.ReplaceTable(f.ctx, warehouse.ReplaceTableParams{Table: events, Query: bad})
		}},
		{"create or replace view", target, func() error {
			return f.e.CreateOrReplaceView(f.ctx, warehouse.ViewParams{View: target, Query: bad})
		}},
	}
	for _, c := range calls {
		we := requireEngineError(t, c.call(), c.table)
		require.Contains(t, we.SQL, "no_such_column", "%s: Error.SQL is not the failing statement", c.name)
		require.Contains(t, we.Error(), "no_such_column", "%s: the message does not show the SQL", c.name)
	}
	ok, err := f.e.TableExists(f.ctx, target)
	require.NoError(t, err)
	require.False(t, ok)
}

// Scenario: an ad-hoc query fails; the error carries the operation and
// the SQL.
func testQueryError(t *testing.T, f *fixture) {
	_, err := f.e.Query(f.ctx, "SELECT nope FROM "+f.q(f.table("nowhere"))+" WHERE 1 = "+f.param(1), 1)
	require.Error(t, err)
	var we *warehouse.Error
	require.ErrorAs(t, err, &we)
	require.NotEmpty(t, we.Op)
	require.Contains(t, we.SQL, "nowhere")
}

// Scenario: the user presses Ctrl-C (the context is cancelled) before a
// write starts; the write fails with context.Canceled and changes nothing.
func testCanceledContext(t *testing.T, f *fixture) {
	tbl := f.eventsTable()
	f.insertInterval(tbl, ts(1, 0, 0), ts(2, 0, 0), f.hourly(1, 2, 2, "kept"))
	before := f.rowsOf(tbl, "ts, id, v", "ts, id")

	ctx, cancel := context.WithCancel(f.ctx)
	cancel()
	_, err := f.e.InsertInterval(ctx, warehouse.InsertIntervalParams{Table: tbl, TimeColumn: "ts", Start: ts(1, 0, 0), End: ts(2, 0, 0), Query: f.hourly(1, 2, 2, "lost")})
	require.ErrorIs(t, err, context.Canceled)
	_, err = f.e.MergeByKey(ctx, warehouse.MergeParams{Table: tbl, Key: []string{"id"}, Query: f.hourly(1, 2, 2, "lost")})
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, f.e.ReplaceTable(ctx, warehouse.ReplaceTableParams{Table: tbl, Query: f.hourly(1, 2, 2, "lost")}), context.Canceled)
	_, err = f.e.InsertRows(ctx, warehouse.InsertRowsParams{Table: tbl, Columns: []string{"id"}, Rows: [][]any{{int64(99)}}})
	require.ErrorIs(t, err, context.Canceled)
	fresh := f.table("never")
	require.ErrorIs(t, f.e.CreateTable(ctx, warehouse.CreateTableParams{Table: fresh, Columns: []warehouse.Column{{Name: "id", Type: "BIGINT"}}}), context.Canceled)
	_, err = f.e.Query(ctx, "SELECT 1")
	require.ErrorIs(t, err, context.Canceled)

	require.Equal(t, before, f.rowsOf(tbl, "ts, id, v", "ts, id"))
	ok, err := f.e.TableExists(f.ctx, fresh)
	require.NoError(t, err)
	require.False(t, ok)
}

// Scenario: a command closes its engine twice on its way out (a deferred
// Close and an explicit one); a goroutine that outlived it then calls
// methods, which fail instead of panicking.
func testUseAfterClose(t *testing.T, f *fixture) {
	tbl := f.eventsTable()
	require.NoError(t, f.e.Close())
	require.NoError(t, f.e.Close())
	_, err := f.e.Query(f.ctx, "SELECT 1")
	requireFails(t, err)
	requireFails(t, f.e.CreateSchema(f.ctx, "late"))
	_, err = f.e.InsertInterval(f.ctx, warehouse.InsertIntervalParams{Table: tbl, TimeColumn: "ts", Start: ts(0, 0, 0), End: ts(1, 0, 0), Query: f.hourly(0, 1, 1, "late")})
	requireFails(t, err)
	_, err = f.e.TableExists(f.ctx, tbl)
	requireFails(t, err)
}

// Scenario: the same mistake gets the same error on every engine: a bad
// name, a bad column type, parameters that make no sense, a merge whose
// query returns a key twice, a missing table and a view where a table is
// needed each fail with package warehouse's sentinel (errors.Is), inside a
// *warehouse.Error, and change nothing.
func testSentinelErrors(t *testing.T, f *fixture) {
	events := f.eventsTable()
	f.insertInterval(events, ts(0, 0, 0), ts(1, 0, 0), f.hourly(0, 1, 2, "kept"))
	before := f.rowsOf(events, "ts, id, v", "ts, id")
	view := f.table("events_view")
	require.NoError(t, f.e.CreateOrReplaceView(f.ctx, warehouse.ViewParams{View: view, Query: "SELECT ts, id, v FROM " + f.q(events)}))
	missing := f.table("no_such_table")
	insert := func(p warehouse.InsertIntervalParams) error {
		if p.TimeColumn == "" {
			p.TimeColumn = "ts"
		}
		if p.Query == "" {
			p.Query = f.hourly(0, 1, 2, "lost")
		}
		if p.Start.IsZero() && p.End.IsZero() {
			p.Start, p.End = ts(0, 0, 0), ts(1, 0, 0)
		}
		_, err := f.e.InsertInterval(f.ctx, p)
		return err
	}
	merge := func(p warehouse.MergeParams) error {
		if p.Query == "" {
			p.Query = f.hourly(0, 1, 2, "lost")
		}
		_, err := f.e.MergeByKey(f.ctx, p)
		return err
	}
	cases := []struct {
		name string
		want error
		call func() error
	}{
		{"empty table name", warehouse.ErrInvalidIdentifier, func() error {
			return f.e.CreateTable(f.ctx, warehouse.CreateTableParams{Table: f.table(""), Columns: []warehouse.Column{{Name: "id", Type: "BIGINT"}}})
		}},
		{"NUL in a column name", warehouse.ErrInvalidIdentifier, func() error {
			return f.e.CreateTable(f.ctx, warehouse.CreateTableParams{Table: f.table("nul"), Columns: []warehouse.Column{{Name: "a\x00b", Type: "BIGINT"}}})
		}},
		{"time column not UTF-8", warehouse.ErrInvalidIdentifier, func() error {
			return insert(warehouse.InsertIntervalParams{Table: events, TimeColumn: "\xff"})
		}},
		{"a type that ends the statement", warehouse.ErrInvalidType, func() error {
			return f.e.CreateTable(f.ctx, warehouse.CreateTableParams{Table: f.table("typ"), Columns: []warehouse.Column{{Name: "id", Type: "BIGINT); DROP TABLE x; --"}}})
		}},
		{"no columns", warehouse.ErrInvalidArgument, func() error {
			return f.e.CreateTable(f.ctx, warehouse.CreateTableParams{Table: f.table("none")})
		}},
		{"end before start", warehouse.ErrInvalidArgument, func() error {
			return insert(warehouse.InsertIntervalParams{Table: events, Start: ts(1, 0, 0), End: ts(0, 0, 0)})
		}},
		{"empty query", warehouse.ErrInvalidArgument, func() error {
			return insert(warehouse.InsertIntervalParams{Table: events, Query: " \n"})
		}},
		{"no such time column", warehouse.ErrInvalidArgument, func() error {
			return insert(warehouse.InsertIntervalParams{Table: events, TimeColumn: "nope"})
		}},
		{"merge without a key", warehouse.ErrInvalidArgument, func() error {
			return merge(warehouse.MergeParams{Table: events})
		}},
		{"merge on a key the table lacks", warehouse.ErrInvalidArgument, func() error {
			return merge(warehouse.MergeParams{Table: events, Key: []string{"nope"}})
		}},
		{"ragged rows", warehouse.ErrInvalidArgument, func() error {
			_, err := f.e.InsertRows(f.ctx, warehouse.InsertRowsParams{Table: events, Columns: []string{"id", "v"}, Rows: [][]any{{int64(1)}}})
			return err
		}},
		{"merge query returns a key twice", warehouse.ErrDuplicateKey, func() error {
			return merge(warehouse.MergeParams{Table: events, Key: []string{"id"},
				Query: "SELECT ts, id, v FROM " + f.q(events) + " UNION ALL SELECT ts, id, v FROM " + f.q(events)})
		}},
		{"columns of a missing table", warehouse.ErrNotFound, func() error {
			_, err := f.e.Columns(f.ctx, missing)
			return err
		}},
		{"insert interval into a missing table", warehouse.ErrNotFound, func() error {
			return insert(warehouse.InsertIntervalParams{Table: missing})
		}},
		{"merge into a missing table", warehouse.ErrNotFound, func() error {
			return merge(warehouse.MergeParams{Table: missing, Key: []string{"id"}})
		}},
		{"insert interval into a view", warehouse.ErrNotATable, func() error {
			return insert(warehouse.InsertIntervalParams{Table: view})
		}},
		{"merge into a view", warehouse.ErrNotATable, func() error {
			return merge(warehouse.MergeParams{Table: view, Key: []string{"id"}})
		}},
	}
	for _, c := range cases {
		err := c.call()
		var we *warehouse.Error
		require.ErrorAs(t, err, &we, "%s: not a *warehouse.Error: %v", c.name, err)
		require.ErrorIs(t, err, c.want, "%s", c.name)
		for _, other := range []error{warehouse.ErrInvalidIdentifier, warehouse.ErrInvalidType, warehouse.ErrInvalidArgument,
			warehouse.ErrDuplicateKey, warehouse.ErrNotFound, warehouse.ErrNotATable} {
			if !errors.Is(c.want, other) {
				require.False(t, errors.Is(err, other), "%s: %v is also %v", c.name, err, other)
			}
		}
	}
	require.Equal(t, before, f.rowsOf(events, "ts, id, v", "ts, id"), "no failed call changed a row")
	for _, name := range []string{"nul", "typ", "none"} {
		ok, err := f.e.TableExists(f.ctx, f.table(name))
		require.NoError(t, err)
		require.False(t, ok, "%s was created", name)
	}
}
