package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/queue"
)

type cfgArgs struct{ K string }

func (cfgArgs) Kind() string { return "config_args" }

type badKind struct{}

func (badKind) Kind() string { return "has space" }

// Scenario: serve is configured wrongly; Open refuses with an error that
// names the field, before touching the database.
func TestOpenRefusesAnInvalidConfig(t *testing.T) {
	t.Parallel()
	db := sqliteConfig(t).SQLite
	// pgxpool connects lazily: the config is refused before any connection.
	pg, err := pgxpool.New(t.Context(), "postgres://nobody@127.0.0.1:1/none")
	require.NoError(t, err)
	t.Cleanup(pg.Close)
	slow := queue.NewWorkers()
	queue.AddWorker(slow, func(context.Context, *queue.Job[cfgArgs]) error { return nil }, queue.WorkerOptions{Timeout: time.Hour})
	for _, c := range []struct {
		name string
		cfg  queue.Config
		want string
	}{
		{"no database", queue.Config{}, "neither SQLite nor Postgres"},
		{"schema on sqlite", queue.Config{SQLite: db, Schema: "x"}, `Schema "x" is for PostgreSQL`},
		{"poll below cooldown", queue.Config{SQLite: db, FetchCooldown: 50 * time.Millisecond, FetchPollInterval: 10 * time.Millisecond}, "FetchPollInterval 10ms is shorter than FetchCooldown 50ms"},
		{"cooldown below minimum", queue.Config{SQLite: db, FetchCooldown: time.Microsecond}, "below River's minimum"},
		{"rescue within timeout", queue.Config{SQLite: db, JobTimeout: time.Hour, RescueStuckJobsAfter: time.Minute}, "RescueStuckJobsAfter 1m0s must exceed JobTimeout 1h0m0s"},
		{"worker timeout over rescue", queue.Config{SQLite: db, Workers: slow}, `kind "config_args": Timeout 1h0m0s must be below RescueStuckJobsAfter 10m0s`},
		{"negative", queue.Config{SQLite: db, MaxWorkers: -1}, "must not be negative"},
		{"negative duration", queue.Config{SQLite: db, JobTimeout: -time.Second}, "JobTimeout is negative"},
		{"both databases", queue.Config{SQLite: db, Postgres: pg}, "both SQLite and Postgres"},
		{"bad schema", queue.Config{Postgres: pg, Schema: "bad-name"}, `Schema "bad-name"`},
	} {
		_, err := queue.Open(t.Context(), c.cfg)
		require.ErrorIs(t, err, queue.ErrConfig, c.name)
		require.ErrorContains(t, err, c.want, c.name)
	}
}

// Scenario: domain code inserts with options out of range; the insert is
// refused naming the kind and the option, on Queue and Inline alike.
func TestInsertRefusesBadOptions(t *testing.T) {
	t.Parallel()
	w := queue.NewWorkers()
	queue.AddWorker(w, func(context.Context, *queue.Job[cfgArgs]) error { return nil }, queue.WorkerOptions{})
	cfg := sqliteConfig(t)
	cfg.Workers = w
	q, err := queue.Open(t.Context(), cfg)
	require.NoError(t, err)
	in := queue.NewInline(w, nil, nil)
	for _, e := range []queue.Enqueuer{q, in} {
		_, err := e.Insert(t.Context(), cfgArgs{}, &queue.InsertOpts{Priority: 5})
		require.ErrorIs(t, err, queue.ErrConfig)
		require.ErrorContains(t, err, "config_args job: Priority 5 is not between 1 and 4")
		_, err = e.Insert(t.Context(), cfgArgs{}, &queue.InsertOpts{MaxAttempts: -2})
		require.ErrorContains(t, err, "MaxAttempts -2 is below 1")
		_, err = e.Insert(t.Context(), nil, nil)
		require.ErrorIs(t, err, queue.ErrConfig)
	}
	_, err = q.Jobs(t.Context(), queue.JobFilter{States: []string{"done"}})
	require.ErrorContains(t, err, `unknown state "done"`)
	_, err = in.Jobs(t.Context(), queue.JobFilter{Limit: 20_000})
	require.ErrorContains(t, err, "Limit 20000")
}

// Scenario: a handler is registered twice for one kind, or for a kind
// River would refuse: AddWorker panics at start, naming the kind.
func TestAddWorkerRefusesDuplicatesAndBadKinds(t *testing.T) {
	t.Parallel()
	w := queue.NewWorkers()
	fn := func(context.Context, *queue.Job[cfgArgs]) error { return nil }
	queue.AddWorker(w, fn, queue.WorkerOptions{})
	require.PanicsWithValue(t, `queue: AddWorker: a worker for kind "config_args" is already registered`, func() {
		queue.AddWorker(w, fn, queue.WorkerOptions{})
	})
	require.Panics(t, func() {
		queue.AddWorker(w, func(context.Context, *queue.Job[badKind]) error { return nil }, queue.WorkerOptions{})
	})
	require.Equal(t, []string{"config_args"}, w.Kinds())
}

// Scenario: the queue's file is named wrongly in the configuration:
// OpenSQLite refuses, naming the path.
func TestOpenSQLiteRefusesABadPath(t *testing.T) {
	t.Parallel()
	_, err := queue.OpenSQLite("")
	require.ErrorIs(t, err, queue.ErrConfig)
	_, err = queue.OpenSQLite(t.TempDir() + "/q.db?mode=ro")
	require.ErrorContains(t, err, "contains '?'")
	_, err = queue.OpenSQLite(t.TempDir() + "/missing-dir/q.db")
	require.ErrorContains(t, err, "missing-dir")
}
