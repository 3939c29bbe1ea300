package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/internal/storekit"
)

// checkFence verifies, inside the caller's write transaction, that the
// writer still holds the evidence its fence names: the lease token still
// holds the lease, unexpired at now, or the environment is still at the
// generation. It fails wrapping state.ErrFenced otherwise. The shape was
// checked by validFence; st are the statements of tx's pool.
func (s *Store) checkFence(ctx context.Context, tx *sql.Tx, st *stmts, f *state.Fence, now time.Time) error {
	if f == nil {
		return nil
	}
	return fenceHolds(ctx, tx, st, *f, now)
}

// rowQuerier is a *sql.Tx or a *sql.DB.
type rowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	StmtContext(ctx context.Context, stmt *sql.Stmt) *sql.Stmt
}

type dbStmt struct{ *sql.DB }

func (d dbStmt) StmtContext(_ context.Context, stmt *sql.Stmt) *sql.Stmt { return stmt }

// CheckFence reports whether f's evidence still holds at now, without
// writing (see state.Store.CheckFence).
func (s *Store) CheckFence(ctx context.Context, f state.Fence, now time.Time) error {
	if err := storekit.ValidateFence(f, now); err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	if err := fenceHolds(ctx, dbStmt{s.db}, s.stmts, f, now); err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	return nil
}

// fenceBothQuery reads, in one statement, whether the token ?2 holds the
// lease ?1 unexpired at ?3, and the generation of environment ?4 (NULL when
// it does not exist): the fence of a scheduler's batch carries both.
const fenceBothQuery = `SELECT
	EXISTS (SELECT 1 FROM leases WHERE key = ?1 AND token = ?2 AND expires_at_us > ?3),
	(SELECT generation FROM environments WHERE name = ?4)`

// fenceHolds checks every form f carries: the lease, then the generation,
// then the source's serving generation. st are the statements of q's pool.
func fenceHolds(ctx context.Context, q rowQuerier, st *stmts, f state.Fence, now time.Time) error {
	if err := leaseAndEnvironmentHold(ctx, q, st, f, now); err != nil {
		return err
	}
	return sourceHolds(ctx, q, f)
}

// sourceHolds checks the source form of f: the source is defined and
// serves f.SourceGeneration.
func sourceHolds(ctx context.Context, q rowQuerier, f state.Fence) error {
	if f.Source == "" {
		return nil
	}
	var serving int64
	err := q.QueryRowContext(ctx, `SELECT serving_generation FROM sources WHERE name = ? AND removed_at_us = 0`, f.Source).Scan(&serving)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w: source %q is not defined (fence expects it to serve generation %d)", state.ErrFenced, f.Source, f.SourceGeneration)
	}
	if err != nil {
		return fmt.Errorf("checking source fence %q: %w", f.Source, err)
	}
	if serving != f.SourceGeneration {
		return fmt.Errorf("%w: source %q serves generation %d, the fence expects %d", state.ErrFenced, f.Source, serving, f.SourceGeneration)
	}
	return nil
}

// leaseAndEnvironmentHold checks the lease and environment forms of f.
func leaseAndEnvironmentHold(ctx context.Context, q rowQuerier, st *stmts, f state.Fence, now time.Time) error {
	if f.LeaseKey != "" && f.Environment != "" {
		var (
			held bool
			gen  sql.NullInt64
		)
		if err := q.StmtContext(ctx, st.fenceBoth).QueryRowContext(ctx,
			f.LeaseKey, f.LeaseToken, storekit.Micros(now), f.Environment).Scan(&held, &gen); err != nil {
			return fmt.Errorf("checking lease fence %q and environment fence %q: %w", f.LeaseKey, f.Environment, err)
		}
		if !held {
			return leaseFenced(f, now)
		}
		if !gen.Valid {
			return environmentGone(f)
		}
		return generationHolds(f, gen.Int64)
	}
	if f.LeaseKey != "" {
		var one int
		err := q.StmtContext(ctx, st.leaseFence).QueryRowContext(ctx,
			f.LeaseKey, f.LeaseToken, storekit.Micros(now)).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return leaseFenced(f, now)
		}
		if err != nil {
			return fmt.Errorf("checking lease fence %q: %w", f.LeaseKey, err)
		}
	}
	if f.Environment == "" {
		return nil
	}
	var (
		gen         int64
		invalidated int64 // read by the shared statement; the fence pins the generation alone
	)
	err := q.StmtContext(ctx, st.generation).QueryRowContext(ctx, f.Environment).Scan(&gen, &invalidated)
	if errors.Is(err, sql.ErrNoRows) {
		return environmentGone(f)
	}
	if err != nil {
		return fmt.Errorf("checking environment fence %q: %w", f.Environment, err)
	}
	return generationHolds(f, gen)
}

// leaseFenced is the error of a fence whose token no longer holds its lease.
func leaseFenced(f state.Fence, now time.Time) error {
	return fmt.Errorf("%w: the token no longer holds lease %q at %s", state.ErrFenced, f.LeaseKey, now.UTC().Format(time.RFC3339Nano))
}

// environmentGone is the error of a fence whose environment no longer exists.
func environmentGone(f state.Fence) error {
	return fmt.Errorf("%w: environment %q no longer exists (fence expects generation %d)", state.ErrFenced, f.Environment, f.Generation)
}

// generationHolds checks the generation gen read for f's environment.
func generationHolds(f state.Fence, gen int64) error {
	if gen != f.Generation {
		return fmt.Errorf("%w: environment %q is at generation %d, the fence expects %d", state.ErrFenced, f.Environment, gen, f.Generation)
	}
	return nil
}

// validFence checks an optional fence's shape (storekit.ValidateFence); a nil
// fence is an unfenced write.
func validFence(f *state.Fence, now time.Time) error {
	if f == nil {
		return nil
	}
	return storekit.ValidateFence(*f, now)
}
