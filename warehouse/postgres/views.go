package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/gapless-dev/gapless/warehouse"
)

// CreateOrReplaceViews points every view of views at its query, in order,
// in one transaction: readers see the old definitions until the commit and
// the new ones after it, never a mix, and on any failure no view changes.
//
// It keeps CreateOrReplaceView's rules, batch-wide:
//
//   - it first takes the advisory lock of every view's name (see lockName),
//     in ascending order of the lock key, so that it takes turns with
//     CreateOrReplaceView and with other batches on any shared view, and two
//     batches never wait for each other in a cycle;
//   - the CREATE OR REPLACE VIEW statements are pipelined (one round trip
//     for the whole batch), each still sent through the extended protocol
//     as exactly one statement, inside a savepoint;
//   - when PostgreSQL refuses one because its columns change, the savepoint
//     is rolled back, the views before it are replaced again, and that view
//     is built beside the old one and swapped in as CreateOrReplaceView
//     does (see swapView); search_path, which the swap empties, is then
//     restored and the rest of the batch goes on the same way.
//
// Every name and query is checked before anything runs. A batch naming one
// view twice is refused. The error names the view whose statement failed.
func (e *Engine) CreateOrReplaceViews(ctx context.Context, views []warehouse.ViewParams) error {
	const op = "create or replace views"
	if len(views) == 0 {
		return nil
	}
	stmts := make([]viewStmt, len(views))
	names := make([]string, len(views))
	seen := make(map[warehouse.Table]int, len(views))
	for i, p := range views {
		obj := p.View.String()
		if err := e.checkQualified(p.View); err != nil {
			return fail(op, obj, "", err)
		}
		q, err := trimQuery(p.Query)
		if err != nil {
			return fail(op, obj, "", err)
		}
		if j, dup := seen[p.View]; dup {
			return fail(op, obj, "", fmt.Errorf("%w: view %s is in the batch twice (positions %d and %d)", warehouse.ErrInvalidArgument, obj, j, i))
		}
		seen[p.View] = i
		stmts[i] = newViewStmt(p.View, q)
		names[i] = quoteTable(p.View)
	}
	failed := -1
	err := e.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockNames(ctx, tx, names); err != nil {
			return err
		}
		var searchPath string
		if err := tx.QueryRow(ctx, searchPathSQL).Scan(&searchPath); err != nil {
			return &stepError{sql: searchPathSQL, err: err}
		}
		for next := 0; next < len(stmts); {
			at, rerr, err := replaceViews(ctx, tx, stmts[next:])
			if err != nil {
				return err
			}
			if rerr == nil {
				return nil
			}
			at += next
			if !isColumnChange(rerr) {
				failed = at
				return &stepError{sql: stmts[at].replaceSQL, err: rerr}
			}
			// The savepoint took back the views before the refused one
			// too: replace them again (they just succeeded), then swap.
			if at > next {
				again, rerr, err := replaceViews(ctx, tx, stmts[next:at])
				if err != nil {
					return err
				}
				if rerr != nil {
					failed = next + again
					return &stepError{sql: stmts[failed].replaceSQL, err: rerr}
				}
			}
			if err := swapView(ctx, tx, stmts[at], rerr); err != nil {
				failed = at
				return err
			}
			if _, err := exec(ctx, tx, restoreSearchPathSQL, searchPath); err != nil {
				return err
			}
			next = at + 1
		}
		return nil
	})
	obj := batchObject(views)
	if failed >= 0 {
		obj = views[failed].View.String()
	}
	return failStep(op, obj, err)
}

const (
	searchPathSQL        = "SELECT pg_catalog.current_setting('search_path')"
	restoreSearchPathSQL = "SELECT pg_catalog.set_config('search_path', $1, true)"
	lockKeysSQL          = `SELECT DISTINCT pg_catalog.hashtext(u.n) AS k FROM pg_catalog.unnest($1::text[]) AS u(n) ORDER BY k`
	lockKeySQL           = "SELECT pg_catalog.pg_advisory_xact_lock($1::int4, $2::int4)"
)

// batchObject names a batch of views in an error that is not about one of
// them (taking the locks, committing).
func batchObject(views []warehouse.ViewParams) string {
	if len(views) == 1 {
		return views[0].View.String()
	}
	return fmt.Sprintf("%s and %d more views", views[0].View, len(views)-1)
}

// lockNames takes, until tx ends, the advisory lock lockName takes for each
// quoted name, in ascending order of the lock key: every transaction that
// holds several of these locks took them in that one order, so none waits
// for another in a cycle. The keys are computed by the server (hashtext),
// exactly as lockName's, and the locks are taken in one pipelined batch.
func lockNames(ctx context.Context, tx pgx.Tx, names []string) error {
	rows, err := tx.Query(ctx, lockKeysSQL, names)
	if err != nil {
		return &stepError{sql: lockKeysSQL, err: err}
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return &stepError{sql: lockKeysSQL, err: err}
	}
	b := &pgx.Batch{}
	for _, k := range keys {
		b.Queue(lockKeySQL, lockClass, k)
	}
	br := tx.SendBatch(ctx, b)
	for range keys {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return &stepError{sql: lockKeySQL, err: err}
		}
	}
	if err := br.Close(); err != nil {
		return &stepError{sql: lockKeySQL, err: err}
	}
	return nil
}

// replaceViews runs the CREATE OR REPLACE VIEW of every stmt, in order, as
// one pipelined batch inside a savepoint of tx. When one fails, the server
// runs none after it, the savepoint is rolled back (so none of stmts has
// taken effect), and at and rerr say which failed and why. err is a failure
// to manage the savepoint itself, after which tx is unusable.
func replaceViews(ctx context.Context, tx pgx.Tx, stmts []viewStmt) (at int, rerr, err error) {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return 0, nil, err
	}
	b := &pgx.Batch{}
	for _, s := range stmts {
		b.Queue(s.replaceSQL)
	}
	br := sp.SendBatch(ctx, b)
	at = -1
	for i := range stmts {
		if _, err := br.Exec(); err != nil {
			at, rerr = i, err
			break
		}
	}
	if cerr := br.Close(); cerr != nil && rerr == nil {
		at, rerr = len(stmts)-1, cerr
	}
	if rerr == nil {
		return 0, nil, sp.Commit(ctx)
	}
	// A statement refused while pgx prepared the batch (a syntax error, a
	// second statement) is reported on the first result; its SQL says which.
	var pre pgx.ErrPreprocessingBatch
	if errors.As(rerr, &pre) {
		for i, s := range stmts {
			if s.replaceSQL == pre.SQL() {
				at = i
				break
			}
		}
	}
	if err := sp.Rollback(ctx); err != nil {
		return 0, nil, errors.Join(rerr, fmt.Errorf("rolling back to the savepoint: %w", err))
	}
	return at, rerr, nil
}
