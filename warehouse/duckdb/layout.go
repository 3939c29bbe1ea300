package duckdb

import (
	"context"
	"errors"
	"strings"

	"github.com/gapless-dev/gapless/warehouse"
)

// CheckLayout: DuckDB registers table and column comments; it has no
// partitions or clustering (partitioned_by and clustered_by are noted as
// not applied), and no table properties or formats, which are refused by
// name: ignoring one could change what the user relies on.
func (e *Engine) CheckLayout(l warehouse.Layout) ([]string, error) {
	var notes []string
	if len(l.PartitionedBy) > 0 {
		notes = append(notes, "partitioned_by ("+strings.Join(l.PartitionedBy, ", ")+") is not applied on DuckDB: its tables have no partitions")
	}
	if len(l.ClusteredBy) > 0 {
		notes = append(notes, "clustered_by ("+strings.Join(l.ClusteredBy, ", ")+") is not applied on DuckDB: its tables have no clustering")
	}
	if len(l.Properties) > 0 {
		return notes, &warehouse.LayoutError{Part: "physical property " + l.Properties[0].Key, Err: warehouse.ErrUnsupportedLayout,
			Why: "DuckDB tables have no table properties; remove physical_properties for this engine"}
	}
	if l.TableFormat != "" {
		return notes, &warehouse.LayoutError{Part: "table_format " + l.TableFormat, Err: warehouse.ErrUnsupportedLayout,
			Why: "DuckDB has no table formats"}
	}
	if l.Format != "" {
		return notes, &warehouse.LayoutError{Part: "storage_format " + l.Format, Err: warehouse.ErrUnsupportedLayout,
			Why: "DuckDB has no storage formats"}
	}
	return notes, warehouse.CheckComments(warehouse.CommentParams{Comment: l.Comment, Columns: l.ColumnComments})
}

// commentsOf are l's comments as statements on t.
func commentsOf(t warehouse.Table, l warehouse.Layout) []string {
	return warehouse.CommentStatements(warehouse.CommentParams{Table: t, Comment: l.Comment, Columns: l.ColumnComments},
		quoteTable, quoteIdent)
}

// execAll runs stmts in order on s, stopping at the first failure.
func execAll(ctx context.Context, s *session, stmts []string) error {
	for _, q := range stmts {
		if _, err := s.exec(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// SetComments registers p's comments in one transaction.
func (e *Engine) SetComments(ctx context.Context, p warehouse.CommentParams) error {
	const op = "comment on"
	object := p.Table.String()
	if err := checkTable(p.Table); err != nil {
		return fail(op, object, err)
	}
	if err := warehouse.CheckComments(p); err != nil {
		return fail(op, object, err)
	}
	stmts := warehouse.CommentStatements(p, quoteTable, quoteIdent)
	if len(stmts) == 0 {
		return nil
	}
	return fail(op, object, e.write(ctx, func(s *session) error {
		return s.inTx(ctx, func() error { return execAll(ctx, s, stmts) })
	}))
}

// commentMade registers comments on t, just made by s, dropping t again
// when they fail, so that a failed create leaves nothing behind.
func commentMade(ctx context.Context, s *session, t warehouse.Table, comments []string) error {
	err := execAll(ctx, s, comments)
	if err == nil {
		return nil
	}
	if _, derr := s.exec(ctx, "DROP TABLE IF EXISTS "+quoteTable(t)); derr != nil {
		return errors.Join(err, derr)
	}
	return err
}
