package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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

// Scenario: two databases from one template both start with what prepare
// made, prepare runs once per process, and each copy is still its own.
func TestNewDatabaseFromCopiesTheTemplateOnce(t *testing.T) {
	t.Parallel()
	b := make([]byte, 6)
	_, err := rand.Read(b)
	require.NoError(t, err)
	key := "pgtest_" + hex.EncodeToString(b)
	t.Cleanup(func() {
		ctx := context.Background()
		admin, err := pgx.Connect(ctx, ServerURL())
		require.NoError(t, err)
		defer admin.Close(ctx)
		name := pgx.Identifier{"gapless_tmpl_" + key}.Sanitize()
		_, err = admin.Exec(ctx, "ALTER DATABASE "+name+" WITH IS_TEMPLATE false")
		require.NoError(t, err)
		_, err = admin.Exec(ctx, "DROP DATABASE "+name)
		require.NoError(t, err)
	})
	prepared := 0
	prepare := func(ctx context.Context, u string) error {
		prepared++
		c, err := pgx.Connect(ctx, u)
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		_, err = c.Exec(ctx, "CREATE TABLE from_template (x int); INSERT INTO from_template VALUES (7)")
		return err
	}
	a, c := NewDatabaseFrom(t, key, prepare), NewDatabaseFrom(t, key, prepare)
	require.Equal(t, 1, prepared)
	require.NotEqual(t, a, c)
	ctx := context.Background()
	ca, err := pgx.Connect(ctx, a)
	require.NoError(t, err)
	defer ca.Close(ctx)
	_, err = ca.Exec(ctx, "INSERT INTO from_template VALUES (8)")
	require.NoError(t, err)
	cc, err := pgx.Connect(ctx, c)
	require.NoError(t, err)
	defer cc.Close(ctx)
	var n, x int
	require.NoError(t, cc.QueryRow(ctx, "SELECT count(*), max(x) FROM from_template").Scan(&n, &x))
	require.Equal(t, 1, n)
	require.Equal(t, 7, x)
}

func TestNewDatabaseFromRejectsABadKey(t *testing.T) {
	t.Parallel()
	_, err := template("Bad-Key", func(context.Context, string) error { return nil })
	require.ErrorContains(t, err, `"Bad-Key"`)
}
