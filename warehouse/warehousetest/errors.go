package warehousetest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
)

var errorScenarios = []scenario{
	{"BadQueryNamesObjectAndSQL", testBadQueryError},
	{"QueryErrorCarriesSQL", testQueryError},
	{"CanceledContextChangesNothing", testCanceledContext},
	{"CloseTwiceThenCallsFail", testUseAfterClose},
}

// Scenario: a model's query names a column that does not exist. Whatever
// the method, the error is a *warehouse.Error that says what was being
// done, to which table, and which SQL failed, so the CLI can show all three.
func testBadQueryError(t *testing.T, f *fixture) {
	src := f.table("source")
	f.createAs(src, "SELECT TIMESTAMP '2024-01-01 00:00:00' AS ts, CAST(1 AS BIGINT) AS id, CAST('x' AS TEXT) AS v")
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
	_, err := f.e.Query(f.ctx, "SELECT nope FROM "+f.q(f.table("nowhere"))+" WHERE 1 = $1", 1)
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
	f.insertInterval(tbl, ts(1, 0, 0), ts(2, 0, 0), hourly(1, 2, 2, "kept"))
	before := f.rowsOf(tbl, "ts, id, v", "ts, id")

	ctx, cancel := context.WithCancel(f.ctx)
	cancel()
	_, err := f.e.InsertInterval(ctx, warehouse.InsertIntervalParams{Table: tbl, TimeColumn: "ts", Start: ts(1, 0, 0), End: ts(2, 0, 0), Query: hourly(1, 2, 2, "lost")})
	require.ErrorIs(t, err, context.Canceled)
	_, err = f.e.MergeByKey(ctx, warehouse.MergeParams{Table: tbl, Key: []string{"id"}, Query: hourly(1, 2, 2, "lost")})
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, f.e.ReplaceTable(ctx, warehouse.ReplaceTableParams{Table: tbl, Query: hourly(1, 2, 2, "lost")}), context.Canceled)
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
	_, err = f.e.InsertInterval(f.ctx, warehouse.InsertIntervalParams{Table: tbl, TimeColumn: "ts", Start: ts(0, 0, 0), End: ts(1, 0, 0), Query: hourly(0, 1, 1, "late")})
	requireFails(t, err)
	_, err = f.e.TableExists(f.ctx, tbl)
	requireFails(t, err)
}
