package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

func TestNewDatabaseIsIsolated(t *testing.T) {
	t.Parallel()
	a, b := NewDatabase(t), NewDatabase(t)
	require.NotEqual(t, a, b)
	ctx := context.Background()
	ca, err := pgx.Connect(ctx, a)
	require.NoError(t, err)
	defer ca.Close(ctx)
	_, err = ca.Exec(ctx, "CREATE TABLE only_in_a (x int)")
	require.NoError(t, err)
	cb, err := pgx.Connect(ctx, b)
	require.NoError(t, err)
	defer cb.Close(ctx)
	var n int
	require.NoError(t, cb.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = 'only_in_a'").Scan(&n))
	require.Zero(t, n)
}
