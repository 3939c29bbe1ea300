package warehousetest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
)

// readOnlyScenarios check Engine.ReadOnlyQuery: reads run, everything else
// is refused with ErrNotARead and changes nothing. Statements only one
// engine knows (DuckDB's ATTACH and DESCRIBE, PostgreSQL's data-modifying
// CTEs) are checked in that engine's own tests.
var readOnlyScenarios = []scenario{
	{"ReadsRun", testReadOnlyReads},
	{"WritesAreRefusedAndChangeNothing", testReadOnlyRefusesWrites},
	{"WriteInsideAReadIsRefused", testReadOnlyHiddenWrite},
	{"EngineStillWritesAfterARefusal", testReadOnlyThenWrite},
}

// servedTable creates wt.served with three rows (id 1..3), the stand-in
// for a physical table gapless serves.
func (f *fixture) servedTable() warehouse.Table {
	f.t.Helper()
	tbl := f.table("served")
	f.createAs(tbl, "SELECT id, CAST(id * 10 AS BIGINT) AS amount FROM (VALUES (1), (2), (3)) AS v(id)")
	return tbl
}

// readOnly runs sql with ReadOnlyQuery and returns its normalised rows,
// failing the test on error.
func (f *fixture) readOnly(sql string, args ...any) *warehouse.Result {
	f.t.Helper()
	res, err := f.e.ReadOnlyQuery(f.ctx, sql, args...)
	require.NoError(f.t, err, "read-only query: %s", sql)
	require.NotNil(f.t, res)
	return res
}

// requireRefused checks that ReadOnlyQuery refused sql as not a read, with
// a *warehouse.Error.
func (f *fixture) requireRefused(sql string, args ...any) {
	f.t.Helper()
	res, err := f.e.ReadOnlyQuery(f.ctx, sql, args...)
	require.ErrorIs(f.t, err, warehouse.ErrNotARead, "%s", sql)
	require.Nil(f.t, res, "%s", sql)
	var we *warehouse.Error
	require.ErrorAs(f.t, err, &we, "%s", sql)
	require.NotEmpty(f.t, we.Op)
}

// Scenario: `gapless query` runs a user's reads: a SELECT with bound
// arguments, WITH ... SELECT, VALUES, EXPLAIN, an information_schema
// lookup, a query ending in a semicolon and a comment, and one that
// returns no rows (its columns still come back).
func testReadOnlyReads(t *testing.T, f *fixture) {
	tbl := f.servedTable()
	res := f.readOnly("SELECT id, amount FROM "+f.q(tbl)+" WHERE id >= $1 ORDER BY id", 2)
	require.Equal(t, []string{"id", "amount"}, res.Columns)
	require.Equal(t, [][]any{row(2, 20), row(3, 30)}, NormalizeRows(res.Rows))
	require.Equal(t, [][]any{row(60)}, NormalizeRows(f.readOnly(
		"WITH s AS (SELECT amount FROM "+f.q(tbl)+") SELECT CAST(sum(amount) AS BIGINT) AS total FROM s").Rows))
	require.Equal(t, [][]any{row(1, "a")}, NormalizeRows(f.readOnly("VALUES (1, 'a')").Rows))
	require.NotEmpty(t, f.readOnly("EXPLAIN SELECT * FROM "+f.q(tbl)).Rows)
	require.Equal(t, [][]any{row("served")}, NormalizeRows(f.readOnly(
		"SELECT table_name FROM information_schema.tables WHERE table_schema = $1", f.schema).Rows))
	require.Equal(t, [][]any{row(3)}, NormalizeRows(f.readOnly("SELECT count(*) FROM "+f.q(tbl)+"; -- done").Rows))
	empty := f.readOnly("SELECT id FROM "+f.q(tbl)+" WHERE id > $1", 5)
	require.Equal(t, []string{"id"}, empty.Columns)
	require.Empty(t, empty.Rows)
}

// Scenario: `gapless query "DELETE FROM gapless__demo.<table>"` must not
// delete served rows. DELETE, UPDATE, INSERT, CREATE TABLE, CREATE TABLE
// AS, DROP, TRUNCATE, ALTER, a CTE-wrapped DELETE, a read followed by a
// DROP in one string, COPY to a file, SET and COMMIT are each refused with
// ErrNotARead; afterwards the table holds its three rows, no table was
// created, the canary survives and no file was written.
func testReadOnlyRefusesWrites(t *testing.T, f *fixture) {
	c := f.canary()
	tbl := f.servedTable()
	q := f.q(tbl)
	created := f.table("created")
	out := filepath.Join(t.TempDir(), "copied.csv")
	for _, sql := range []string{
		"DELETE FROM " + q,
		"DELETE FROM " + q + " WHERE id = $1",
		"UPDATE " + q + " SET amount = 0",
		"INSERT INTO " + q + " (id, amount) VALUES (4, 40)",
		"CREATE TABLE " + f.q(created) + " (id BIGINT)",
		"CREATE TABLE " + f.q(created) + " AS SELECT * FROM " + q,
		"DROP TABLE " + q,
		"DROP TABLE canary.x",
		"TRUNCATE " + q,
		"ALTER TABLE " + q + " ADD COLUMN extra BIGINT",
		"WITH x AS (SELECT 1 AS one) DELETE FROM " + q,
		"  /* a comment */ (WITH x AS (SELECT 1) SELECT * FROM x); DROP TABLE " + q,
		"SELECT 1; DROP TABLE " + q,
		"COPY " + q + " TO '" + out + "'",
		"SET search_path = 'canary'",
		"COMMIT",
		"EXPLAIN ANALYZE DELETE FROM " + q,
	} {
		var args []any
		if sql == "DELETE FROM "+q+" WHERE id = $1" {
			args = []any{1}
		}
		f.requireRefused(sql, args...)
		require.Equal(t, [][]any{row(1, 10), row(2, 20), row(3, 30)}, f.rowsOf(tbl, "id, amount", "id"), "after %s", sql)
	}
	exists, err := f.e.TableExists(f.ctx, created)
	require.NoError(t, err)
	require.False(t, exists, "a refused CREATE TABLE created %s", created)
	cols, err := f.e.Columns(f.ctx, tbl)
	require.NoError(t, err)
	require.Len(t, cols, 2, "a refused ALTER TABLE changed the columns: %v", cols)
	_, err = os.Stat(out)
	require.ErrorIs(t, err, os.ErrNotExist, "a refused COPY wrote %s", out)
	f.requireCanary(c)
}

// Scenario: a statement that is a SELECT but writes (nextval advances a
// sequence) is refused by the read-only transaction, and the sequence does
// not move.
func testReadOnlyHiddenWrite(t *testing.T, f *fixture) {
	seq := f.qi(f.schema) + "." + f.qi("ids")
	_, err := f.e.Query(f.ctx, "CREATE SEQUENCE "+seq)
	require.NoError(t, err)
	f.requireRefused("SELECT nextval('" + f.schema + ".ids')")
	require.Equal(t, [][]any{row(1)}, f.query("SELECT nextval('"+f.schema+".ids')"), "the refused nextval advanced the sequence")
}

// Scenario: refusals leave no connection of the engine inside a read-only
// transaction: after many refused statements, writes through the engine's
// other methods and Query still succeed.
func testReadOnlyThenWrite(t *testing.T, f *fixture) {
	tbl := f.servedTable()
	for range 8 {
		f.requireRefused("INSERT INTO " + f.q(tbl) + " (id, amount) VALUES (9, 90)")
		f.readOnly("SELECT 1")
	}
	n, err := f.e.InsertRows(f.ctx, warehouse.InsertRowsParams{Table: tbl, Columns: []string{"id", "amount"}, Rows: [][]any{{int64(4), int64(40)}}})
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	_, err = f.e.Query(f.ctx, "DELETE FROM "+f.q(tbl)+" WHERE id = 1")
	require.NoError(t, err)
	require.Equal(t, [][]any{row(2, 20), row(3, 30), row(4, 40)}, f.rowsOf(tbl, "id, amount", "id"))
}
