package duckdb

import (
	"context"
	"crypto/rand"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strings"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/gapless-dev/gapless/warehouse"
)

// InsertInterval replaces the rows of [p.Start, p.End) in p.TimeColumn of
// p.Table with the rows of p.Query in that range, atomically:
//
//	DELETE FROM t WHERE tc >= $start AND tc < $end;
//	INSERT INTO t (c1, c2, …) SELECT q.c1, q.c2, … FROM (query) AS q
//	  WHERE q.tc >= $start AND q.tc < $end;
//
// in one transaction when the range holds rows, and the INSERT alone, as a
// statement of its own (its own transaction), when it holds none. A
// backfill's batches mostly fill empty ranges, and on a database file an
// explicit BEGIN … COMMIT around a DELETE that finds nothing costs about as
// much again as the batch's INSERT on its own (BenchmarkSmallBatch: 1.8 to
// 2.4 times the INSERT alone, against 1.0 to 1.2 with the question
// first). The outcome is the same either way: the range is held (see
// writeLock) from the question to the commit, so no other write of the
// engine's can put rows into it in between, and no other process can hold
// the file.
//
// The column list is the table's (cached per table, see the package
// comment), so the query's columns are matched by name whatever their order; the query must produce every column of the
// table, and any other column it produces is ignored. Rows of the query
// outside the range, or with a NULL time, are not inserted; rows of the
// table outside the range are not touched. If anything fails, nothing is
// changed: the interval keeps its previous rows. Start must be
// before End; both are bound as UTC instants. With p.Text the text bounds
// are bound instead (a VARCHAR compares byte by byte). It returns the
// number of rows inserted.
func (e *Engine) InsertInterval(ctx context.Context, p warehouse.InsertIntervalParams) (int64, error) {
	const op = "insert interval"
	object := p.Table.String()
	if err := checkTable(p.Table); err != nil {
		return 0, fail(op, object, err)
	}
	if err := checkIdent("time column", p.TimeColumn); err != nil {
		return 0, fail(op, object, err)
	}
	if err := checkSQL("query", p.Query); err != nil {
		return 0, fail(op, object, err)
	}
	if !p.Start.Before(p.End) {
		return 0, fail(op, object, invalidf("interval [%s, %s) is empty: start must be before end", p.Start.UTC().Format("2006-01-02T15:04:05Z07:00"), p.End.UTC().Format("2006-01-02T15:04:05Z07:00")))
	}
	start, end := p.Start.UTC(), p.End.UTC()
	var lo, hi any = start, end
	if p.Text != nil {
		if p.Text.Start >= p.Text.End {
			return 0, fail(op, object, invalidf("text bounds [%q, %q) are empty: start must be before end", p.Text.Start, p.Text.End))
		}
		// VARCHAR compares byte by byte (DuckDB's default collation).
		lo, hi = p.Text.Start, p.Text.End
	}
	var inserted int64
	err := e.writeRangeColumns(ctx, p.Table, start, end, func(s *session, cols []warehouse.Column, inTx func(func() error) error) error {
		if !hasColumn(cols, p.TimeColumn) {
			return invalidf("time column %q is not a column of %s", p.TimeColumn, p.Table)
		}
		tc := quoteIdent(p.TimeColumn)
		inRange := " WHERE " + tc + " >= $1 AND " + tc + " < $2"
		ins := "INSERT INTO " + quoteTable(p.Table) + " (" + columnList("", cols) + ")\nSELECT " +
			columnList("gapless_q", cols) + " FROM (\n" + body(p.Query) + "\n) AS gapless_q\nWHERE gapless_q." +
			tc + " >= $1 AND gapless_q." + tc + " < $2"
		occupied, err := s.findsRows(ctx, "SELECT 1 FROM "+quoteTable(p.Table)+inRange+" LIMIT 1", lo, hi)
		if err != nil {
			return err
		}
		if !occupied {
			inserted, err = s.exec(ctx, ins, lo, hi)
			return err
		}
		return inTx(func() error {
			if _, err := s.exec(ctx, "DELETE FROM "+quoteTable(p.Table)+inRange, lo, hi); err != nil {
				return err
			}
			var err error
			inserted, err = s.exec(ctx, ins, lo, hi)
			return err
		})
	})
	if err != nil {
		return 0, fail(op, object, err)
	}
	return inserted, nil
}

// MergeByKey upserts p.Query's rows into p.Table by p.Key, in one
// transaction: the query's rows are materialised once in a temporary table,
// the table's rows whose key matches one of them are deleted, and they are
// inserted. Running it twice with the same rows changes nothing the second
// time. Keys are compared with IS NOT DISTINCT FROM, so a NULL key matches
// a NULL key. A query that returns one key twice is an error and changes
// nothing: either copy winning would be arbitrary. Columns are matched by
// name as in InsertInterval; no unique constraint is needed. It returns the
// number of rows inserted or updated.
//
// Not INSERT … ON CONFLICT, which needs a unique constraint, and not
// DuckDB 1.5's MERGE INTO, which given one key twice silently applies one
// of the two rows.
func (e *Engine) MergeByKey(ctx context.Context, p warehouse.MergeParams) (int64, error) {
	const op = "merge by key"
	object := p.Table.String()
	if err := checkTable(p.Table); err != nil {
		return 0, fail(op, object, err)
	}
	if len(p.Key) == 0 {
		return 0, fail(op, object, invalidf("a merge needs at least one key column"))
	}
	for _, k := range p.Key {
		if err := checkIdent("key column", k); err != nil {
			return 0, fail(op, object, err)
		}
	}
	if err := checkSQL("query", p.Query); err != nil {
		return 0, fail(op, object, err)
	}
	tmp, err := tempName("gapless_merge_")
	if err != nil {
		return 0, fail(op, object, err)
	}
	src := "temp.main." + quoteIdent(tmp)
	var merged int64
	err = e.writeColumns(ctx, p.Table, func(s *session, cols []warehouse.Column) error {
		for _, k := range p.Key {
			if !hasColumn(cols, k) {
				return invalidf("key column %q is not a column of %s", k, p.Table)
			}
		}
		create := "CREATE TEMP TABLE " + quoteIdent(tmp) + " AS SELECT " + columnList("gapless_q", cols) +
			" FROM (\n" + body(p.Query) + "\n) AS gapless_q"
		if _, err := s.exec(ctx, create); err != nil {
			return err
		}
		keys := make([]warehouse.Column, len(p.Key))
		match := make([]string, len(p.Key))
		for i, k := range p.Key {
			keys[i] = warehouse.Column{Name: k}
			match[i] = "gapless_t." + quoteIdent(k) + " IS NOT DISTINCT FROM gapless_s." + quoteIdent(k)
		}
		dup := "SELECT " + columnList("", keys) + ", count(*) FROM " + src + " GROUP BY ALL HAVING count(*) > 1 LIMIT 1"
		res, err := s.query(ctx, dup)
		if err != nil {
			return err
		}
		if len(res.Rows) > 0 {
			row := res.Rows[0]
			return &stmtError{sql: dup, err: refusef(warehouse.ErrDuplicateKey, "the query returns key (%s) = %v %v times; a merge key must be unique",
				strings.Join(p.Key, ", "), row[:len(p.Key)], row[len(p.Key)])}
		}
		del := "DELETE FROM " + quoteTable(p.Table) + " AS gapless_t USING " + src + " AS gapless_s WHERE " +
			strings.Join(match, " AND ")
		if _, err := s.exec(ctx, del); err != nil {
			return err
		}
		ins := "INSERT INTO " + quoteTable(p.Table) + " (" + columnList("", cols) + ") SELECT " +
			columnList("", cols) + " FROM " + src
		if merged, err = s.exec(ctx, ins); err != nil {
			return err
		}
		_, err = s.exec(ctx, "DROP TABLE "+src)
		return err
	})
	if err != nil {
		return 0, fail(op, object, err)
	}
	return merged, nil
}

// ReplaceTable rebuilds p.Table from p.Query beside it and swaps it in, all
// in one transaction:
//
//	CREATE TABLE s."t__gapless_swap_<random>" AS query;
//	DROP TABLE IF EXISTS s.t;
//	ALTER TABLE s."t__gapless_swap_<random>" RENAME TO t;
//
// The table takes the query's columns. Readers see the old table until the
// commit and the new one after it, never neither. If anything fails (the
// query erring halfway, say), the transaction is rolled back: the old
// table serves on, intact, and no temporary table is left, not even after a
// crash, since it was never committed. Views over the table keep working:
// DuckDB binds a view's names when the view is queried. A missing table is
// created; a view of that name is an error, and stays.
//
// With p.FirstBuild, a table that is empty and has exactly the query's
// columns (DESCRIBE of both agree: names, types, order, nullability) gets
// the query's rows appended instead, in one statement (its own
// transaction), under the same write lock: readers see it empty until
// the commit and full after it, what the swap would show, at about half
// its cost on a database file (one commit without catalog changes). Any
// other table, or an append that fails, takes the swap. A table still
// empty as CreateTableAs made it is known empty and without constraints,
// and the query's columns as DuckDB prepares it are compared with those
// the table was made of, or with the table's as DuckDB prepares it: the
// INSERT is then the one statement that runs, beside the writes of other
// tables (see appendAsMade).
func (e *Engine) ReplaceTable(ctx context.Context, p warehouse.ReplaceTableParams) error {
	_, _, err := e.ReplaceTableRows(ctx, p)
	return err
}

// ReplaceTableRows is ReplaceTable that also returns the rows the table
// holds afterwards when it knows them without a count (see
// warehouse.RowReplacer): when a first build appended the query's rows,
// the INSERT's own count.
func (e *Engine) ReplaceTableRows(ctx context.Context, p warehouse.ReplaceTableParams) (rows int64, known bool, err error) {
	const op = "replace table"
	object := p.Table.String()
	if err := checkTable(p.Table); err != nil {
		return 0, false, fail(op, object, err)
	}
	if err := checkSQL("query", p.Query); err != nil {
		return 0, false, fail(op, object, err)
	}
	if _, err := e.CheckLayout(p.Layout); err != nil {
		return 0, false, fail(op, object, err)
	}
	tmpName, err := tempName(p.Table.Name + "__gapless_swap_")
	if err != nil {
		return 0, false, fail(op, object, err)
	}
	tmp := warehouse.Table{Schema: p.Table.Schema, Name: tmpName}
	tryAppend := p.FirstBuild
	if _, made := e.shared.cols.madeEmpty(p.Table); p.FirstBuild && made {
		n, outcome, err := e.appendAsMade(ctx, p)
		if err != nil {
			return 0, false, fail(op, object, err)
		}
		switch outcome {
		case appended:
			return n, true, nil
		case appendRefused:
			tryAppend = false
		}
	}
	err = fail(op, object, e.write(ctx, func(s *session) error {
		if tryAppend {
			if n, ok := appendFirstBuild(ctx, s, &e.shared.cols, p); ok {
				rows, known = n, true
				return nil
			}
		}
		defer e.shared.cols.forget(p.Table)
		return s.inTx(ctx, func() error {
			if _, err := s.exec(ctx, "CREATE TABLE "+quoteTable(tmp)+" AS\n"+body(p.Query)+"\n"); err != nil {
				return err
			}
			if _, err := s.exec(ctx, "DROP TABLE IF EXISTS "+quoteTable(p.Table)); err != nil {
				return err
			}
			if _, err := s.exec(ctx, "ALTER TABLE "+quoteTable(tmp)+" RENAME TO "+quoteIdent(p.Table.Name)); err != nil {
				return err
			}
			// The rebuilt table is a new one: its comments are registered
			// again, in the swap's transaction.
			return execAll(ctx, s, commentsOf(p.Table, p.Layout))
		})
	}))
	if err != nil {
		return 0, false, err
	}
	return rows, known, nil
}

// appendOutcome is what appendAsMade did.
type appendOutcome int

const (
	// appendUnknown: nothing was tried; appendFirstBuild decides.
	appendUnknown appendOutcome = iota
	// appended: the query's rows were appended.
	appended
	// appendRefused: the columns differ or the INSERT failed (and rolled
	// back): the swap follows.
	appendRefused
)

// appendAsMade is the first build of a table empty as CreateTableAs made
// it (columnCache.madeEmpty: no rows, no constraint, no default). It holds
// the whole table as a range write (see writeLock), so that first builds
// of different tables run together; checks that the table is still empty
// as made; compares the query's columns as DuckDB prepares it with those
// the table was made of (columnsAre) or, when it was made from a query,
// with the table's as DuckDB prepares both (sameColumns), running
// nothing; and appends with the INSERT, the one statement it runs. A
// table written meanwhile, or a type the comparison cannot tell apart, is
// appendUnknown: appendFirstBuild asks DuckDB, under the exclusive lock.
// Readers see the table empty until the INSERT commits and full after it.
// It fails only when the wait for the lock or for a connection does.
func (e *Engine) appendAsMade(ctx context.Context, p warehouse.ReplaceTableParams) (int64, appendOutcome, error) {
	release, err := e.shared.wl.lockTable(ctx, p.Table)
	if err != nil {
		return 0, appendUnknown, err
	}
	defer release()
	madeOf, made := e.shared.cols.madeEmpty(p.Table)
	if !made {
		return 0, appendUnknown, nil
	}
	s, err := e.session(ctx)
	if err != nil {
		return 0, appendUnknown, err
	}
	defer s.close()
	table := quoteTable(p.Table)
	query := "SELECT * FROM (\n" + body(p.Query) + "\n) AS gapless_q"
	var verdict columnsVerdict
	if madeOf != nil {
		verdict = columnsAre(ctx, s, query, madeOf)
	} else {
		verdict = sameColumns(ctx, s, "SELECT * FROM "+table, query)
	}
	switch verdict {
	case columnsSame:
	case columnsDiffer:
		return 0, appendRefused, nil
	default:
		return 0, appendUnknown, nil
	}
	e.shared.cols.wrote(p.Table)
	n, err := s.exec(ctx, "INSERT INTO "+table+"\n"+query)
	if err != nil {
		return 0, appendRefused, nil
	}
	return n, appended, nil
}

// appendFirstBuild appends p.Query's rows to p.Table when the table is
// empty and has exactly the query's columns, and reports whether it did,
// with the rows it appended (the INSERT's count). Anything else (a missing
// table, a view, rows, other columns, a failure of any statement) reports
// false having changed nothing: a failed INSERT is its own transaction,
// rolled back. It runs under the exclusive write lock and asks DuckDB:
// whether the table holds a row, and DESCRIBE of both, which says
// nullability, keys and defaults too.
func appendFirstBuild(ctx context.Context, s *session, cols *columnCache, p warehouse.ReplaceTableParams) (int64, bool) {
	table := quoteTable(p.Table)
	query := "SELECT * FROM (\n" + body(p.Query) + "\n) AS gapless_q"
	if found, err := s.findsRows(ctx, "SELECT 1 FROM "+table+" LIMIT 1"); err != nil || found {
		return 0, false
	}
	have, err := s.query(ctx, "DESCRIBE SELECT * FROM "+table)
	if err != nil {
		return 0, false
	}
	want, err := s.query(ctx, "DESCRIBE "+query)
	if err != nil || !reflect.DeepEqual(have.Rows, want.Rows) || !reflect.DeepEqual(have.Columns, want.Columns) {
		return 0, false
	}
	cols.wrote(p.Table)
	n, err := s.exec(ctx, "INSERT INTO "+table+"\n"+query)
	return n, err == nil
}

// columnsVerdict is sameColumns' answer.
type columnsVerdict int

const (
	// columnsUnknown: a statement failed to prepare, or a column has a
	// type whose prepared description may hide a difference.
	columnsUnknown columnsVerdict = iota
	columnsSame
	columnsDiffer
)

// sameColumns compares the result columns of two queries as DuckDB
// prepares them, running neither: the same names (exactly, as DESCRIBE
// spells them) in the same order, of the same types. It answers only for
// plain types (see plainType), whose prepared description is the whole
// type; for any other it says columnsUnknown, as it does when either
// query does not prepare.
func sameColumns(ctx context.Context, s *session, a, b string) columnsVerdict {
	ca, err := preparedColumns(ctx, s, a)
	if err != nil {
		return columnsUnknown
	}
	cb, err := preparedColumns(ctx, s, b)
	if err != nil {
		return columnsUnknown
	}
	if len(ca) != len(cb) {
		return columnsDiffer
	}
	for i := range ca {
		if ca[i].name != cb[i].name || !reflect.DeepEqual(ca[i].typ, cb[i].typ) {
			return columnsDiffer
		}
	}
	return columnsSame
}

// columnsAre compares the result columns of q as DuckDB prepares it,
// running none of it, with cols, names and types as DESCRIBE spells them:
// the same names in the same order, of the same plain types. A column of
// q of a type that is not plain is columnsUnknown.
func columnsAre(ctx context.Context, s *session, q string, cols []warehouse.Column) columnsVerdict {
	got, err := preparedColumns(ctx, s, q)
	if err != nil {
		return columnsUnknown
	}
	if len(got) != len(cols) {
		return columnsDiffer
	}
	for i, c := range got {
		if c.name != cols[i].Name || plainName(c.typ) != cols[i].Type {
			return columnsDiffer
		}
	}
	return columnsSame
}

type preparedColumn struct {
	name string
	typ  duckdb.TypeInfo
}

// preparedColumns prepares q on s (binding it, running none of it) and
// returns its result columns. It fails when q does not prepare (with the
// statement's error) or takes parameters, and with errNotPlain when a
// column's type is not plain or cannot be read.
func preparedColumns(ctx context.Context, s *session, q string) ([]preparedColumn, error) {
	var out []preparedColumn
	err := s.withStmt(ctx, q, nil, func(st driver.Stmt, _ *duckdb.Conn, _ []driver.NamedValue) error {
		ds, ok := st.(*duckdb.Stmt)
		if !ok {
			return fmt.Errorf("unexpected driver statement %T", st)
		}
		n, err := ds.ColumnCount()
		if err != nil {
			return fmt.Errorf("%w: %w", errNotPlain, err)
		}
		for i := range n {
			name, err := ds.ColumnName(i)
			if err != nil {
				return fmt.Errorf("%w: %w", errNotPlain, err)
			}
			typ, err := ds.ColumnTypeInfo(i)
			if err != nil {
				// SQLNULL, INVALID and other types without a TypeInfo.
				return fmt.Errorf("%w: %w", errNotPlain, err)
			}
			if !plainType(typ) {
				return errNotPlain
			}
			out = append(out, preparedColumn{name: name, typ: typ})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

var errNotPlain = errors.New("a column type a prepared statement does not describe whole")

// plainType reports whether t is a type its TypeInfo describes whole, so
// that two equal TypeInfos are one type: a scalar type without an alias
// (JSON and extension types have one), or a DECIMAL (its width and scale).
// Nested types, ENUMs, GEOMETRY (its CRS) and VARIANT are not: the slow
// path compares them by DESCRIBE.
func plainType(t duckdb.TypeInfo) bool {
	if t.Alias() != "" {
		return false
	}
	switch t.InternalType() {
	case duckdb.TYPE_BOOLEAN, duckdb.TYPE_TINYINT, duckdb.TYPE_SMALLINT, duckdb.TYPE_INTEGER, duckdb.TYPE_BIGINT,
		duckdb.TYPE_UTINYINT, duckdb.TYPE_USMALLINT, duckdb.TYPE_UINTEGER, duckdb.TYPE_UBIGINT,
		duckdb.TYPE_HUGEINT, duckdb.TYPE_UHUGEINT, duckdb.TYPE_FLOAT, duckdb.TYPE_DOUBLE, duckdb.TYPE_DECIMAL,
		duckdb.TYPE_VARCHAR, duckdb.TYPE_BLOB, duckdb.TYPE_UUID, duckdb.TYPE_BIT, duckdb.TYPE_BIGNUM,
		duckdb.TYPE_DATE, duckdb.TYPE_TIME, duckdb.TYPE_TIME_TZ, duckdb.TYPE_INTERVAL,
		duckdb.TYPE_TIMESTAMP, duckdb.TYPE_TIMESTAMP_S, duckdb.TYPE_TIMESTAMP_MS, duckdb.TYPE_TIMESTAMP_NS, duckdb.TYPE_TIMESTAMP_TZ:
		return true
	}
	return false
}

// maxParams bounds the parameters of one INSERT statement of InsertRows.
// Preparing a multi-row VALUES statement in DuckDB 1.5 costs more than its
// size, and executing one row per statement costs ~200 µs a row; statements
// of about 320 parameters, prepared once and re-executed, measured fastest
// (~30 µs a row).
const maxParams = 320

// InsertRows appends p.Rows to p.Table, in one transaction: all rows or
// none. Values are bound as parameters (DuckDB casts them to the column
// types, so "2024-01-01 00:00:00" fills a TIMESTAMP); columns of the table
// not in p.Columns get their default. Every row must have one value per
// column. It returns the number of rows inserted.
func (e *Engine) InsertRows(ctx context.Context, p warehouse.InsertRowsParams) (int64, error) {
	const op = "insert rows"
	object := p.Table.String()
	if err := checkTable(p.Table); err != nil {
		return 0, fail(op, object, err)
	}
	if len(p.Columns) == 0 {
		return 0, fail(op, object, invalidf("no columns given"))
	}
	cols := make([]warehouse.Column, len(p.Columns))
	for i, c := range p.Columns {
		if err := checkIdent("column", c); err != nil {
			return 0, fail(op, object, err)
		}
		cols[i] = warehouse.Column{Name: c}
	}
	for i, row := range p.Rows {
		if len(row) != len(p.Columns) {
			return 0, fail(op, object, invalidf("row %d has %d values for %d columns", i, len(row), len(p.Columns)))
		}
	}
	if len(p.Rows) == 0 {
		return 0, nil
	}
	perStmt := max(1, maxParams/len(p.Columns))
	full := len(p.Rows) / perStmt
	batches := make([][]any, 0, full)
	for b := range full {
		batches = append(batches, flatten(p.Rows[b*perStmt:(b+1)*perStmt]))
	}
	rest := p.Rows[full*perStmt:]
	var inserted int64
	err := e.write(ctx, func(s *session) error {
		e.shared.cols.wrote(p.Table)
		return s.inTx(ctx, func() error {
			n, err := s.execBatches(ctx, insertValues(p.Table, cols, perStmt), batches)
			if err != nil {
				return err
			}
			inserted = n
			if len(rest) > 0 {
				n, err := s.exec(ctx, insertValues(p.Table, cols, len(rest)), flatten(rest)...)
				if err != nil {
					return err
				}
				inserted += n
			}
			return nil
		})
	})
	if err != nil {
		return 0, fail(op, object, err)
	}
	return inserted, nil
}

// flatten lays rows end to end, as the arguments of one multi-row INSERT.
func flatten(rows [][]any) []any {
	out := make([]any, 0, len(rows)*len(rows[0]))
	for _, r := range rows {
		out = append(out, r...)
	}
	return out
}

// insertValues renders INSERT INTO t (cols) VALUES ($1, $2), ($3, $4), …
// for n rows.
func insertValues(t warehouse.Table, cols []warehouse.Column, n int) string {
	var b strings.Builder
	b.WriteString("INSERT INTO " + quoteTable(t) + " (" + columnList("", cols) + ") VALUES ")
	param := 1
	for r := range n {
		if r > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for c := range cols {
			if c > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "$%d", param)
			param++
		}
		b.WriteByte(')')
	}
	return b.String()
}

// Query runs one statement with args bound as parameters ($1, $2, …) and
// returns every row, with values as duckdb-go returns them (int32, int64,
// float64, string, bool, time.Time in UTC, []byte, duckdb.Decimal, nil, …).
// A string holding several statements is an error and nothing runs.
// A statement other than SELECT or EXPLAIN (an INSERT, an ALTER TABLE, …)
// is a write: it waits for the database's write lock and, having run,
// forgets every cached column list (see the package comment).
func (e *Engine) Query(ctx context.Context, q string, args ...any) (*warehouse.Result, error) {
	const op = "query"
	if err := checkSQL("query", q); err != nil {
		return nil, fail(op, e.object, err)
	}
	var res *warehouse.Result
	err := e.read(ctx, func(s *session) error {
		var err error
		res, err = s.queryGuarded(ctx, q, e.guardQuery(ctx), args...)
		return err
	})
	if err != nil {
		return nil, fail(op, e.object, err)
	}
	return res, nil
}

// columnList renders cols as a quoted, comma-separated list, each qualified
// by alias when alias is not empty.
func columnList(alias string, cols []warehouse.Column) string {
	parts := make([]string, len(cols))
	for i, c := range cols {
		if alias != "" {
			parts[i] = alias + "." + quoteIdent(c.Name)
		} else {
			parts[i] = quoteIdent(c.Name)
		}
	}
	return strings.Join(parts, ", ")
}

func hasColumn(cols []warehouse.Column, name string) bool {
	for _, c := range cols {
		if asciiFoldEqual(c.Name, name) {
			return true
		}
	}
	return false
}

// tempName returns prefix followed by 12 random hex digits.
func tempName(prefix string) (string, error) {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random name: %w", err)
	}
	return prefix + hex.EncodeToString(b), nil
}
