package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gapless-dev/gapless/warehouse"
)

// SQLSTATEs ReadOnlyQuery reads as "not a read".
const (
	sqlstateReadOnly    = "25006" // read_only_sql_transaction
	sqlstateSyntaxError = "42601" // syntax_error, also for several statements
)

// ReadOnlyQuery runs sql only if it is a read (see warehouse.Engine).
//
// Invariant: nothing sql does outlives the call. It runs in a READ ONLY
// transaction that is always rolled back, so PostgreSQL itself refuses
// every write, also one hidden in a read (a data-modifying CTE, SELECT
// ... INTO, EXPLAIN ANALYZE of a DELETE, a function that writes). Before
// it runs, the server parses and describes it as exactly one statement
// (several are refused), and a statement that returns no rows is refused:
// that is how the utility statements a read-only transaction still allows
// (COPY ... TO a file or a program, SET, LOCK, LISTEN, DO, CALL without
// results, transaction control) are kept out. Reads return rows: SELECT,
// WITH ... SELECT, VALUES, TABLE, SHOW, EXPLAIN.
func (e *Engine) ReadOnlyQuery(ctx context.Context, sql string, args ...any) (*warehouse.Result, error) {
	const op = "read-only query"
	bound, err := bindArgs(args)
	if err != nil {
		return nil, fail(op, e.object, sql, err)
	}
	tx, err := e.pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fail(op, e.object, sql, err)
	}
	res, qerr := readOnly(ctx, tx, sql, bound)
	// A failed rollback closes the connection, which ends the transaction
	// on the server just the same.
	if err := tx.Rollback(context.WithoutCancel(ctx)); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		qerr = errors.Join(qerr, fmt.Errorf("rolling back the read-only transaction: %w", err))
	}
	if qerr != nil {
		return nil, fail(op, e.object, sql, qerr)
	}
	return res, nil
}

// readOnly describes sql on tx, refuses it unless it returns rows, and
// reads them.
func readOnly(ctx context.Context, tx pgx.Tx, sql string, bound []any) (*warehouse.Result, error) {
	sd, err := tx.Conn().PgConn().Prepare(ctx, "", sql, nil)
	if err != nil {
		return nil, notARead(err)
	}
	if len(sd.Fields) == 0 {
		return nil, fmt.Errorf("%w: %s returns no rows", warehouse.ErrNotARead, warehouse.LeadingWord(sql))
	}
	rows, err := tx.Query(ctx, sql, bound...)
	if err != nil {
		return nil, notARead(err)
	}
	res, err := readResult(rows)
	if err != nil {
		return nil, notARead(err)
	}
	return res, nil
}

// notARead wraps warehouse.ErrNotARead around the server's refusals that
// mean "not a read": a write in the read-only transaction, and several
// statements in one string.
func notARead(err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return err
	}
	switch {
	case pe.Code == sqlstateReadOnly:
		return fmt.Errorf("%w: it writes: %w", warehouse.ErrNotARead, err)
	case pe.Code == sqlstateSyntaxError && strings.Contains(pe.Message, "multiple commands"):
		return fmt.Errorf("%w: the SQL holds more than one statement: %w", warehouse.ErrNotARead, err)
	}
	return err
}
