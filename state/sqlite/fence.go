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

// fenceHolds checks every form f carries: the lease, then the generation.
// st are the statements of q's pool.
func fenceHolds(ctx context.Context, q rowQuerier, st *stmts, f state.Fence, now time.Time) error {
	if f.LeaseKey != "" {
		var one int
		err := q.StmtContext(ctx, st.leaseFence).QueryRowContext(ctx,
			f.LeaseKey, f.LeaseToken, storekit.Micros(now)).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: the token no longer holds lease %q at %s", state.ErrFenced, f.LeaseKey, now.UTC().Format(time.RFC3339Nano))
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
		return fmt.Errorf("%w: environment %q no longer exists (fence expects generation %d)", state.ErrFenced, f.Environment, f.Generation)
	}
	if err != nil {
		return fmt.Errorf("checking environment fence %q: %w", f.Environment, err)
	}
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
