package warehouse

import (
	"context"
	"errors"
	"strings"
)

// ErrUnsupportedLayout: a Layout asks what the engine cannot do and that
// gapless may not ignore (a physical property on an engine without table
// properties, a table format the engine does not have, a property the
// engine does not know). Nothing was sent to the engine.
var ErrUnsupportedLayout = errors.New("unsupported table layout")

// Layout is how a model's physical table is laid out and described: its
// partitioned_by, clustered_by, physical_properties and table_format, and
// the comments registered on it. The zero Layout asks nothing, and every
// engine makes the same table with it as without.
//
// An engine applies each part it has (see Engine.CheckLayout), when the
// table is made (CreateTable, CreateTableAs) and again when it is rebuilt
// (ReplaceTable): a rebuilt table keeps its partitioning, properties and
// comments.
type Layout struct {
	// PartitionedBy and ClusteredBy are SQL expressions as the model wrote
	// them: a column name, or a transform such as day(ts).
	PartitionedBy []string
	ClusteredBy   []string
	// Properties are engine table properties, values as SQL text.
	Properties []Property
	// TableFormat is the table format asked (table_format: iceberg,
	// delta, ...) and Format the file format (storage_format: parquet,
	// orc, ...), lower case; "" for the engine's default.
	TableFormat string
	Format      string
	// Comment is the table's comment; ColumnComments its columns'. A
	// column comment naming a column the table lacks fails the call with
	// ErrInvalidArgument.
	Comment        string
	ColumnComments []ColumnComment
}

// Property is one table property: Key a plain name, Value SQL text.
type Property struct {
	Key   string
	Value string
}

// ColumnComment is one column's comment.
type ColumnComment struct {
	Column  string
	Comment string
}

// Shapes reports whether l asks anything of the table's shape (partitions,
// clustering, properties, format), as opposed to only comments.
func (l Layout) Shapes() bool {
	return len(l.PartitionedBy) > 0 || len(l.ClusteredBy) > 0 || len(l.Properties) > 0 || l.Format != "" || l.TableFormat != ""
}

// HasComments reports whether l registers any comment.
func (l Layout) HasComments() bool {
	return l.Comment != "" || len(l.ColumnComments) > 0
}

// CommentParams registers comments on an existing table (View false) or
// view: Comment on the object, Columns on its columns. An empty Comment
// leaves the object's comment as it is. It replaces what an earlier call
// registered for the same object or column, so it is safe to repeat.
type CommentParams struct {
	Table   Table
	View    bool
	Comment string
	Columns []ColumnComment
}

// Commenter is the part of Engine that registers comments; engines
// implement it with COMMENT ON.
type Commenter interface {
	SetComments(ctx context.Context, p CommentParams) error
}

// QuoteString renders s as a standard SQL string literal (a quote doubled),
// which DuckDB, PostgreSQL (standard_conforming_strings, on since 9.1) and
// Trino all read back as s. It refuses nothing; a NUL byte is the caller's
// to reject.
func QuoteString(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// CommentStatements are the COMMENT ON statements of p, in the spelling
// DuckDB, PostgreSQL and Trino share, with names quoted by quoteTable and
// quoteIdent. Nothing for nothing to register.
func CommentStatements(p CommentParams, quoteTable func(Table) string, quoteIdent func(string) string) []string {
	var out []string
	kind := "TABLE"
	if p.View {
		kind = "VIEW"
	}
	if p.Comment != "" {
		out = append(out, "COMMENT ON "+kind+" "+quoteTable(p.Table)+" IS "+QuoteString(p.Comment))
	}
	for _, c := range p.Columns {
		out = append(out, "COMMENT ON COLUMN "+quoteTable(p.Table)+"."+quoteIdent(c.Column)+" IS "+QuoteString(c.Comment))
	}
	return out
}

// CheckComments refuses comments that no engine can register: a NUL byte,
// an empty or repeated column name.
func CheckComments(p CommentParams) error {
	if strings.ContainsRune(p.Comment, 0) {
		return &LayoutError{Part: "comment", Err: ErrInvalidArgument, Why: "a comment may not contain a NUL byte"}
	}
	seen := map[string]bool{}
	for _, c := range p.Columns {
		if c.Column == "" || seen[c.Column] || strings.ContainsRune(c.Comment+c.Column, 0) {
			return &LayoutError{Part: "comment on column " + c.Column, Err: ErrInvalidArgument,
				Why: "column comments need distinct, non-empty column names and no NUL byte"}
		}
		seen[c.Column] = true
	}
	return nil
}

// LayoutError names the part of a Layout an engine refuses and why. It
// wraps ErrUnsupportedLayout or ErrInvalidArgument.
type LayoutError struct {
	Part string // e.g. "physical property fillfactor", "table_format delta"
	Why  string
	Err  error
}

func (e *LayoutError) Error() string { return e.Part + ": " + e.Why }

func (e *LayoutError) Unwrap() error { return e.Err }
