package duckdb

import (
	"context"
	"fmt"

	"github.com/gapless-dev/gapless/warehouse"
)

// columnNames returns t's column names in order (Type left empty) by
// describing `SELECT * FROM t LIMIT 0`: the binder resolves the quoted name
// with DuckDB's own rule and no catalog function is scanned. It is the write
// path's lookup (InsertInterval and MergeByKey ask on every batch): about
// 0.3 ms against 2.5 ms for duckdb_columns() and 9 ms for
// information_schema.columns. It runs on s, inside the caller's transaction.
func columnNames(ctx context.Context, s *session, t warehouse.Table) ([]warehouse.Column, error) {
	q := "SELECT * FROM " + quoteTable(t) + " LIMIT 0"
	res, err := s.query(ctx, q)
	if err != nil {
		return nil, err
	}
	if len(res.Columns) == 0 {
		return nil, &stmtError{sql: q, err: fmt.Errorf("table or view %s has no columns", t)}
	}
	cols := make([]warehouse.Column, len(res.Columns))
	for i, name := range res.Columns {
		cols[i] = warehouse.Column{Name: name}
	}
	return cols, nil
}
