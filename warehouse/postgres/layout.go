package postgres

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/gapless-dev/gapless/warehouse"
)

// storageParameters are the table storage parameters PostgreSQL accepts in
// CREATE TABLE ... WITH (...) (PostgreSQL 14-17's list), toast.* aside.
var storageParameters = []string{
	"fillfactor", "toast_tuple_target", "parallel_workers", "autovacuum_enabled",
	"vacuum_index_cleanup", "vacuum_truncate", "autovacuum_vacuum_threshold",
	"autovacuum_vacuum_scale_factor", "autovacuum_vacuum_insert_threshold",
	"autovacuum_vacuum_insert_scale_factor", "autovacuum_analyze_threshold",
	"autovacuum_analyze_scale_factor", "autovacuum_vacuum_cost_delay",
	"autovacuum_vacuum_cost_limit", "autovacuum_freeze_min_age", "autovacuum_freeze_max_age",
	"autovacuum_freeze_table_age", "autovacuum_multixact_freeze_min_age",
	"autovacuum_multixact_freeze_max_age", "autovacuum_multixact_freeze_table_age",
	"log_autovacuum_min_duration", "user_catalog_table",
}

// plainValue is a storage parameter value PostgreSQL takes: a number, a
// word (on, off, true, auto) or a string without quotes inside.
var plainValue = regexp.MustCompile(`^(?:[A-Za-z0-9_.+-]+|'[^']*')$`)

// CheckLayout: PostgreSQL applies table comments and storage parameters
// (WITH (fillfactor = 70)); partitioned_by and clustered_by are not
// applied (declarative partitioning would make a partitioned table, whose
// semantics differ: a row outside every partition is refused), and a
// table format is refused.
func (e *Engine) CheckLayout(l warehouse.Layout) ([]string, error) {
	var notes []string
	if len(l.PartitionedBy) > 0 {
		notes = append(notes, "partitioned_by ("+strings.Join(l.PartitionedBy, ", ")+") is not applied on PostgreSQL: gapless makes plain tables (declarative partitioning would change what the table accepts)")
	}
	if len(l.ClusteredBy) > 0 {
		notes = append(notes, "clustered_by ("+strings.Join(l.ClusteredBy, ", ")+") is not applied on PostgreSQL: it has no clustering kept on write")
	}
	if l.TableFormat != "" {
		return notes, &warehouse.LayoutError{Part: "table_format " + l.TableFormat, Err: warehouse.ErrUnsupportedLayout,
			Why: "PostgreSQL has no table formats"}
	}
	if l.Format != "" {
		return notes, &warehouse.LayoutError{Part: "storage_format " + l.Format, Err: warehouse.ErrUnsupportedLayout,
			Why: "PostgreSQL has no table formats"}
	}
	for _, p := range l.Properties {
		key := strings.ToLower(p.Key)
		if !slices.Contains(storageParameters, key) && !strings.HasPrefix(key, "toast.") {
			return notes, &warehouse.LayoutError{Part: "physical property " + p.Key, Err: warehouse.ErrUnsupportedLayout,
				Why: "not a PostgreSQL table storage parameter (" + strings.Join(storageParameters[:4], ", ") + ", autovacuum_*, toast.*, ...)"}
		}
		if !plainValue.MatchString(strings.TrimSpace(p.Value)) {
			return notes, &warehouse.LayoutError{Part: "physical property " + p.Key, Err: warehouse.ErrUnsupportedLayout,
				Why: fmt.Sprintf("value %s is not a number, word or plain string", p.Value)}
		}
	}
	return notes, warehouse.CheckComments(warehouse.CommentParams{Comment: l.Comment, Columns: l.ColumnComments})
}

// withClause is " WITH (k = v, ...)" for l's storage parameters, or "".
func withClause(l warehouse.Layout) string {
	if len(l.Properties) == 0 {
		return ""
	}
	parts := make([]string, len(l.Properties))
	for i, p := range l.Properties {
		parts[i] = strings.ToLower(p.Key) + " = " + strings.TrimSpace(p.Value)
	}
	return " WITH (" + strings.Join(parts, ", ") + ")"
}

// commentsOf are l's comments as statements on t.
func commentsOf(t warehouse.Table, l warehouse.Layout) []string {
	return warehouse.CommentStatements(warehouse.CommentParams{Table: t, Comment: l.Comment, Columns: l.ColumnComments},
		quoteTable, quoteIdent)
}

// SetComments registers p's comments in one transaction.
func (e *Engine) SetComments(ctx context.Context, p warehouse.CommentParams) error {
	const op = "comment on"
	obj := p.Table.String()
	if err := e.checkQualified(p.Table); err != nil {
		return fail(op, obj, "", err)
	}
	if err := warehouse.CheckComments(p); err != nil {
		return fail(op, obj, "", err)
	}
	stmts := warehouse.CommentStatements(p, quoteTable, quoteIdent)
	if len(stmts) == 0 {
		return nil
	}
	return failStep(op, obj, e.inTx(ctx, func(tx pgx.Tx) error { return execAll(ctx, tx, stmts) }))
}

// execAll runs stmts in order on tx, stopping at the first failure.
func execAll(ctx context.Context, tx pgx.Tx, stmts []string) error {
	for _, s := range stmts {
		if _, err := exec(ctx, tx, s); err != nil {
			return err
		}
	}
	return nil
}
