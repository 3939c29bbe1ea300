package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/internal/pgtest"
	"github.com/gapless-dev/gapless/warehouse"
	"github.com/gapless-dev/gapless/warehouse/postgres"
)

// bundle is what most tests need: an engine on a fresh database of its own,
// with schema "s" created.
type bundle struct {
	ctx context.Context
	e   *postgres.Engine
	url string
}

const schema = "s"

func tbl(name string) warehouse.Table { return warehouse.Table{Schema: schema, Name: name} }

func setup(t *testing.T) *bundle {
	t.Helper()
	url := pgtest.NewDatabase(t)
	return setupOn(t, url)
}

// setupOn opens an engine on url (whose database already exists).
func setupOn(t *testing.T, url string) *bundle {
	t.Helper()
	ctx := t.Context()
	e, err := postgres.Open(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.Close()) })
	require.NoError(t, e.CreateSchema(ctx, schema))
	return &bundle{ctx: ctx, e: e, url: url}
}

// exec runs raw SQL for a test's arrangement, bypassing the engine.
func (b *bundle) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	_, err := b.e.Pool().Exec(b.ctx, sql, args...)
	require.NoError(t, err, sql)
}

// rows runs a query through the engine and returns its rows.
func (b *bundle) rows(t *testing.T, sql string, args ...any) [][]any {
	t.Helper()
	res, err := b.e.Query(b.ctx, sql, args...)
	require.NoError(t, err, sql)
	return res.Rows
}

// scalar returns the single value of a one-row, one-column query.
func (b *bundle) scalar(t *testing.T, sql string, args ...any) any {
	t.Helper()
	r := b.rows(t, sql, args...)
	require.Len(t, r, 1, sql)
	require.Len(t, r[0], 1, sql)
	return r[0][0]
}

func (b *bundle) exists(t *testing.T, tb warehouse.Table) bool {
	t.Helper()
	ok, err := b.e.TableExists(b.ctx, tb)
	require.NoError(t, err)
	return ok
}

// tmpTables counts leftovers of build-beside operations.
func (b *bundle) tmpTables(t *testing.T) int64 {
	t.Helper()
	return b.scalar(t, `SELECT count(*) FROM pg_class WHERE relname LIKE 'gapless\_tmp\_%'`).(int64)
}

// requireWarehouseError asserts err is a *warehouse.Error for op and
// returns it.
func requireWarehouseError(t *testing.T, err error, op string) *warehouse.Error {
	t.Helper()
	require.Error(t, err)
	var we *warehouse.Error
	require.ErrorAs(t, err, &we)
	require.Equal(t, op, we.Op)
	return we
}

// pgCode is the SQLSTATE wrapped in err, or "".
func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// ints turns a one-column result into int64s.
func ints(t *testing.T, rows [][]any) []int64 {
	t.Helper()
	out := make([]int64, len(rows))
	for i, r := range rows {
		v, ok := r[0].(int64)
		require.True(t, ok, "value %#v is not int64", r[0])
		out[i] = v
	}
	return out
}
