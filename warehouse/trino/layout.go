package trino

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/gapless-dev/gapless/warehouse"
)

// icebergProperties are the Iceberg connector's table properties in Trino
// 476 (system.metadata.table_properties; TestIcebergPropertiesAreTrinos
// checks the list against the server). partitioning and sorted_by come
// from partitioned_by and clustered_by, format from storage_format.
var icebergProperties = []string{
	"data_location", "extra_properties", "format", "format_version", "location",
	"max_commit_retry", "object_store_layout_enabled", "orc_bloom_filter_columns",
	"orc_bloom_filter_fpp", "parquet_bloom_filter_columns", "partitioning", "sorted_by",
}

// icebergFormats are the file formats an Iceberg table of Trino takes.
var icebergFormats = []string{"parquet", "orc", "avro"}

var (
	// partitionField is one Iceberg partition field as Trino spells it: a
	// column, or a transform of one.
	partitionField = regexp.MustCompile(`(?i)^(?:[a-z_][a-z0-9_]*|(?:year|month|day|hour|void)\(\s*[a-z_][a-z0-9_]*\s*\)|(?:bucket|truncate)\(\s*[a-z_][a-z0-9_]*\s*,\s*[0-9]+\s*\))$`)
	// identityField is a partition field that is a bare column: Iceberg's
	// identity transform.
	identityField = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// sortField is one sorted_by field: a column, optionally ordered.
	sortField = regexp.MustCompile(`(?i)^[a-z_][a-z0-9_]*(?:\s+(?:asc|desc))?(?:\s+nulls\s+(?:first|last))?$`)
	// propertyValue is a property value gapless passes on: a string
	// without quotes inside, a number, a boolean, or an ARRAY of strings.
	propertyValue = regexp.MustCompile(`(?i)^(?:'[^']*'|-?[0-9]+(?:\.[0-9]+)?|true|false|ARRAY\s*\[\s*(?:'[^']*'(?:\s*,\s*'[^']*')*)?\s*\])$`)
)

// CheckLayout: Trino's tables are Iceberg tables, so everything applies:
// partitioned_by becomes partitioning (Iceberg transforms: day(ts),
// bucket(id, 16), ...; an identity partition, a bare column, is refused:
// concurrent writers of one interval could both commit, see
// trinodb/trino#31072), clustered_by becomes sorted_by,
// storage_format becomes format, physical properties are passed on when
// they are Iceberg table properties, and comments are registered. It
// refuses by name what Trino would refuse or what is not Iceberg's.
func (e *Engine) CheckLayout(l warehouse.Layout) ([]string, error) {
	refuse := func(part, why string, args ...any) ([]string, error) {
		return nil, &warehouse.LayoutError{Part: part, Err: warehouse.ErrUnsupportedLayout, Why: fmt.Sprintf(why, args...)}
	}
	for _, f := range l.PartitionedBy {
		f = strings.TrimSpace(f)
		if !partitionField.MatchString(f) {
			return refuse("partitioned_by "+f, "not an Iceberg partition field (a column, or year|month|day|hour|void(col), bucket(col, n), truncate(col, n))")
		}
		if identityField.MatchString(f) {
			return refuse("partitioned_by "+f, "an identity partition is refused on Trino: two processes writing one interval of an "+
				"identity-partitioned Iceberg table at once can both commit (trinodb/trino#31072; TestLayoutRacingWritersOnPartitionedTables "+
				"saw an hour written twice), duplicating its rows; partition by a transform instead: day(ts), hour(ts), truncate(%s, n), bucket(%s, n)", f, f)
		}
	}
	for _, f := range l.ClusteredBy {
		if !sortField.MatchString(strings.TrimSpace(f)) {
			return refuse("clustered_by "+f, "not a sort field (a column, optionally ASC|DESC and NULLS FIRST|LAST)")
		}
	}
	if l.TableFormat != "" && l.TableFormat != "iceberg" {
		return refuse("table_format "+l.TableFormat, "gapless's Trino tables are Iceberg tables")
	}
	if l.Format != "" && !slices.Contains(icebergFormats, l.Format) {
		return refuse("storage_format "+l.Format, "Iceberg tables take %s", strings.Join(icebergFormats, ", "))
	}
	for _, p := range l.Properties {
		key := strings.ToLower(p.Key)
		switch {
		case !slices.Contains(icebergProperties, key):
			return refuse("physical property "+p.Key, "not a table property of Trino's Iceberg connector (%s)", strings.Join(icebergProperties, ", "))
		case key == "partitioning":
			// Through partitioned_by only, where identity fields are
			// refused (see above).
			return refuse("physical property "+p.Key, "write partitioned_by instead")
		case key == "sorted_by" && len(l.ClusteredBy) > 0,
			key == "format" && l.Format != "":
			return refuse("physical property "+p.Key, "set twice: also by partitioned_by, clustered_by or storage_format")
		case !propertyValue.MatchString(strings.TrimSpace(p.Value)):
			return refuse("physical property "+p.Key, "value %s is not a string, number, boolean or ARRAY of strings", p.Value)
		}
	}
	return nil, warehouse.CheckComments(warehouse.CommentParams{Comment: l.Comment, Columns: l.ColumnComments})
}

// withClause is " WITH (...)" of l's table properties, or "".
func withClause(l warehouse.Layout) string {
	var parts []string
	array := func(items []string) string {
		q := make([]string, len(items))
		for i, it := range items {
			q[i] = warehouse.QuoteString(strings.TrimSpace(it))
		}
		return "ARRAY[" + strings.Join(q, ", ") + "]"
	}
	if len(l.PartitionedBy) > 0 {
		parts = append(parts, "partitioning = "+array(l.PartitionedBy))
	}
	if len(l.ClusteredBy) > 0 {
		parts = append(parts, "sorted_by = "+array(l.ClusteredBy))
	}
	if l.Format != "" {
		parts = append(parts, "format = "+warehouse.QuoteString(strings.ToUpper(l.Format)))
	}
	for _, p := range l.Properties {
		parts = append(parts, strings.ToLower(p.Key)+" = "+strings.TrimSpace(p.Value))
	}
	if len(parts) == 0 {
		return ""
	}
	return " WITH (" + strings.Join(parts, ", ") + ")"
}

// tableComment is " COMMENT '...'" for l's table comment, or "".
func tableComment(l warehouse.Layout) string {
	if l.Comment == "" {
		return ""
	}
	return " COMMENT " + warehouse.QuoteString(l.Comment)
}

// columnComments are l's column comments as statements on t.
func columnComments(t warehouse.Table, l warehouse.Layout) []string {
	return warehouse.CommentStatements(warehouse.CommentParams{Table: t, Columns: l.ColumnComments}, quoteTable, quoteIdent)
}

// execAll runs stmts one after the other (Trino has no transactions over
// DDL), stopping at the first failure.
func (e *Engine) execAll(ctx context.Context, stmts []string) (string, error) {
	for _, s := range stmts {
		if _, err := e.exec(ctx, s); err != nil {
			return s, err
		}
	}
	return "", nil
}

// SetComments registers p's comments, one statement each (Trino commits
// each on its own; repeating the call completes a partial one).
func (e *Engine) SetComments(ctx context.Context, p warehouse.CommentParams) error {
	const op = "comment on"
	obj := p.Table.String()
	if err := e.begin(ctx); err != nil {
		return fail(op, obj, "", err)
	}
	kind := kindTable
	if p.View {
		kind = kindView
	}
	if err := checkQualified(kind, p.Table); err != nil {
		return fail(op, obj, "", err)
	}
	if err := warehouse.CheckComments(p); err != nil {
		return fail(op, obj, "", err)
	}
	unlock, err := e.locks.lock(ctx, tableKey(p.Table))
	if err != nil {
		return fail(op, obj, "", err)
	}
	defer unlock()
	stmt, err := e.execAll(ctx, warehouse.CommentStatements(p, quoteTable, quoteIdent))
	return fail(op, obj, stmt, err)
}

// commentMade registers comments on t, just made, dropping t again when
// they fail, so that a failed create leaves nothing behind. It returns the
// statement that failed.
func (e *Engine) commentMade(ctx context.Context, t warehouse.Table, comments []string) (string, error) {
	stmt, err := e.execAll(ctx, comments)
	if err == nil {
		return "", nil
	}
	if _, derr := e.exec(ctx, "DROP TABLE IF EXISTS "+quoteTable(t)); derr != nil {
		return stmt, errors.Join(err, derr)
	}
	return stmt, err
}
