package postgres_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
	"github.com/gapless-dev/gapless/warehouse/postgres"
)

func TestCreateSchemaRacingItself(t *testing.T) {
	t.Parallel()
	// Scenario: eight deploys create the same schema at once. PostgreSQL's
	// IF NOT EXISTS can lose that race with a unique violation; the engine
	// counts it as done, so every call succeeds.
	b := setup(t)
	const workers = 8
	start := make(chan struct{})
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			<-start
			errs <- b.e.CreateSchema(b.ctx, "raced")
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.EqualValues(t, 1, b.scalar(t, `SELECT count(*) FROM pg_namespace WHERE nspname = 'raced'`))
}

func TestTablesViewsAndDrops(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, b.e.CreateTableAs(b.ctx, warehouse.CreateTableAsParams{Table: tbl("t"), WithData: true,
		Query: `SELECT 1::bigint AS id, 'x'::varchar(10) AS name, 1.5::numeric(10,2) AS amount, now() AS at`}))
	require.NoError(t, b.e.CreateOrReplaceView(b.ctx, warehouse.ViewParams{View: tbl("v"), Query: `SELECT id, name FROM s.t`}))
	b.exec(t, `CREATE INDEX t_id ON s.t (id)`)
	b.exec(t, `CREATE SEQUENCE s.seq`)

	for name, want := range map[string]bool{"t": true, "v": true, "t_id": false, "seq": false, "nope": false} {
		require.Equal(t, want, b.exists(t, tbl(name)), name)
	}
	ok, err := b.e.TableExists(b.ctx, warehouse.Table{Schema: "no_such_schema", Name: "t"})
	require.NoError(t, err)
	require.False(t, ok)

	cols, err := b.e.Columns(b.ctx, tbl("t"))
	require.NoError(t, err)
	require.Equal(t, []warehouse.Column{
		{Name: "id", Type: "bigint"}, {Name: "name", Type: "character varying(10)"},
		{Name: "amount", Type: "numeric(10,2)"}, {Name: "at", Type: "timestamp with time zone"},
	}, cols)
	cols, err = b.e.Columns(b.ctx, tbl("v"))
	require.NoError(t, err)
	require.Equal(t, []warehouse.Column{{Name: "id", Type: "bigint"}, {Name: "name", Type: "character varying(10)"}}, cols)
	_, err = b.e.Columns(b.ctx, tbl("nope"))
	requireWarehouseError(t, err, "columns")
	require.ErrorIs(t, err, warehouse.ErrNotFound)

	// Creating over a taken name fails and changes nothing.
	err = b.e.CreateTable(b.ctx, warehouse.CreateTableParams{Table: tbl("t"), Columns: []warehouse.Column{{Name: "z", Type: "int"}}})
	requireWarehouseError(t, err, "create table")
	require.Equal(t, "42P07", pgCode(err))
	err = b.e.CreateTableAs(b.ctx, warehouse.CreateTableAsParams{Table: tbl("v"), Query: `SELECT 1 AS z`})
	requireWarehouseError(t, err, "create table as")
	require.Equal(t, "42P07", pgCode(err))
	err = b.e.CreateTable(b.ctx, warehouse.CreateTableParams{Table: tbl("z")})
	require.ErrorIs(t, err, warehouse.ErrInvalidArgument, "no columns")

	// Scenario: a view reads the table. Dropping the table never cascades:
	// it fails, and both stay; dropping the wrong kind fails too.
	err = b.e.DropTable(b.ctx, tbl("t"))
	requireWarehouseError(t, err, "drop table")
	require.Equal(t, "2BP01", pgCode(err))
	require.Equal(t, "42809", pgCode(b.e.DropTable(b.ctx, tbl("v"))))
	require.Equal(t, "42809", pgCode(b.e.DropView(b.ctx, tbl("t"))))
	require.True(t, b.exists(t, tbl("t")))
	require.True(t, b.exists(t, tbl("v")))

	require.NoError(t, b.e.DropView(b.ctx, tbl("v")))
	require.NoError(t, b.e.DropView(b.ctx, tbl("v")), "already gone")
	require.NoError(t, b.e.DropTable(b.ctx, tbl("t")))
	require.NoError(t, b.e.DropTable(b.ctx, tbl("t")), "already gone")
	require.NoError(t, b.e.DropTable(b.ctx, warehouse.Table{Schema: "no_such_schema", Name: "t"}))
	require.False(t, b.exists(t, tbl("t")))
}

func TestErrorsNameOperationObjectAndSQL(t *testing.T) {
	t.Parallel()
	// Scenario: a model's SQL is wrong. The error says what the engine was
	// doing, to which table, with which SQL, and still carries the
	// server's error for callers that branch on its SQLSTATE.
	b := setup(t)
	err := b.e.CreateTableAs(b.ctx, warehouse.CreateTableAsParams{Table: tbl("t"), Query: `SELECT * FROM s.missing`})
	we := requireWarehouseError(t, err, "create table as")
	require.Equal(t, "s.t", we.Object)
	require.Contains(t, we.SQL, `CREATE TABLE "s"."t" AS`)
	require.Contains(t, we.SQL, `s.missing`)
	require.Equal(t, "42P01", pgCode(err))
	require.Contains(t, err.Error(), "s.t")
	require.Contains(t, err.Error(), "SQL:")

	_, err = b.e.Query(b.ctx, `SELECT nope`)
	we = requireWarehouseError(t, err, "query")
	require.NotEmpty(t, we.Object)
	require.Equal(t, `SELECT nope`, we.SQL)
	require.Equal(t, "42703", pgCode(err))
}

func TestOpenFailures(t *testing.T) {
	t.Parallel()
	// Scenario: a bad connection string, or a server that is not there.
	// Open fails with a *warehouse.Error that never shows the password.
	ctx := t.Context()
	for _, url := range []string{
		"postgres://gapless:s3cret@127.0.0.1:1/db?connect_timeout=5",
		"postgres://gapless:s3cret@[::1/db",
		"host=127.0.0.1 port=1 password=s3cret connect_timeout=5",
	} {
		e, err := postgres.Open(ctx, url)
		require.Nil(t, e)
		requireWarehouseError(t, err, "open")
		require.NotContains(t, err.Error(), "s3cret")
	}
}

func TestLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, `CREATE TABLE s.t AS SELECT 1 AS id, timestamp '2024-01-01' AS at`)

	// Scenario: the caller gives up before the call. It fails with
	// context.Canceled and changes nothing.
	ctx, cancel := context.WithCancel(b.ctx)
	cancel()
	_, err := b.e.InsertInterval(ctx, warehouse.InsertIntervalParams{Table: tbl("t"), TimeColumn: "at", Start: day(1), End: day(2), Query: `SELECT 2 AS id, at FROM s.t`})
	require.ErrorIs(t, err, context.Canceled)
	requireWarehouseError(t, err, "insert interval")
	err = b.e.ReplaceTable(ctx, warehouse.ReplaceTableParams{Table: tbl("t"), Query: `SELECT 3 AS id`})
	require.ErrorIs(t, err, context.Canceled)
	_, err = b.e.Query(ctx, `SELECT 1`)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, [][]any{{int64(1)}}, b.rows(t, `SELECT id FROM s.t`))

	// Scenario: a long query is cancelled while it runs.
	ctx, cancel = context.WithCancel(b.ctx)
	done := make(chan error, 1)
	go func() {
		done <- b.e.ReplaceTable(ctx, warehouse.ReplaceTableParams{Table: tbl("t"), Query: `SELECT 4 AS id FROM (SELECT pg_sleep(30)) AS x`})
	}()
	// Wait until the server is running it, then cancel.
	for {
		n := b.scalar(t, `SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(30)%' AND pid <> pg_backend_pid() AND state = 'active'`)
		if n.(int64) > 0 {
			break
		}
	}
	cancel()
	err = <-done
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, [][]any{{int64(1)}}, b.rows(t, `SELECT id FROM s.t`))
	require.Zero(t, b.tmpTables(t))

	// Scenario: calls after Close fail without panicking; Close twice is fine.
	e, err := postgres.Open(b.ctx, b.url)
	require.NoError(t, err)
	require.NoError(t, e.Close())
	require.NoError(t, e.Close())
	_, err = e.Query(b.ctx, `SELECT 1`)
	requireWarehouseError(t, err, "query")
	err = e.CreateSchema(b.ctx, "late")
	requireWarehouseError(t, err, "create schema")
	require.True(t, strings.Contains(err.Error(), "closed"), err.Error())
}
