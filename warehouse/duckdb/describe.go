package duckdb

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/gapless-dev/gapless/warehouse"
)

// Describe returns the columns p.Query produces, as DuckDB binds it:
//
//	DESCRIBE SELECT * FROM (query) AS gapless_q
//
// which plans the query and runs none of it. The wrapping is CreateTableAs's,
// so the names and types are those a table made from the query gets. When
// every column is of a plain type the answer is read from the prepared
// SELECT instead, without running a statement (see describeQuery).
//
// With stand-ins it takes the write lock and works in one transaction that
// is always rolled back: CREATE SCHEMA IF NOT EXISTS once per schema and
// CREATE TABLE IF NOT EXISTS per stand-in (so a stand-in whose name a table
// or view has is skipped, by DuckDB's rule for names, and no catalog is
// scanned), then the describe. DuckDB's
// DDL is transactional, so the rollback leaves no stand-in and no schema;
// readers never see them (MVCC serves them committed state), and the cached
// column names of every stand-in are forgotten before the lock is let go.
func (e *Engine) Describe(ctx context.Context, p warehouse.DescribeParams) ([]warehouse.Column, error) {
	const op, object = "describe", "query"
	if err := checkSQL("query", p.Query); err != nil {
		return nil, fail(op, object, err)
	}
	// CREATE … IF NOT EXISTS skips a stand-in whose name a table or view
	// has, by DuckDB's own rule for names, without a catalog question.
	create := make([]string, 0, 2*len(p.StandIns))
	schemas := map[string]bool{}
	for _, st := range p.StandIns {
		q, err := createTableSQL(st)
		if err != nil {
			return nil, fail(op, st.Table.String(), err)
		}
		if key := foldASCII(st.Table.Schema); !schemas[key] {
			schemas[key] = true
			create = append(create, "CREATE SCHEMA IF NOT EXISTS "+quoteIdent(st.Table.Schema))
		}
		create = append(create, strings.Replace(q, "CREATE TABLE ", "CREATE TABLE IF NOT EXISTS ", 1))
	}
	var cols []warehouse.Column
	describe := func(s *session) error {
		var err error
		cols, err = describeQuery(ctx, s, p.Query)
		return err
	}
	if len(p.StandIns) == 0 {
		return cols, fail(op, object, e.read(ctx, describe))
	}
	err := e.write(ctx, func(s *session) error {
		defer func() {
			for _, st := range p.StandIns {
				e.shared.cols.forget(st.Table)
			}
		}()
		if _, err := s.exec(ctx, "BEGIN TRANSACTION"); err != nil {
			return err
		}
		err := func() error {
			for _, q := range create {
				if _, err := s.exec(ctx, q); err != nil {
					return err
				}
			}
			return describe(s)
		}()
		if _, rbErr := s.exec(context.WithoutCancel(ctx), "ROLLBACK"); rbErr != nil {
			// The connection may still hold the transaction: closing it
			// for good makes DuckDB roll it back.
			s.discard()
			err = errors.Join(err, fmt.Errorf("rolling back the stand-ins: %w", rbErr))
		}
		return err
	})
	if err != nil {
		return nil, fail(op, object, err)
	}
	return cols, nil
}

// describeQuery returns the columns query produces, as DESCRIBE SELECT *
// FROM (query) AS gapless_q spells them, on s. It prepares the SELECT,
// running none of it, and reads the prepared result columns; only when one
// is of a type that is not plain (see plainType) does it run the DESCRIBE.
// A plain type's prepared description is the whole type, and plainName
// spells it as DESCRIBE does (TestDescribeSpellsPlainTypesAsDescribe).
// A query that does not bind fails either way, with the binder's error.
func describeQuery(ctx context.Context, s *session, query string) ([]warehouse.Column, error) {
	q := "SELECT * FROM (\n" + body(query) + "\n) AS gapless_q"
	prepared, err := preparedColumns(ctx, s, q)
	if err == nil {
		cols := make([]warehouse.Column, len(prepared))
		for i, c := range prepared {
			cols[i] = warehouse.Column{Name: c.name, Type: plainName(c.typ)}
		}
		return cols, nil
	}
	if !errors.Is(err, errNotPlain) {
		return nil, err
	}
	d := "DESCRIBE " + q
	res, err := s.query(ctx, d)
	if err != nil {
		return nil, err
	}
	cols, err := describedColumns(res)
	if err != nil {
		return nil, &stmtError{sql: d, err: err}
	}
	return cols, nil
}

// plainNames are the names DESCRIBE gives the plain scalar types.
var plainNames = map[duckdb.Type]string{
	duckdb.TYPE_BOOLEAN: "BOOLEAN", duckdb.TYPE_TINYINT: "TINYINT", duckdb.TYPE_SMALLINT: "SMALLINT",
	duckdb.TYPE_INTEGER: "INTEGER", duckdb.TYPE_BIGINT: "BIGINT", duckdb.TYPE_UTINYINT: "UTINYINT",
	duckdb.TYPE_USMALLINT: "USMALLINT", duckdb.TYPE_UINTEGER: "UINTEGER", duckdb.TYPE_UBIGINT: "UBIGINT",
	duckdb.TYPE_HUGEINT: "HUGEINT", duckdb.TYPE_UHUGEINT: "UHUGEINT", duckdb.TYPE_FLOAT: "FLOAT",
	duckdb.TYPE_DOUBLE: "DOUBLE", duckdb.TYPE_VARCHAR: "VARCHAR", duckdb.TYPE_BLOB: "BLOB",
	duckdb.TYPE_UUID: "UUID", duckdb.TYPE_BIT: "BIT", duckdb.TYPE_BIGNUM: "BIGNUM",
	duckdb.TYPE_DATE: "DATE", duckdb.TYPE_TIME: "TIME", duckdb.TYPE_TIME_TZ: "TIME WITH TIME ZONE",
	duckdb.TYPE_INTERVAL: "INTERVAL", duckdb.TYPE_TIMESTAMP: "TIMESTAMP", duckdb.TYPE_TIMESTAMP_S: "TIMESTAMP_S",
	duckdb.TYPE_TIMESTAMP_MS: "TIMESTAMP_MS", duckdb.TYPE_TIMESTAMP_NS: "TIMESTAMP_NS",
	duckdb.TYPE_TIMESTAMP_TZ: "TIMESTAMP WITH TIME ZONE",
}

// plainName spells plain type t as DESCRIBE does.
func plainName(t duckdb.TypeInfo) string {
	if t.InternalType() == duckdb.TYPE_DECIMAL {
		if d, ok := t.Details().(*duckdb.DecimalDetails); ok {
			return fmt.Sprintf("DECIMAL(%d,%d)", d.Width, d.Scale)
		}
	}
	return plainNames[t.InternalType()]
}

// decimalName is how DESCRIBE spells a DECIMAL.
var decimalName = regexp.MustCompile(`^DECIMAL\(([0-9]{1,2}),([0-9]{1,2})\)$`)

// isPlainName reports whether typ is a plain type spelt as plainName
// spells it.
func isPlainName(typ string) bool {
	if m := decimalName.FindStringSubmatch(typ); m != nil {
		w, _ := strconv.Atoi(m[1])
		sc, _ := strconv.Atoi(m[2])
		return w >= 1 && w <= 38 && sc <= w && fmt.Sprintf("DECIMAL(%d,%d)", w, sc) == typ
	}
	for _, n := range plainNames {
		if n == typ {
			return true
		}
	}
	return false
}

// describedColumns reads DESCRIBE's result: one row per column, its name
// in column_name and its type in column_type.
func describedColumns(res *warehouse.Result) ([]warehouse.Column, error) {
	name, typ := -1, -1
	for i, c := range res.Columns {
		switch strings.ToLower(c) {
		case "column_name":
			name = i
		case "column_type":
			typ = i
		}
	}
	if name < 0 || typ < 0 {
		return nil, fmt.Errorf("unexpected DESCRIBE result columns %v", res.Columns)
	}
	cols := make([]warehouse.Column, len(res.Rows))
	for i, row := range res.Rows {
		n, _ := row[name].(string)
		t, _ := row[typ].(string)
		if n == "" || t == "" {
			return nil, fmt.Errorf("unexpected DESCRIBE row %v", row)
		}
		cols[i] = warehouse.Column{Name: n, Type: t}
	}
	return cols, nil
}

// describeChunk bounds the queries DescribeAll answers in one transaction,
// so the write lock is let go between chunks.
const describeChunk = 256

// DescribeAll answers each of ps as Describe would (see
// warehouse.BatchDescriber), in one rolled-back transaction per chunk of
// describeChunk queries: a schema and a stand-in are created once for the
// chunk, not once per query. A stand-in made for one query stays for the
// later ones of its transaction, so each query must be given every
// not-yet-built table it reads (the check gives a model's parents); two
// queries that want different columns for one stand-in are answered in
// different transactions. A query that fails rolls its transaction back
// and the next query starts a fresh one (a failed statement may leave a
// DuckDB transaction aborted; a binder error, in DuckDB 1.5, does not), so
// one failure never changes another query's answer. Cached column names of every
// stand-in are forgotten before the lock is let go.
func (e *Engine) DescribeAll(ctx context.Context, ps []warehouse.DescribeParams) ([]warehouse.Described, error) {
	out := make([]warehouse.Described, len(ps))
	for lo := 0; lo < len(ps); lo += describeChunk {
		hi := min(lo+describeChunk, len(ps))
		if err := e.write(ctx, func(s *session) error { return e.describeChunk(ctx, s, ps[lo:hi], out[lo:hi]) }); err != nil {
			return nil, fail("describe", "query", err)
		}
	}
	return out, nil
}

// standIn is one stand-in table of a transaction: the statements that make
// it and the columns they give it.
type standIn struct {
	schema, create string
	cols           string
}

func (e *Engine) describeChunk(ctx context.Context, s *session, ps []warehouse.DescribeParams, out []warehouse.Described) (err error) {
	const op, object = "describe", "query"
	var (
		open    bool
		schemas map[string]bool
		made    map[warehouse.Table]string // stand-in → its columns
		touched []warehouse.Table
	)
	defer func() {
		for _, t := range touched {
			e.shared.cols.forget(t)
		}
	}()
	end := func() error {
		if !open {
			return nil
		}
		open = false
		if _, rbErr := s.exec(context.WithoutCancel(ctx), "ROLLBACK"); rbErr != nil {
			s.discard()
			return fmt.Errorf("rolling back the stand-ins: %w", rbErr)
		}
		return nil
	}
	defer func() { err = errors.Join(err, end()) }()
	begin := func() error {
		if _, err := s.exec(ctx, "BEGIN TRANSACTION"); err != nil {
			return err
		}
		open, schemas, made = true, map[string]bool{}, map[warehouse.Table]string{}
		return nil
	}
	for i, p := range ps {
		if err := checkSQL("query", p.Query); err != nil {
			out[i].Err = fail(op, object, err)
			continue
		}
		var want []standIn
		keys := make([]warehouse.Table, len(p.StandIns))
		bad := false
		for j, st := range p.StandIns {
			q, err := createTableSQL(st)
			if err != nil {
				out[i].Err = fail(op, st.Table.String(), err)
				bad = true
				break
			}
			keys[j] = warehouse.Table{Schema: foldASCII(st.Table.Schema), Name: foldASCII(st.Table.Name)}
			want = append(want, standIn{
				schema: "CREATE SCHEMA IF NOT EXISTS " + quoteIdent(st.Table.Schema),
				create: strings.Replace(q, "CREATE TABLE ", "CREATE TABLE IF NOT EXISTS ", 1),
				cols:   fmt.Sprint(st.Columns),
			})
		}
		if bad {
			continue
		}
		if open {
			for j, w := range want {
				if have, ok := made[keys[j]]; ok && have != w.cols {
					// Another query's stand-in of this table has other
					// columns: this one gets a fresh transaction.
					if err := end(); err != nil {
						return err
					}
					break
				}
			}
		}
		if !open {
			if err := begin(); err != nil {
				return err
			}
		}
		if len(p.StandIns) > 0 {
			touched = append(touched, standInTables(p)...)
		}
		var cols []warehouse.Column
		stmtErr := func() error {
			for j, w := range want {
				if _, ok := made[keys[j]]; ok {
					continue
				}
				if sk := keys[j].Schema; !schemas[sk] {
					if _, err := s.exec(ctx, w.schema); err != nil {
						return err
					}
					schemas[sk] = true
				}
				if _, err := s.exec(ctx, w.create); err != nil {
					return err
				}
				made[keys[j]] = w.cols
			}
			var err error
			cols, err = describeQuery(ctx, s, p.Query)
			return err
		}()
		if stmtErr != nil {
			if ctx.Err() != nil {
				return stmtErr // the batch is cancelled, not this query
			}
			out[i].Err = fail(op, object, stmtErr)
			if err := end(); err != nil {
				return err
			}
			continue
		}
		out[i].Columns = cols
	}
	return nil
}

func standInTables(p warehouse.DescribeParams) []warehouse.Table {
	ts := make([]warehouse.Table, len(p.StandIns))
	for i, st := range p.StandIns {
		ts[i] = st.Table
	}
	return ts
}
