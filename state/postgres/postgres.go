// Package postgres is gapless's production state store: state.Store on
// PostgreSQL through pgx v5, shared by several scheduler and deploy processes
// on several machines.
//
// # Concurrency
//
// Every transaction runs at READ COMMITTED. Each transition that depends on
// earlier state gets its evidence from a row lock taken in the same
// transaction as the write, or from a single statement whose WHERE clause is
// the compare-and-swap:
//
//   - Leases are single statements in river's style: acquire is an upsert
//     whose DO UPDATE only fires when the held lease is expired at the
//     caller's Now; renew and release match the token (and, for renew, an
//     unexpired expiry) in the WHERE clause.
//   - Promote locks the environment row FOR UPDATE (inserting an "absent"
//     placeholder first, with ON CONFLICT DO NOTHING, so that two first
//     promotions of a new name serialise on the same row), compares the plan
//     id, runs the caller's check inside the transaction and writes the new
//     generation.
//   - Interval writes lock their key row in interval_keys through an upsert,
//     then read, merge and rewrite the ranges of that key. A fenced write
//     first locks its evidence FOR SHARE (the lease row, or the environment
//     row) so a takeover or promotion waits for the write, or the write sees
//     the takeover and fails with state.ErrFenced.
//   - Sources transitions lock the source's row FOR UPDATE, check their
//     compare-and-swap on it and write (sources.go); EnsureSources, which
//     creates rows, also holds an advisory lock.
//   - Reads offered to a promotion's check lock what they return FOR SHARE
//     (interval key rows, environment rows), so nothing the check relied on
//     can change before the promotion commits.
//
// Locks are always taken in the order lease or environment row, then
// interval key rows. A transaction that PostgreSQL still aborts as a
// deadlock (possible when two promotions' checks read each other's
// environments) is retried from the start, check included.
//
// # Schema
//
// The schema is created and upgraded at Open by goose from SQL migrations
// embedded in the binary, under a PostgreSQL advisory lock so that processes
// opening at once migrate once. A database migrated by a newer gapless is
// refused with state.ErrSchemaTooNew. A search_path given in the URL is
// honoured; its first schema is created when it does not exist.
package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gapless-dev/gapless/state"
)

// Store is the PostgreSQL state store. It is safe for concurrent use by many
// goroutines, and any number of Stores in any number of processes may share
// one database.
type Store struct {
	pool     *pgxpool.Pool
	attempts int // 1 + the deadlock retries of WithDeadlockRetries

	// afterFence, set only by tests, runs inside a fenced interval write
	// right after its fence check passed.
	afterFence func()
	// afterSourceRead, set only by tests, runs inside a sources transition
	// right after it read (and locked) the source's row.
	afterSourceRead func()
}

var _ state.Store = (*Store)(nil)

// Option configures Open.
type Option func(*config)

type config struct {
	poolConfig []func(*pgxpool.Config)
	retries    int
}

// WithPoolConfig lets the caller adjust the connection pool's configuration
// (pool size, connection lifetime, tracer...) before it is created. It is
// also applied to the configuration migrations connect with.
func WithPoolConfig(fn func(*pgxpool.Config)) Option {
	return func(c *config) {
		if fn != nil {
			c.poolConfig = append(c.poolConfig, fn)
		}
	}
}

// WithDeadlockRetries sets how many times a transaction aborted by
// PostgreSQL's deadlock detector is retried before its error is returned
// (default 3; n < 0 counts as 0).
func WithDeadlockRetries(n int) Option {
	return func(c *config) { c.retries = max(n, 0) }
}

// Open connects to the PostgreSQL database at url, migrates its schema to the
// newest embedded version, and returns a Store.
//
// It refuses a schema newer than this binary knows with an error wrapping
// state.ErrSchemaTooNew, before changing anything. Several processes may
// Open the same database at once: migrations run under an advisory lock, so
// exactly one of them applies each pending migration and the others wait for
// it.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	cfg := config{retries: 3}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	poolCfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres state: parsing connection URL: %w", err)
	}
	for _, fn := range cfg.poolConfig {
		fn(poolCfg)
	}
	if err := migrate(ctx, poolCfg.ConnConfig); err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return nil, fmt.Errorf("postgres state: creating connection pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres state: connecting: %w", err)
	}
	return &Store{pool: pool, attempts: 1 + cfg.retries}, nil
}

// Close releases the store's connections. It is safe to call more than once.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// SQLSTATE codes of the errors after which a whole transaction is retried.
const (
	sqlstateDeadlock      = "40P01"
	sqlstateSerialization = "40001"
)

// inTx runs fn in a READ COMMITTED transaction, committing when fn returns
// nil and rolling back otherwise, retried as retry says; fn must therefore
// derive everything it writes from what it reads inside the transaction.
func (s *Store) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return s.retry(ctx, func() error {
		return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, fn)
	})
}

// retry runs attempt, a whole transaction, again when PostgreSQL aborted it
// as a deadlock victim (or for a serialization failure), up to the store's
// retry budget. The aborted attempt was rolled back, so running it again
// from the start is safe.
func (s *Store) retry(ctx context.Context, attempt func() error) error {
	var err error
	for range s.attempts {
		err = attempt()
		if !retryable(err) || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// retryable reports whether err aborted a transaction that may succeed when
// run again.
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	return pgErr.Code == sqlstateDeadlock || pgErr.Code == sqlstateSerialization
}

// errNoNow is returned when a time-dependent method is called without Now:
// time is injected, never read from a clock (the server's included). It is
// state.ErrNoNow, so that callers can test for it with errors.Is.
var errNoNow = state.ErrNoNow

// querier is what the read paths need: the pool, or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}
