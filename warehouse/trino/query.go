package trino

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	trinoclient "github.com/trinodb/trino-go-client/trino"

	"github.com/gapless-dev/gapless/warehouse"
)

// Query runs sql as one statement, with args bound, and returns every row.
// A trailing semicolon or comment is cut first (Trino refuses them);
// PostgreSQL-style $1 parameters are accepted beside the client's ?
// placeholders. time.Time arguments are bound as their UTC wall-clock
// time (a TIMESTAMP, which Trino compares with a timestamp with time zone
// in the session's zone, UTC). Named arguments are refused: the client
// would read them as HTTP headers (a user, a role).
//
// Values come back as plain Go values:
//
//	tinyint, smallint, integer, bigint     int64
//	real, double                           float64
//	decimal                                string, the exact decimal ("12.50")
//	varchar, char, uuid, json, intervals   string
//	boolean                                bool
//	date, timestamp                        time.Time in UTC (a timestamp is its
//	                                       wall clock read as UTC; a date is its
//	                                       midnight UTC)
//	timestamp with time zone               time.Time in UTC (the same instant)
//	varbinary                              []byte
//	arrays, maps, rows                     as the client decodes them
//
// Result.Types are Trino's type names, upper case, without parameters
// (BIGINT, VARCHAR, DECIMAL, TIMESTAMP, TIMESTAMP WITH TIME ZONE, DATE, ...).
func (e *Engine) Query(ctx context.Context, sql string, args ...any) (*warehouse.Result, error) {
	const op = "query"
	if err := e.begin(ctx); err != nil {
		return nil, fail(op, e.object, sql, err)
	}
	stmt, bound, err := prepare(sql, args)
	if err != nil {
		return nil, fail(op, e.object, sql, err)
	}
	rows, err := e.db.QueryContext(ctx, stmt, bound...)
	if err != nil {
		return nil, fail(op, e.object, sql, serverError(err))
	}
	res, err := readResult(rows)
	if err != nil {
		return nil, fail(op, e.object, sql, serverError(err))
	}
	return res, nil
}

// prepare trims sql, rewrites $n parameters and converts args to what the
// client binds.
func prepare(sql string, args []any) (string, []any, error) {
	q, err := trimQuery(sql)
	if err != nil {
		return "", nil, err
	}
	q, args, err = rewriteParams(q, args)
	if err != nil {
		return "", nil, err
	}
	bound := make([]any, len(args))
	for i, a := range args {
		b, err := bindValue(a)
		if err != nil {
			return "", nil, fmt.Errorf("%w: argument %d: %w", warehouse.ErrInvalidArgument, i+1, err)
		}
		bound[i] = b
	}
	return q, bound, nil
}

// bindValue converts one argument to a value the client renders.
func bindValue(a any) (any, error) {
	switch x := a.(type) {
	case sql.NamedArg:
		return nil, fmt.Errorf("named arguments (%s) are refused: the client reads them as HTTP headers", x.Name)
	case time.Time:
		u := x.UTC()
		return trinoclient.Timestamp(u.Year(), u.Month(), u.Day(), u.Hour(), u.Minute(), u.Second(), u.Nanosecond()), nil
	case uint8:
		return int64(x), nil
	}
	return a, nil
}

// readResult reads and closes rows, normalising values (see Query).
func readResult(rows *sql.Rows) (*warehouse.Result, error) {
	defer rows.Close()
	cts, err := rows.ColumnTypes()
	if err != nil {
		return nil, err
	}
	res := &warehouse.Result{Columns: make([]string, len(cts)), Types: make([]string, len(cts)), Rows: [][]any{}}
	for i, ct := range cts {
		res.Columns[i] = ct.Name()
		res.Types[i] = ct.DatabaseTypeName()
	}
	for rows.Next() {
		vals := make([]any, len(cts))
		ptrs := make([]any, len(cts))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		for i, v := range vals {
			vals[i] = normalize(v)
		}
		res.Rows = append(res.Rows, vals)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return res, nil
}

// normalize maps the client's values onto the types Query documents.
func normalize(v any) any {
	switch x := v.(type) {
	case time.Time:
		return x.UTC()
	case int32:
		return int64(x)
	case float32:
		return float64(x)
	}
	return v
}

// ReadOnlyQuery runs sql only if it is a read (see warehouse.Engine).
//
// Invariant: nothing sql does outlives the call. It is refused up front,
// with warehouse.ErrNotARead, unless it is exactly one statement that
// starts (after opening parentheses) with SELECT, VALUES, TABLE, SHOW,
// DESCRIBE, WITH ... followed by a query, or EXPLAIN (EXPLAIN ANALYZE runs
// its statement, which must then be a read too): Trino runs SET SESSION,
// USE, PREPARE, COMMIT and DROP CATALOG even in a read-only transaction,
// so those never reach it. What passes runs in a READ ONLY transaction
// that is always rolled back, where Trino itself refuses any write ("Cannot
// execute write in a read-only transaction"), also one hidden inside a
// read; that refusal is ErrNotARead too.
func (e *Engine) ReadOnlyQuery(ctx context.Context, sql string, args ...any) (*warehouse.Result, error) {
	const op = "read-only query"
	if err := e.begin(ctx); err != nil {
		return nil, fail(op, e.object, sql, err)
	}
	stmt, bound, err := prepare(sql, args)
	if err != nil {
		return nil, fail(op, e.object, sql, err)
	}
	if err := checkRead(stmt); err != nil {
		return nil, fail(op, e.object, sql, err)
	}
	res, err := e.readOnly(ctx, stmt, bound)
	if err != nil {
		return nil, fail(op, e.object, sql, err)
	}
	return res, nil
}

func (e *Engine) readOnly(ctx context.Context, stmt string, bound []any) (res *warehouse.Result, err error) {
	tx, err := e.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, serverError(err)
	}
	defer func() {
		if rerr := tx.Rollback(); rerr != nil && !errors.Is(rerr, sql.ErrTxDone) {
			err = errors.Join(err, fmt.Errorf("rolling back the read-only transaction: %w", rerr))
			res = nil
		}
	}()
	rows, err := tx.QueryContext(ctx, stmt, bound...)
	if err != nil {
		return nil, notARead(err)
	}
	res, err = readResult(rows)
	if err != nil {
		return nil, notARead(err)
	}
	return res, nil
}

// notARead wraps warehouse.ErrNotARead around Trino's refusal of a write
// in a read-only transaction.
func notARead(err error) error {
	err = serverError(err)
	if errorName(err) == "READ_ONLY_VIOLATION" || strings.Contains(errorMessage(err), "read-only transaction") {
		return fmt.Errorf("%w: it writes: %w", warehouse.ErrNotARead, err)
	}
	return err
}
