package warehousetest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
)

// readOnlyScenarios check Engine.ReadOnlyQuery: reads run, everything else
// is refused with ErrNotARead and changes nothing. The statements are each
// dialect's own (dialect.go's readOnlyRefusals): Trino has no COPY and no
// sequences but has CALL, SET SESSION and EXPLAIN ANALYZE of any write.
// Statements only one engine knows beyond those (DuckDB's ATTACH and
// DESCRIBE, PostgreSQL's data-modifying CTEs in depth) are checked in
// that engine's own tests.
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
	res := f.readOnly("SELECT id, amount FROM "+f.q(tbl)+" WHERE id >= "+f.param(1)+" ORDER BY id", 2)
	require.Equal(t, []string{"id", "amount"}, res.Columns)
	require.Equal(t, [][]any{row(2, 20), row(3, 30)}, NormalizeRows(res.Rows))
	require.Equal(t, [][]any{row(60)}, NormalizeRows(f.readOnly(
		"WITH s AS (SELECT amount FROM "+f.q(tbl)+") SELECT CAST(sum(amount) AS BIGINT) AS total FROM s").Rows))
	require.Equal(t, [][]any{row(1, "a")}, NormalizeRows(f.readOnly("VALUES (1, 'a')").Rows))
	require.NotEmpty(t, f.readOnly("EXPLAIN SELECT * FROM "+f.q(tbl)).Rows)
	require.Equal(t, [][]any{row("served")}, NormalizeRows(f.readOnly(
		f.listObjects(), f.fold(f.schema)).Rows))
	require.Equal(t, [][]any{row(3)}, NormalizeRows(f.readOnly("SELECT count(*) FROM "+f.q(tbl)+"; -- done").Rows))
	empty := f.readOnly("SELECT id FROM "+f.q(tbl)+" WHERE id > "+f.param(1), 5)
	require.Equal(t, []string{"id"}, empty.Columns)
	require.Empty(t, empty.Rows)
}

// Scenario: `gapless query "DELETE FROM gapless__demo.<table>"` must not
// delete served rows. DELETE, UPDATE, INSERT, CREATE TABLE, CREATE TABLE
// AS, CREATE SCHEMA, DROP, TRUNCATE, ALTER, a read followed by a DROP in
// one string, COMMIT and EXPLAIN ANALYZE DELETE are each refused with
// ErrNotARead on every engine, and so are the dialect's own: a CTE-wrapped
// DELETE, COPY to a file and SET (DuckDB, PostgreSQL); MERGE, SET SESSION,
// START TRANSACTION, a CALL that unregisters the table, GRANT, ANALYZE,
// USE, COMMENT and ALTER TABLE EXECUTE (Trino). Afterwards the table holds
// its three rows and its columns, no table or schema was created, the
// canary survives and no file was written.
func testReadOnlyRefusesWrites(t *testing.T, f *fixture) {
	c := f.canary()
	tbl := f.servedTable()
	created, createdSchema := f.table("created"), "created_schema"
	out := filepath.Join(t.TempDir(), "copied.csv")
	refusals := f.readOnlyRefusals(tbl, created, createdSchema, out)
	for _, st := range refusals {
		f.requireRefused(st.sql, st.args...)
	}
	// One read after them all (a statement costs up to half a second on
	// Trino): a refusal that wrote anyway shows here.
	require.Equal(t, [][]any{row(1, 10), row(2, 20), row(3, 30)}, f.rowsOf(tbl, "id, amount", "id"), "after the %d refused statements", len(refusals))
	exists, err := f.e.TableExists(f.ctx, created)
	require.NoError(t, err)
	require.False(t, exists, "a refused CREATE TABLE created %s", created)
	require.False(t, f.schemaExists(createdSchema), "a refused CREATE SCHEMA created %s", createdSchema)
	cols, err := f.e.Columns(f.ctx, tbl)
	require.NoError(t, err)
	require.Len(t, cols, 2, "a refused ALTER TABLE changed the columns: %v", cols)
	_, err = os.Stat(out)
	require.ErrorIs(t, err, os.ErrNotExist, "a refused COPY wrote %s", out)
	f.requireCanary(c)
}

// refusedStatement is a statement ReadOnlyQuery must refuse, with its
// arguments.
type refusedStatement struct {
	sql  string
	args []any
}

// readOnlyRefusals are the statements that are not reads, in the engine's
// dialect, against served (three rows of id and amount) and the canary
// table canary.x: each must be refused and change nothing. Statements
// every dialect has come first; then DuckDB's and PostgreSQL's (TRUNCATE
// without TABLE, a data-modifying CTE, COPY to the file out, SET), or
// Trino's (TRUNCATE TABLE, MERGE, session and transaction statements,
// CALL of the procedure that unregisters served, GRANT, ANALYZE, USE,
// COMMENT, ALTER TABLE EXECUTE). created names a table and createdSchema
// a schema that must not come to exist.
func (f *fixture) readOnlyRefusals(served, created warehouse.Table, createdSchema, out string) []refusedStatement {
	q := f.q(served)
	s := func(sql string, args ...any) refusedStatement { return refusedStatement{sql: sql, args: args} }
	list := []refusedStatement{
		s("DELETE FROM " + q),
		s("DELETE FROM "+q+" WHERE id = "+f.param(1), 1),
		s("UPDATE " + q + " SET amount = 0"),
		s("INSERT INTO " + q + " (id, amount) VALUES (4, 40)"),
		s("CREATE TABLE " + f.q(created) + " (id BIGINT)"),
		s("CREATE TABLE " + f.q(created) + " AS SELECT * FROM " + q),
		s("CREATE SCHEMA " + f.qi(createdSchema)),
		s("DROP TABLE " + q),
		s("DROP TABLE canary.x"),
		s("ALTER TABLE " + q + " ADD COLUMN extra BIGINT"),
		s("  /* a comment */ (WITH x AS (SELECT 1) SELECT * FROM x); DROP TABLE " + q),
		s("SELECT 1; DROP TABLE " + q),
		s("COMMIT"),
		s("EXPLAIN ANALYZE DELETE FROM " + q),
	}
	if f.dialect != trino {
		return append(list,
			s("TRUNCATE "+q),
			s("WITH x AS (SELECT 1 AS one) DELETE FROM "+q),
			s("COPY "+q+" TO '"+out+"'"),
			s("SET search_path = 'canary'"),
		)
	}
	return append(list,
		s("TRUNCATE TABLE "+q),
		s("MERGE INTO "+q+" AS t USING (VALUES (1)) AS v(id) ON t.id = v.id WHEN MATCHED THEN DELETE"),
		s("SET SESSION query_max_run_time = '1h'"),
		s("RESET SESSION query_max_run_time"),
		s("START TRANSACTION"),
		s("ROLLBACK"),
		s("CALL system.unregister_table(schema_name => '"+f.fold(served.Schema)+"', table_name => '"+f.fold(served.Name)+"')"),
		s("GRANT SELECT ON "+q+" TO USER alice"),
		s("ANALYZE "+q),
		s("USE canary"),
		s("COMMENT ON TABLE "+q+" IS 'changed'"),
		s("ALTER TABLE "+q+" EXECUTE optimize"),
	)
}

// Scenario: a statement that reads but writes is refused by the read-only
// transaction, and writes nothing: on DuckDB and PostgreSQL a SELECT of
// nextval (the sequence does not move); on Trino, which runs the statement
// EXPLAIN ANALYZE explains, an EXPLAIN ANALYZE of an INSERT, a MERGE and
// a CREATE TABLE AS (the table keeps its rows, no table is created).
func testReadOnlyHiddenWrite(t *testing.T, f *fixture) {
	if f.dialect != trino {
		seq := f.qi(f.schema) + "." + f.qi("ids")
		_, err := f.e.Query(f.ctx, "CREATE SEQUENCE "+seq)
		require.NoError(t, err)
		f.requireRefused("SELECT nextval('" + f.schema + ".ids')")
		require.Equal(t, [][]any{row(1)}, f.query("SELECT nextval('"+f.schema+".ids')"), "the refused nextval advanced the sequence")
		return
	}
	tbl := f.servedTable()
	q := f.q(tbl)
	created := f.table("explained")
	for _, sql := range []string{
		"EXPLAIN ANALYZE INSERT INTO " + q + " (id, amount) VALUES (4, 40)",
		"EXPLAIN ANALYZE VERBOSE MERGE INTO " + q + " AS t USING (VALUES (1)) AS v(id) ON t.id = v.id WHEN MATCHED THEN DELETE",
		"EXPLAIN ANALYZE CREATE TABLE " + f.q(created) + " AS SELECT * FROM " + q,
	} {
		f.requireRefused(sql)
	}
	require.Equal(t, [][]any{row(1, 10), row(2, 20), row(3, 30)}, f.rowsOf(tbl, "id, amount", "id"), "a refused EXPLAIN ANALYZE wrote")
	require.Equal(t, []string{"served"}, f.objects(f.schema), "a refused EXPLAIN ANALYZE created a table")
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
