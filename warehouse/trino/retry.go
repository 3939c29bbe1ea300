package trino

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/gapless-dev/gapless/internal/logkey"
)

// retryPolicy bounds the retries of a statement whose Iceberg commit was
// refused because another writer committed first.
type retryPolicy struct {
	attempts   int           // statements sent at most, the first included
	base, most time.Duration // the first wait, doubled each time up to most
}

// defaultRetry waits about 0.1, 0.2, 0.4, ... 3.2 s between eight attempts:
// a writer of another process that holds the table for a few seconds is
// outlasted, and a commit that keeps failing fails within half a minute.
var defaultRetry = retryPolicy{attempts: 8, base: 100 * time.Millisecond, most: 3200 * time.Millisecond}

// Commit conflicts, as Trino 476 reports them: the error name
// ICEBERG_COMMIT_ERROR, with messages such as
//
//	Failed to commit the transaction during write: Found new conflicting delete files that can apply to records matching (ref(name="ts") >= ... and ref(name="ts") < ...): [file:///.../data/...parquet]
//	Failed to commit during write: Found new conflicting delete files that can apply to records matching ...
//
// (two MERGEs of one table whose commits overlapped). The same name also
// covers "Failed to create table s.t: Table already exists", which is not
// a conflict to wait out but an object in the way: callers that can meet
// it decide themselves (see ReplaceTable).
const errIcebergCommit = "ICEBERG_COMMIT_ERROR"

// isCommitConflict reports whether err is a commit another writer's
// commit refused, which running the same statement again may get past.
func isCommitConflict(err error) bool {
	switch errorName(err) {
	case errIcebergCommit:
		return !strings.Contains(errorMessage(err), "already exists")
	case "TRANSACTION_CONFLICT":
		return true
	}
	return false
}

// withRetry runs attempt until it succeeds, fails with an error retryable does
// not accept, the context ends, or the policy's attempts are spent; it
// waits with exponential backoff (and jitter, so that writers that
// collided do not collide again) between attempts. what names the object
// in the log.
func (e *Engine) withRetry(ctx context.Context, what string, retryable func(error) bool, attempt func() error) error {
	p := e.retry
	wait := p.base
	for n := 1; ; n++ {
		err := attempt()
		if err == nil || n >= p.attempts || !retryable(err) || ctx.Err() != nil {
			return err
		}
		e.retried.Add(1)
		d := wait/2 + rand.N(wait/2+1)
		slog.Info("trino: the commit was refused by a concurrent writer; retrying",
			logkey.Table, what, logkey.Attempt, n, logkey.Error, errorMessage(err), logkey.DurationMS, d.Milliseconds())
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
		wait = min(2*wait, p.most)
	}
}
