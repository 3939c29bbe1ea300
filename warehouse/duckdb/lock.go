package duckdb

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"
	"github.com/jonboulle/clockwork"

	"github.com/gapless-dev/gapless/warehouse"
)

// sleep waits for d on clock, or until ctx is done, and returns ctx.Err()
// when ctx is done.
func sleep(ctx context.Context, clock clockwork.Clock, d time.Duration) error {
	t := clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.Chan():
	case <-ctx.Done():
	}
	return ctx.Err()
}

// Backoff between attempts to take the file: it starts small, because the
// usual holder is a gapless command that is about to finish, and doubles up
// to a cap, because a long holder (a scheduler) gains nothing from polling.
const (
	firstBackoff = 10 * time.Millisecond
	maxBackoff   = time.Second
)

// openFile opens the database file at abs, waiting up to opts.LockWait while
// another process holds it, and calling opts.OnWait once the wait has lasted
// WaitNotice. Waiting on an external process is the one place gapless polls;
// the clock is injectable so tests drive it without sleeping.
func openFile(ctx context.Context, abs string, opts Options, init func(driver.ExecerContext) error) (*duckdb.Connector, error) {
	clock := opts.Clock
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	wait := opts.LockWait
	if wait == 0 {
		wait = DefaultLockWait
	}
	start := clock.Now()
	deadline := start.Add(wait)
	backoff := firstBackoff
	noticed := opts.OnWait == nil
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		connector, err := duckdb.NewConnector(abs, init)
		if err == nil {
			return connector, nil
		}
		if !isLockError(err) {
			return nil, err
		}
		now := clock.Now()
		remaining := deadline.Sub(now)
		if remaining <= 0 {
			return nil, lockedError(abs, now.Sub(start), err)
		}
		if waited := now.Sub(start); !noticed && waited >= WaitNotice {
			noticed = true
			opts.OnWait(abs, waited)
		}
		if err := sleep(ctx, clock, min(backoff, remaining)); err != nil {
			return nil, fmt.Errorf("%w (gave up waiting: %w)", lockedError(abs, clock.Now().Sub(start), nil), err)
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

func lockedError(abs string, waited time.Duration, cause error) error {
	msg := fmt.Sprintf("another gapless process (or another DuckDB client) holds %s; waited %s for it to close the file", abs, waited.Round(time.Millisecond))
	if cause == nil {
		return fmt.Errorf("%w: %s", warehouse.ErrLocked, msg)
	}
	return fmt.Errorf("%w: %s: %w", warehouse.ErrLocked, msg, cause)
}

// isLockError recognises DuckDB refusing the file because another process
// holds its lock. DuckDB reports it as an IO error whose message says
// `Could not set lock on file "…": Conflicting lock is held in … (PID n)`.
func isLockError(err error) bool {
	var de *duckdb.Error
	if !errors.As(err, &de) {
		return false
	}
	return de.Type == duckdb.ErrorTypeIO && strings.Contains(de.Msg, "Could not set lock on file")
}
