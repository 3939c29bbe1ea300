package duckdb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/gapless-dev/gapless/warehouse"
)

// errMultipleStatements is returned when a statement the engine was about
// to run holds more than one statement (a model query that closes the
// subquery it is embedded in and starts another).
var errMultipleStatements = errors.New("the SQL holds more than one statement; a model query must be exactly one query")

// stmtError carries the SQL of a failed statement up to the method, which
// reports it in a *warehouse.Error. It is transparent: its message and its
// chain are the cause's.
type stmtError struct {
	sql string
	err error
}

func (e *stmtError) Error() string { return e.err.Error() }
func (e *stmtError) Unwrap() error { return e.err }

// fail wraps err as the *warehouse.Error of op on object, lifting the SQL of
// the failed statement out of the chain.
func fail(op, object string, err error) error {
	if err == nil {
		return nil
	}
	var se *stmtError
	sqlText := ""
	if errors.As(err, &se) {
		sqlText = se.sql
	}
	return &warehouse.Error{Op: op, Object: object, SQL: sqlText, Err: err}
}

// session is one connection of the pool. Every statement it runs is
// prepared through the driver's single-statement Prepare, which refuses a
// string holding several statements, instead of database/sql's path, which
// would run all of them.
type session struct {
	c *sql.Conn
}

func (e *Engine) session(ctx context.Context) (*session, error) {
	c, err := e.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	return &session{c: c}, nil
}

func (s *session) close() { _ = s.c.Close() }

// discard closes the underlying connection instead of returning it to the
// pool: used when it may still be inside a transaction.
func (s *session) discard() {
	_ = s.c.Raw(func(any) error { return driver.ErrBadConn })
}

// withStmt prepares query as exactly one statement and hands it, with args
// converted as database/sql would, to fn.
func (s *session) withStmt(ctx context.Context, query string, args []any, fn func(st driver.Stmt, conn *duckdb.Conn, named []driver.NamedValue) error) error {
	if err := ctx.Err(); err != nil {
		return &stmtError{sql: query, err: err}
	}
	err := s.c.Raw(func(dc any) error {
		conn, ok := dc.(*duckdb.Conn)
		if !ok {
			return fmt.Errorf("unexpected driver connection %T", dc)
		}
		st, err := conn.Prepare(query)
		if err != nil {
			if strings.Contains(err.Error(), "multi-statement") {
				return errMultipleStatements
			}
			return err
		}
		defer st.Close() //nolint:errcheck // a prepared statement that only ran: its close error loses nothing
		if n := st.NumInput(); n != len(args) {
			return fmt.Errorf("statement takes %d parameters, got %d", n, len(args))
		}
		named, err := namedArgs(conn, args)
		if err != nil {
			return err
		}
		return fn(st, conn, named)
	})
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
			// DuckDB reports an interrupted statement in its own words;
			// keep the cancellation visible to errors.Is.
			err = fmt.Errorf("%w: %w", ctxErr, err)
		}
		return &stmtError{sql: query, err: err}
	}
	return nil
}

// namedArgs converts args the way database/sql does: the driver's own
// checker first, then the default converter (driver.Valuer, named kinds).
func namedArgs(conn *duckdb.Conn, args []any) ([]driver.NamedValue, error) {
	named := make([]driver.NamedValue, len(args))
	for i, a := range args {
		nv := driver.NamedValue{Ordinal: i + 1, Value: a}
		if err := conn.CheckNamedValue(&nv); err != nil {
			if !errors.Is(err, driver.ErrSkip) {
				return nil, fmt.Errorf("parameter $%d: %w", i+1, err)
			}
			v, err := driver.DefaultParameterConverter.ConvertValue(a)
			if err != nil {
				return nil, fmt.Errorf("parameter $%d: %w", i+1, err)
			}
			nv.Value = v
		}
		named[i] = nv
	}
	return named, nil
}

// exec runs one statement and returns the rows it affected.
func (s *session) exec(ctx context.Context, query string, args ...any) (int64, error) {
	var n int64
	err := s.withStmt(ctx, query, args, func(st driver.Stmt, conn *duckdb.Conn, named []driver.NamedValue) error {
		sc, ok := st.(driver.StmtExecContext)
		if !ok {
			return fmt.Errorf("driver statement %T cannot execute with a context", st)
		}
		res, err := sc.ExecContext(ctx, named)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}

// execBatches prepares query once and runs it with each of batches as its
// arguments, returning the total of rows affected.
func (s *session) execBatches(ctx context.Context, query string, batches [][]any) (int64, error) {
	if len(batches) == 0 {
		return 0, nil
	}
	var total int64
	err := s.withStmt(ctx, query, batches[0], func(st driver.Stmt, conn *duckdb.Conn, named []driver.NamedValue) error {
		sc, ok := st.(driver.StmtExecContext)
		if !ok {
			return fmt.Errorf("driver statement %T cannot execute with a context", st)
		}
		for i, args := range batches {
			if i > 0 {
				if len(args) != len(batches[0]) {
					return fmt.Errorf("batch %d has %d arguments, the first %d", i, len(args), len(batches[0]))
				}
				var err error
				if named, err = namedArgs(conn, args); err != nil {
					return err
				}
			}
			res, err := sc.ExecContext(ctx, named)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			total += n
		}
		return nil
	})
	return total, err
}

// findsRows runs one query and reports whether it returns a row, reading
// at most one.
func (s *session) findsRows(ctx context.Context, query string, args ...any) (bool, error) {
	found := false
	err := s.withStmt(ctx, query, args, func(st driver.Stmt, conn *duckdb.Conn, named []driver.NamedValue) error {
		sq, ok := st.(driver.StmtQueryContext)
		if !ok {
			return fmt.Errorf("driver statement %T cannot query with a context", st)
		}
		rows, err := sq.QueryContext(ctx, named)
		if err != nil {
			return err
		}
		dest := make([]driver.Value, len(rows.Columns()))
		err = rows.Next(dest)
		found = err == nil
		if errors.Is(err, io.EOF) {
			err = nil
		}
		return errors.Join(err, rows.Close())
	})
	return found, err
}

// query runs one statement and reads every row.
func (s *session) query(ctx context.Context, query string, args ...any) (*warehouse.Result, error) {
	return s.queryGuarded(ctx, query, nil, args...)
}

// queryGuarded is query with a guard: when guard is not nil, it is given
// the prepared statement's type before the statement runs, and the release
// function it returns is called once the rows are read (or the statement
// failed). A guard's error stops the statement before it runs.
func (s *session) queryGuarded(ctx context.Context, query string, guard func(duckdb.StmtType) (func(), error), args ...any) (*warehouse.Result, error) {
	res := &warehouse.Result{Rows: [][]any{}}
	err := s.withStmt(ctx, query, args, func(st driver.Stmt, conn *duckdb.Conn, named []driver.NamedValue) error {
		sq, ok := st.(driver.StmtQueryContext)
		if !ok {
			return fmt.Errorf("driver statement %T cannot query with a context", st)
		}
		if guard != nil {
			ds, ok := st.(*duckdb.Stmt)
			if !ok {
				return fmt.Errorf("unexpected driver statement %T", st)
			}
			typ, err := ds.StatementType()
			if err != nil {
				return err
			}
			release, err := guard(typ)
			if err != nil {
				return err
			}
			defer release()
		}
		rows, err := sq.QueryContext(ctx, named)
		if err != nil {
			return err
		}
		res.Columns = rows.Columns()
		res.Types = columnTypes(rows, len(res.Columns))
		readErr := readRows(rows, res)
		closeErr := rows.Close()
		return errors.Join(readErr, closeErr)
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// columnTypes is the database type name of each of n columns of rows,
// upper case ("" when the driver does not say).
func columnTypes(rows driver.Rows, n int) []string {
	out := make([]string, n)
	if tn, ok := rows.(driver.RowsColumnTypeDatabaseTypeName); ok {
		for i := range out {
			out[i] = strings.ToUpper(tn.ColumnTypeDatabaseTypeName(i))
		}
	}
	return out
}

func readRows(rows driver.Rows, res *warehouse.Result) error {
	for {
		dest := make([]driver.Value, len(res.Columns))
		err := rows.Next(dest)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		row := make([]any, len(dest))
		for i, v := range dest {
			if b, ok := v.([]byte); ok {
				v = append([]byte(nil), b...)
			}
			row[i] = v
		}
		res.Rows = append(res.Rows, row)
	}
}

// inTx runs fn inside one transaction on s: it commits when fn succeeds and
// rolls back otherwise, so that fn's statements take effect all together or
// not at all. When the outcome is uncertain (a failed rollback or commit)
// the connection is discarded, which makes DuckDB roll back whatever is
// still open.
func (s *session) inTx(ctx context.Context, fn func() error) error {
	if _, err := s.exec(ctx, "BEGIN TRANSACTION"); err != nil {
		return err
	}
	if err := fn(); err != nil {
		if _, rbErr := s.exec(context.WithoutCancel(ctx), "ROLLBACK"); rbErr != nil {
			s.discard()
			return errors.Join(err, fmt.Errorf("rolling back: %w", rbErr))
		}
		return err
	}
	if _, err := s.exec(ctx, "COMMIT"); err != nil {
		if _, rbErr := s.exec(context.WithoutCancel(ctx), "ROLLBACK"); rbErr != nil {
			s.discard()
		}
		return err
	}
	return nil
}

// write runs fn on a session while holding the database's write lock.
func (e *Engine) write(ctx context.Context, fn func(s *session) error) error {
	if err := e.shared.lock(ctx); err != nil {
		return err
	}
	defer e.shared.unlock()
	s, err := e.session(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	return fn(s)
}

// read runs fn on a session without the write lock.
func (e *Engine) read(ctx context.Context, fn func(s *session) error) error {
	s, err := e.session(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	return fn(s)
}
