package postgres_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
)

// Scenario: PostgreSQL's own statements through ReadOnlyQuery. SHOW, TABLE
// and a SELECT of a system view are reads and run. A data-modifying CTE
// under a SELECT, SELECT ... INTO, a DO block, LOCK, CALL of a procedure
// that writes, LISTEN, PREPARE and VACUUM are refused with ErrNotARead;
// afterwards the table holds its rows and nothing was created.
func TestReadOnlyQueryPostgresStatements(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, `CREATE TABLE s.t AS SELECT g AS id FROM generate_series(1, 3) AS g`)
	b.exec(t, `CREATE PROCEDURE s.wipe() LANGUAGE sql AS $$ DELETE FROM s.t $$`)

	for _, sql := range []string{
		"SHOW search_path",
		"TABLE s.t",
		"SELECT relname FROM pg_class WHERE relname = 't'",
		"EXPLAIN (COSTS OFF) SELECT * FROM s.t",
	} {
		res, err := b.e.ReadOnlyQuery(b.ctx, sql)
		require.NoError(t, err, sql)
		require.NotEmpty(t, res.Rows, sql)
	}
	for _, sql := range []string{
		"WITH gone AS (DELETE FROM s.t RETURNING id) SELECT count(*) FROM gone",
		"WITH moved AS (UPDATE s.t SET id = id + 10 RETURNING id) SELECT * FROM moved",
		"SELECT * INTO s.copy FROM s.t",
		"DELETE FROM s.t RETURNING id",
		"DO $$ BEGIN DELETE FROM s.t; END $$",
		"LOCK TABLE s.t IN ACCESS EXCLUSIVE MODE",
		"CALL s.wipe()",
		"LISTEN gapless",
		"PREPARE p AS SELECT 1",
		"VACUUM s.t",
		"COPY s.t TO PROGRAM 'true'",
		"ROLLBACK",
	} {
		_, err := b.e.ReadOnlyQuery(b.ctx, sql)
		require.ErrorIs(t, err, warehouse.ErrNotARead, sql)
	}
	require.Equal(t, [][]any{{int64(1)}, {int64(2)}, {int64(3)}}, b.rows(t, "SELECT id::bigint FROM s.t ORDER BY id"))
	ok, err := b.e.TableExists(b.ctx, tbl("copy"))
	require.NoError(t, err)
	require.False(t, ok, "a refused SELECT INTO created s.copy")
}
