package queue_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/internal/pgtest"
	"github.com/gapless-dev/gapless/queue"
	"github.com/gapless-dev/gapless/queue/queuetest"
)

// sqliteConfig is a Config on a fresh SQLite file of tb's.
func sqliteConfig(tb testing.TB) queue.Config {
	tb.Helper()
	return sqliteConfigAt(tb, filepath.Join(tb.TempDir(), "queue.db"))
}

// postgresConfig is a Config on a fresh PostgreSQL database of tb's.
func postgresConfig(tb testing.TB) queue.Config {
	tb.Helper()
	pool, err := pgxpool.New(context.Background(), pgtest.NewDatabase(tb))
	require.NoError(tb, err)
	tb.Cleanup(pool.Close)
	return queue.Config{Postgres: pool}
}

func TestConformanceSQLite(t *testing.T) {
	t.Parallel()
	queuetest.Run(t, func(t *testing.T) queue.Config { return sqliteConfig(t) })
}

func TestConformancePostgres(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	queuetest.Run(t, func(t *testing.T) queue.Config { return postgresConfig(t) })
}

func TestConformanceInline(t *testing.T) {
	t.Parallel()
	queuetest.RunInline(t)
}

// Scenario: the queue shares the state store's PostgreSQL database; its
// tables live in their own schema (gapless_queue by default, or the one
// configured), created by Migrate, and nothing lands in public.
func TestPostgresTablesLiveInTheirSchema(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	for _, schema := range []string{"", "other_queue"} {
		cfg := postgresConfig(t)
		cfg.Schema = schema
		require.NoError(t, queue.Migrate(ctx, cfg))
		want := schema
		if want == "" {
			want = queue.DefaultSchema
		}
		var inSchema, inPublic int
		require.NoError(t, cfg.Postgres.QueryRow(ctx,
			"SELECT count(*) FILTER (WHERE table_schema = $1), count(*) FILTER (WHERE table_schema = 'public') FROM information_schema.tables WHERE table_name = 'river_job'",
			want).Scan(&inSchema, &inPublic))
		require.Equal(t, 1, inSchema, "river_job in %s", want)
		require.Equal(t, 0, inPublic)
	}
}

type txArgs struct{ PR int }

func (txArgs) Kind() string { return "queue_tx" }

// Scenario: a settle moves prod's generation and enqueues the re-plans in
// the same PostgreSQL transaction: rolled back, neither the row nor the
// job exists; committed, both do, and the job runs. On SQLite (the queue's
// own file) a transactional insert is refused.
func TestInsertPgxTxIsAtomicWithTheTransaction(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cfg := postgresConfig(t)
	queuetest.Tune(&cfg)
	_, err := cfg.Postgres.Exec(ctx, "CREATE TABLE app_state (generation int)")
	require.NoError(t, err)
	rec := queuetest.NewRecorder()
	w := queue.NewWorkers()
	queue.AddWorker(w, func(context.Context, *queue.Job[txArgs]) error { return nil }, queue.WorkerOptions{})
	cfg.Workers, cfg.OnEvent = w, rec.Add
	q, err := queue.Open(ctx, cfg)
	require.NoError(t, err)
	require.NoError(t, q.Start(ctx))
	t.Cleanup(func() { require.NoError(t, q.Stop(context.Background())) })

	write := func(gen int, commit bool) queue.Inserted {
		tx, err := cfg.Postgres.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, "INSERT INTO app_state VALUES ($1)", gen)
		require.NoError(t, err)
		ins, err := q.InsertPgxTx(ctx, tx, txArgs{PR: gen}, nil)
		require.NoError(t, err)
		if commit {
			require.NoError(t, tx.Commit(ctx))
		} else {
			require.NoError(t, tx.Rollback(ctx))
		}
		return ins
	}
	write(1, false)
	rows, err := q.Jobs(ctx, queue.JobFilter{})
	require.NoError(t, err)
	require.Empty(t, rows, "a rolled-back transaction leaves no job")

	ins := write(2, true)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, rec.Wait(wctx, queuetest.Final(ins.ID)), "events: %v", rec.Events())
	var gens []int
	r, err := cfg.Postgres.Query(ctx, "SELECT generation FROM app_state")
	require.NoError(t, err)
	gens, err = pgx.CollectRows(r, pgx.RowTo[int])
	require.NoError(t, err)
	require.Equal(t, []int{2}, gens)

	lite := sqliteConfig(t)
	lite.Workers = w
	ql, err := queue.Open(ctx, lite)
	require.NoError(t, err)
	tx, err := cfg.Postgres.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = ql.InsertPgxTx(ctx, tx, txArgs{PR: 3}, nil)
	require.ErrorIs(t, err, queue.ErrConfig)
}

// Scenario: two serve processes share one SQLite queue file, each with its
// own connection (the file's lock, not a shared pool, serialises them):
// each job runs exactly once.
func TestSQLiteTwoHandlesOnOneFileRunEachJobOnce(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "queue.db")
	queuetest.TwoClientsRunEachJobOnce(t, sqliteConfigAt(t, path), sqliteConfigAt(t, path))
}

// Scenario: `gapless migrate` and `gapless serve` migrate one fresh SQLite
// queue file at once, each on its own connection: one waits for the
// other's transaction and finds every version applied.
func TestSQLiteMigrateFromTwoHandlesAtOnce(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "queue.db")
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			db, err := queue.OpenSQLite(path)
			if err != nil {
				errs <- err
				return
			}
			defer func() { _ = db.Close() }()
			errs <- queue.Migrate(context.Background(), queue.Config{SQLite: db})
		}()
	}
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)
	cfg := sqliteConfigAt(t, path)
	q, err := queue.Open(t.Context(), cfg)
	require.NoError(t, err)
	counts, err := q.Counts(t.Context())
	require.NoError(t, err)
	require.Empty(t, counts)
}

func sqliteConfigAt(tb testing.TB, path string) queue.Config {
	tb.Helper()
	db, err := queue.OpenSQLite(path)
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, db.Close()) })
	return queue.Config{SQLite: db}
}
