package duckdb

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// Scenario: two transactions insert the same marker past the engine's
// write lock (as two processes would, were the file shared). DuckDB lets
// both insert, each seeing one row affected, and fails the second at
// COMMIT; commitConflict recognises that failure, which ApplyIngest
// reports as already applied, and the loser's write is gone.
func TestMarkerRaceFailsLoserAtCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, err := Open(ctx, "", Options{})
	require.NoError(t, err)
	defer e.Close()
	a, err := e.session(ctx)
	require.NoError(t, err)
	defer a.close()
	b, err := e.session(ctx)
	require.NoError(t, err)
	defer b.close()
	for _, ddl := range ingestDDL {
		_, err := a.exec(ctx, ddl)
		require.NoError(t, err)
	}
	ins := "INSERT INTO " + markersTable + " VALUES ('s', 1, 'batch', 1, 0, now()) ON CONFLICT DO NOTHING"
	for _, s := range []*session{a, b} {
		_, err := s.exec(ctx, "BEGIN TRANSACTION")
		require.NoError(t, err)
		n, err := s.exec(ctx, ins)
		require.NoError(t, err)
		require.Equal(t, int64(1), n, "each transaction sees its own insert")
	}
	_, err = a.exec(ctx, "COMMIT")
	require.NoError(t, err)
	_, err = b.exec(ctx, "COMMIT")
	require.Error(t, err)
	require.True(t, commitConflict(err), "not recognised as a marker conflict: %v", err)
	_, _ = b.exec(ctx, "ROLLBACK")
	res, err := a.query(ctx, "SELECT count(*) FROM "+markersTable)
	require.NoError(t, err)
	require.Equal(t, int64(1), res.Rows[0][0])
	require.False(t, commitConflict(context.Canceled))
}
