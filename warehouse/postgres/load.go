package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/gapless-dev/gapless/warehouse"
)

// lockTable takes the writers' lock of the package doc on table t (which
// must exist and be a table) and returns it as resolved after the lock: a
// concurrent ReplaceTable may have swapped a new table in under the name
// while this transaction waited.
func lockTable(ctx context.Context, tx pgx.Tx, t warehouse.Table) (relation, error) {
	if _, err := mustResolveTable(ctx, tx, t); err != nil {
		return relation{}, err
	}
	if _, err := exec(ctx, tx, "LOCK TABLE "+quoteTable(t)+" IN SHARE ROW EXCLUSIVE MODE"); err != nil {
		return relation{}, err
	}
	return mustResolveTable(ctx, tx, t)
}

// findColumn returns the column named name (exactly).
func findColumn(cols []column, name string) (column, bool) {
	for _, c := range cols {
		if c.Name == name {
			return c, true
		}
	}
	return column{}, false
}

// boundExpr renders interval bound parameter n for a time column of the
// given type oid. Bounds are bound as timestamptz (an absolute instant);
// for timestamp and date columns they are turned into UTC wall-clock time
// explicitly (AT TIME ZONE 'UTC'), never through the session time zone. A
// date compares with a timestamp as its midnight. With text bounds the
// column must hold text (text, varchar or char) and the bound is text.
func boundExpr(typeOID uint32, n int, text bool) (string, bool) {
	if text {
		switch typeOID {
		case pgtype.TextOID, pgtype.VarcharOID, pgtype.BPCharOID:
			return fmt.Sprintf("$%d::text", n), true
		}
		return "", false
	}
	switch typeOID {
	case pgtype.TimestamptzOID:
		return fmt.Sprintf("$%d::timestamptz", n), true
	case pgtype.TimestampOID, pgtype.DateOID:
		return fmt.Sprintf("($%d::timestamptz AT TIME ZONE 'UTC')", n), true
	}
	return "", false
}

// timeExpr is how the time column expression col is compared with the
// bounds: as is, or, for text bounds, in the "C" collation, byte by byte
// (a linguistic collation may order punctuation and digits otherwise).
func timeExpr(col string, text bool) string {
	if text {
		return col + ` COLLATE "C"`
	}
	return col
}

// bounds are the parameters $1 and $2 of an interval's statements.
func bounds(p warehouse.InsertIntervalParams) (lo, hi any) {
	if p.Text != nil {
		return p.Text.Start, p.Text.End
	}
	return p.Start.UTC(), p.End.UTC()
}

// InsertInterval replaces the rows of [Start, End) in the time column of
// p.Table with p.Query's rows in that range, in one transaction:
//
//	LOCK TABLE t IN SHARE ROW EXCLUSIVE MODE;
//	DELETE FROM t WHERE tc >= lo AND tc < hi;
//	INSERT INTO t (c1, …) SELECT q.c1, … FROM (query) AS q
//	  WHERE CAST(q.tc AS <tc's type>) >= lo AND CAST(q.tc AS <tc's type>) < hi;
//
// The time column must be timestamp, timestamptz or date (any precision);
// with p.Text it must be text, varchar or char, compared in the "C"
// collation with the text bounds.
// Query rows are filtered on their time value as the table will store it
// (cast to the column's exact type, rounding included), so every inserted
// row is one the DELETE of a re-run removes: re-running an interval never
// duplicates, and rows outside the interval are never touched. Columns are
// the target's, taken from the query by name; a target column the query
// lacks is an error. Start and End are instants: on timestamp and date
// columns they are compared as UTC wall-clock time. It returns the number
// of rows inserted.
//
// With p.Concurrent the rows are computed first, before the lock, into a
// transaction-local table, and then moved in under it:
//
//	CREATE TEMP TABLE src ON COMMIT DROP AS SELECT q.c1, … FROM (query) AS q WHERE <in range>;
//	LOCK TABLE t IN SHARE ROW EXCLUSIVE MODE;
//	DELETE FROM t WHERE tc >= lo AND tc < hi;
//	INSERT INTO t (c1, …) SELECT c1, … FROM src;
//
// so that concurrent batches of one table overlap their queries and take
// turns only to write. The rows written are the same; if the table's
// columns changed between the two steps, nothing is written and the error
// says so.
func (e *Engine) InsertInterval(ctx context.Context, p warehouse.InsertIntervalParams) (int64, error) {
	const op = "insert interval"
	obj := p.Table.String()
	if err := e.checkQualified(p.Table); err != nil {
		return 0, fail(op, obj, "", err)
	}
	if err := e.checkIdent("time column", p.TimeColumn); err != nil {
		return 0, fail(op, obj, "", err)
	}
	if !p.End.After(p.Start) {
		return 0, fail(op, obj, "", fmt.Errorf("%w: interval end %s is not after start %s",
			warehouse.ErrInvalidArgument, p.End.UTC().Format(time.RFC3339Nano), p.Start.UTC().Format(time.RFC3339Nano)))
	}
	if p.Text != nil && p.Text.Start >= p.Text.End {
		return 0, fail(op, obj, "", fmt.Errorf("%w: text bounds [%q, %q) are empty", warehouse.ErrInvalidArgument, p.Text.Start, p.Text.End))
	}
	q, err := trimQuery(p.Query)
	if err != nil {
		return 0, fail(op, obj, "", err)
	}
	text := p.Text != nil
	lob, hib := bounds(p)
	var inserted int64
	err = e.inTx(ctx, func(tx pgx.Tx) error {
		var (
			staged string // the statement that computed the rows, when they were
			before []column
		)
		if p.Concurrent {
			// Compute the rows first, without the lock, so that concurrent
			// batches of disjoint ranges overlap their queries.
			rel, err := mustResolveTable(ctx, tx, p.Table)
			if err != nil {
				return err
			}
			if before, err = columnsOf(ctx, tx, rel.oid); err != nil {
				return err
			}
			sel, err := intervalSelect(before, p.TimeColumn, p.Table, q, text)
			if err != nil {
				return err
			}
			staged = "CREATE TEMP TABLE " + intervalSource + " ON COMMIT DROP AS " + sel
			if _, err := exec(ctx, tx, staged, lob, hib); err != nil {
				return err
			}
		}
		rel, err := lockTable(ctx, tx, p.Table)
		if err != nil {
			return err
		}
		cols, err := columnsOf(ctx, tx, rel.oid)
		if err != nil {
			return err
		}
		if staged != "" && !slices.Equal(cols, before) {
			return fmt.Errorf("%w: the columns of %s changed while the interval's rows were computed; run it again",
				warehouse.ErrInvalidArgument, p.Table)
		}
		tc, ok := findColumn(cols, p.TimeColumn)
		if !ok {
			return fmt.Errorf("%w: no time column %q in %s", warehouse.ErrInvalidArgument, p.TimeColumn, p.Table)
		}
		lo, ok := boundExpr(tc.typeOID, 1, text)
		if !ok {
			return unsupportedTimeColumn(tc, text)
		}
		hi, _ := boundExpr(tc.typeOID, 2, text)
		target := quoteTable(p.Table)
		col := timeExpr(quoteIdent(tc.Name), text)
		del := "DELETE FROM " + target + " WHERE " + col + " >= " + lo + " AND " + col + " < " + hi
		if _, err := exec(ctx, tx, del, lob, hib); err != nil {
			return err
		}
		names := make([]string, len(cols))
		for i, c := range cols {
			names[i] = quoteIdent(c.Name)
		}
		var tag pgconn.CommandTag
		if staged != "" {
			ins := "INSERT INTO " + target + " (" + strings.Join(names, ", ") + ")\nSELECT " + strings.Join(names, ", ") + " FROM " + intervalSource
			tag, err = exec(ctx, tx, ins)
		} else {
			sel, serr := intervalSelect(cols, p.TimeColumn, p.Table, q, text)
			if serr != nil {
				return serr
			}
			tag, err = exec(ctx, tx, "INSERT INTO "+target+" ("+strings.Join(names, ", ")+")\n"+sel, lob, hib)
		}
		if err != nil {
			return err
		}
		inserted = tag.RowsAffected()
		return nil
	})
	if err != nil {
		return 0, failStep(op, obj, err)
	}
	return inserted, nil
}

// intervalSource is the transaction-local table a Concurrent
// InsertInterval computes its rows into before it takes the table's lock;
// it is dropped at commit (and, created in the transaction, gone on
// rollback).
const intervalSource = `pg_temp."gapless_interval_src"`

// intervalSelect is the SELECT of an interval's rows: the columns of the
// table, by name, from query q, filtered on their time value as the table
// will store it ($1 and $2 are the bounds, text ones with text).
func intervalSelect(cols []column, timeColumn string, t warehouse.Table, q string, text bool) (string, error) {
	tc, ok := findColumn(cols, timeColumn)
	if !ok {
		return "", fmt.Errorf("%w: no time column %q in %s", warehouse.ErrInvalidArgument, timeColumn, t)
	}
	lo, ok := boundExpr(tc.typeOID, 1, text)
	if !ok {
		return "", unsupportedTimeColumn(tc, text)
	}
	hi, _ := boundExpr(tc.typeOID, 2, text)
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = quoteIdent(c.Name)
	}
	qtc := timeExpr("CAST(q."+quoteIdent(tc.Name)+" AS "+tc.Type+")", text)
	return "SELECT q." + strings.Join(names, ", q.") + "\nFROM " + subquery(q) + " AS q\nWHERE " + qtc + " >= " + lo + " AND " + qtc + " < " + hi, nil
}

func unsupportedTimeColumn(tc column, text bool) error {
	if text {
		return fmt.Errorf("%w: %q is %s, and text bounds need text, varchar or char", warehouse.ErrUnsupportedTimeColumn, tc.Name, tc.Type)
	}
	return fmt.Errorf("%w: %q is %s", warehouse.ErrUnsupportedTimeColumn, tc.Name, tc.Type)
}

// mergeSource is the transaction-local table MergeByKey reads the query
// into: it is dropped at commit (and, created in the transaction, gone on
// rollback).
const mergeSource = `pg_temp."gapless_merge_src"`

// MergeByKey upserts p.Query's rows into p.Table by p.Key, in one
// transaction and without needing any constraint on the table:
//
//	LOCK TABLE t IN SHARE ROW EXCLUSIVE MODE;
//	CREATE TEMP TABLE src ON COMMIT DROP AS SELECT q.c1, … FROM (query) AS q;
//	-- refuse a key src holds twice
//	DELETE FROM t USING src WHERE <t's key IS NOT DISTINCT FROM src's key>;
//	INSERT INTO t (c1, …) SELECT c1, … FROM src;
//
// The query runs once (into src). Keys compare NULL-safely: a NULL key
// matches a NULL key, so re-running a batch with a NULL key replaces its
// row instead of adding another. A key the query returns twice
// (warehouse.ErrDuplicateKey; NULLs count as equal) fails the merge and changes
// nothing, since the target's key would no longer be unique.
//
// IS NOT DISTINCT FROM cannot drive a hash or merge join, so the DELETE is
// issued once per pattern of NULL key columns present in src (usually just
// one, "no NULLs"), each with plain equality on the non-NULL columns and IS
// NULL on the others: the same rows, at join speed. Columns are the
// target's, taken from the query by name. It returns the number of rows
// inserted or updated (the query's row count).
func (e *Engine) MergeByKey(ctx context.Context, p warehouse.MergeParams) (int64, error) {
	const op = "merge by key"
	obj := p.Table.String()
	if err := e.checkQualified(p.Table); err != nil {
		return 0, fail(op, obj, "", err)
	}
	if len(p.Key) == 0 {
		return 0, fail(op, obj, "", fmt.Errorf("%w: no key columns", warehouse.ErrInvalidArgument))
	}
	if err := e.checkIdents("key column", p.Key); err != nil {
		return 0, fail(op, obj, "", err)
	}
	seen := make(map[string]bool, len(p.Key))
	for _, k := range p.Key {
		if seen[k] {
			return 0, fail(op, obj, "", fmt.Errorf("%w: key column %q listed twice", warehouse.ErrInvalidArgument, k))
		}
		seen[k] = true
	}
	q, err := trimQuery(p.Query)
	if err != nil {
		return 0, fail(op, obj, "", err)
	}
	var merged int64
	err = e.inTx(ctx, func(tx pgx.Tx) error {
		rel, err := lockTable(ctx, tx, p.Table)
		if err != nil {
			return err
		}
		cols, err := columnsOf(ctx, tx, rel.oid)
		if err != nil {
			return err
		}
		for _, k := range p.Key {
			if _, ok := findColumn(cols, k); !ok {
				return fmt.Errorf("%w: no key column %q in %s", warehouse.ErrInvalidArgument, k, p.Table)
			}
		}
		names := make([]string, len(cols))
		for i, c := range cols {
			names[i] = quoteIdent(c.Name)
		}
		keys := make([]string, len(p.Key))
		nullFlags := make([]string, len(p.Key))
		for i, k := range p.Key {
			keys[i] = quoteIdent(k)
			nullFlags[i] = keys[i] + " IS NULL"
		}
		create := "CREATE TEMP TABLE " + mergeSource + " ON COMMIT DROP AS\nSELECT q." + strings.Join(names, ", q.") +
			"\nFROM " + subquery(q) + " AS q"
		if _, err := exec(ctx, tx, create); err != nil {
			return err
		}
		dup := "SELECT EXISTS (SELECT 1 FROM " + mergeSource + " GROUP BY " + strings.Join(keys, ", ") + " HAVING count(*) > 1)"
		var hasDup bool
		if err := tx.QueryRow(ctx, dup).Scan(&hasDup); err != nil {
			return &stepError{sql: dup, err: err}
		}
		if hasDup {
			return &stepError{sql: dup, err: fmt.Errorf("%w (key %s)", warehouse.ErrDuplicateKey, strings.Join(p.Key, ", "))}
		}
		patterns := "SELECT DISTINCT " + strings.Join(nullFlags, ", ") + " FROM " + mergeSource
		rows, err := tx.Query(ctx, patterns)
		if err != nil {
			return &stepError{sql: patterns, err: err}
		}
		nulls, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([]bool, error) {
			vals, err := r.Values()
			if err != nil {
				return nil, err
			}
			out := make([]bool, len(vals))
			for i, v := range vals {
				b, ok := v.(bool)
				if !ok {
					return nil, fmt.Errorf("NULL pattern: %T is not bool", v)
				}
				out[i] = b
			}
			return out, nil
		})
		if err != nil {
			return &stepError{sql: patterns, err: err}
		}
		target := quoteTable(p.Table)
		for _, pattern := range nulls {
			conds := make([]string, len(keys))
			for i, k := range keys {
				if pattern[i] {
					conds[i] = "tgt." + k + " IS NULL AND src." + k + " IS NULL"
				} else {
					conds[i] = "tgt." + k + " = src." + k
				}
			}
			del := "DELETE FROM " + target + " AS tgt USING " + mergeSource + " AS src WHERE " + strings.Join(conds, " AND ")
			if _, err := exec(ctx, tx, del); err != nil {
				return err
			}
		}
		ins := "INSERT INTO " + target + " (" + strings.Join(names, ", ") + ")\nSELECT " + strings.Join(names, ", ") + " FROM " + mergeSource
		tag, err := exec(ctx, tx, ins)
		if err != nil {
			return err
		}
		merged = tag.RowsAffected()
		return nil
	})
	if err != nil {
		return 0, failStep(op, obj, err)
	}
	return merged, nil
}

// InsertRows appends p.Rows to p.Table with COPY (binary): values travel as
// data, never as SQL. time.Time values are sent in UTC (pgx writes a
// time.Time into a timestamp column as its wall clock in its own location).
// Every row must have exactly one value per column. COPY is one statement:
// all rows land or none do. It returns the number of rows inserted.
func (e *Engine) InsertRows(ctx context.Context, p warehouse.InsertRowsParams) (int64, error) {
	const op = "insert rows"
	obj := p.Table.String()
	if err := e.checkQualified(p.Table); err != nil {
		return 0, fail(op, obj, "", err)
	}
	if len(p.Columns) == 0 {
		return 0, fail(op, obj, "", fmt.Errorf("%w: no columns", warehouse.ErrInvalidArgument))
	}
	if err := e.checkIdents("column", p.Columns); err != nil {
		return 0, fail(op, obj, "", err)
	}
	rows := make([][]any, len(p.Rows))
	for i, r := range p.Rows {
		if len(r) != len(p.Columns) {
			return 0, fail(op, obj, "", fmt.Errorf("%w: row %d has %d values for %d columns", warehouse.ErrInvalidArgument, i, len(r), len(p.Columns)))
		}
		rows[i] = make([]any, len(r))
		for j, v := range r {
			rows[i][j] = bindValue(v)
		}
	}
	if len(rows) == 0 {
		return 0, nil
	}
	quoted := make([]string, len(p.Columns))
	for i, c := range p.Columns {
		quoted[i] = quoteIdent(c)
	}
	sql := "COPY " + quoteTable(p.Table) + " (" + strings.Join(quoted, ", ") + ") FROM STDIN BINARY"
	n, err := e.pool.CopyFrom(ctx, pgx.Identifier{p.Table.Schema, p.Table.Name}, p.Columns, pgx.CopyFromRows(rows))
	if err != nil {
		return 0, fail(op, obj, sql, err)
	}
	return n, nil
}

// bindValue normalises a value bound as a parameter: times go in UTC.
func bindValue(v any) any {
	switch x := v.(type) {
	case time.Time:
		return x.UTC()
	case *time.Time:
		if x == nil {
			return nil
		}
		return x.UTC()
	}
	return v
}
