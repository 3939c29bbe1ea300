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
