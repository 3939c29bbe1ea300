package duckdb

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/gapless-dev/gapless/warehouse"
)

// Describe returns the columns p.Query produces, as DuckDB binds it:
//
//	DESCRIBE SELECT * FROM (query) AS gapless_q
//
// which plans the query and runs none of it. The wrapping is CreateTableAs's,
// so the names and types are those a table made from the query gets.
//
// With stand-ins it takes the write lock and works in one transaction that
// is always rolled back: CREATE SCHEMA IF NOT EXISTS once per schema and
// CREATE TABLE IF NOT EXISTS per stand-in (so a stand-in whose name a table
// or view has is skipped, by DuckDB's rule for names, and no catalog is
// scanned), then the DESCRIBE. DuckDB's
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
	q := "DESCRIBE SELECT * FROM (\n" + body(p.Query) + "\n) AS gapless_q"
	var cols []warehouse.Column
	describe := func(s *session) error {
		res, err := s.query(ctx, q)
		if err != nil {
			return err
		}
		cols, err = describedColumns(res)
		if err != nil {
			return &stmtError{sql: q, err: err}
		}
		return nil
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
			q := "DESCRIBE SELECT * FROM (\n" + body(p.Query) + "\n) AS gapless_q"
			res, err := s.query(ctx, q)
			if err != nil {
				return err
			}
			if cols, err = describedColumns(res); err != nil {
				return &stmtError{sql: q, err: err}
			}
			return nil
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
