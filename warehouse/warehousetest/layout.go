package warehousetest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
)

var layoutScenarios = []scenario{
	{"CommentsAreRegisteredAndSurviveARebuild", testLayoutComments},
	{"SetCommentsReplacesAndRepeats", testLayoutSetComments},
	{"UnknownPropertyIsRefusedByName", testLayoutUnknownProperty},
	{"PartitionsAreAppliedOrNoted", testLayoutPartitions},
	{"BadCommentLeavesNoTable", testLayoutBadCommentLeavesNothing},
}

// comments reads tbl's table comment and its column comments (columns
// without one left out), by the engine's own catalog.
func (f *fixture) comments(tbl warehouse.Table, view bool) (string, map[string]string) {
	f.t.Helper()
	var tableRows, colRows [][]any
	switch f.dialect {
	case duckDB:
		rel := "duckdb_tables()"
		if view {
			rel = "duckdb_views()"
		}
		name := "table_name"
		if view {
			name = "view_name"
		}
		tableRows = f.query(fmt.Sprintf("SELECT comment FROM %s WHERE schema_name = '%s' AND %s = '%s'", rel, tbl.Schema, name, tbl.Name))
		colRows = f.query(fmt.Sprintf("SELECT column_name, comment FROM duckdb_columns() WHERE schema_name = '%s' AND table_name = '%s'", tbl.Schema, tbl.Name))
	case postgres:
		reg := fmt.Sprintf("to_regclass('%s')", f.q(tbl))
		tableRows = f.query("SELECT obj_description(" + reg + ", 'pg_class')")
		colRows = f.query("SELECT attname::text, col_description(attrelid, attnum) FROM pg_attribute WHERE attrelid = " + reg + " AND attnum > 0 AND NOT attisdropped")
	case trino:
		tableRows = f.query(fmt.Sprintf("SELECT comment FROM system.metadata.table_comments WHERE catalog_name = current_catalog AND schema_name = '%s' AND table_name = '%s'", tbl.Schema, tbl.Name))
		res, err := f.e.Query(f.ctx, "SHOW COLUMNS FROM "+f.q(tbl))
		require.NoError(f.t, err)
		for _, r := range NormalizeRows(res.Rows) {
			colRows = append(colRows, []any{r[0], r[3]})
		}
	}
	require.Len(f.t, tableRows, 1, "the comment of %s", tbl)
	table, _ := tableRows[0][0].(string)
	cols := map[string]string{}
	for _, r := range colRows {
		if c, ok := r[1].(string); ok && c != "" {
			cols[r[0].(string)] = c
		}
	}
	return table, cols
}

// Scenario: a model's description and column descriptions are registered
// on its table when it is made, and still there after the table is rebuilt
// (a FULL model's every run), quotes and all.
func testLayoutComments(t *testing.T, f *fixture) {
	tbl := f.table("described")
	layout := warehouse.Layout{Comment: "Revenue by customer; it's daily", ColumnComments: []warehouse.ColumnComment{
		{Column: "id", Comment: "the customer's key"}, {Column: "v", Comment: "a tag"},
	}}
	require.NoError(t, f.e.CreateTableAs(f.ctx, warehouse.CreateTableAsParams{Table: tbl, Query: f.idsAndTag(1, 3, "old"), Layout: layout}))
	want := map[string]string{"id": "the customer's key", "v": "a tag"}
	comment, cols := f.comments(tbl, false)
	require.Equal(t, layout.Comment, comment)
	require.Equal(t, want, cols)

	require.NoError(t, f.e.ReplaceTable(f.ctx, warehouse.ReplaceTableParams{Table: tbl, Query: f.idsAndTag(4, 5, "new"), Layout: layout}))
	require.Equal(t, [][]any{row(4, "new"), row(5, "new")}, f.rowsOf(tbl, "id, v", "id"))
	comment, cols = f.comments(tbl, false)
	require.Equal(t, layout.Comment, comment, "the table comment after a rebuild")
	require.Equal(t, want, cols, "the column comments after a rebuild")

	made := f.table("made")
	require.NoError(t, f.e.CreateTable(f.ctx, warehouse.CreateTableParams{Table: made,
		Columns: []warehouse.Column{{Name: "id", Type: "BIGINT"}}, Layout: warehouse.Layout{Comment: "made", ColumnComments: layout.ColumnComments[:1]}}))
	comment, cols = f.comments(made, false)
	require.Equal(t, "made", comment)
	require.Equal(t, map[string]string{"id": "the customer's key"}, cols)
}

// Scenario: a description changes (a metadata-only change): the comments
// of the existing table and view are registered again, replacing the old
// ones, and registering them twice is harmless.
func testLayoutSetComments(t *testing.T, f *fixture) {
	tbl := f.fullTable()
	for range 2 {
		require.NoError(t, f.e.SetComments(f.ctx, warehouse.CommentParams{Table: tbl, Comment: "first",
			Columns: []warehouse.ColumnComment{{Column: "v", Comment: "one"}}}))
	}
	require.NoError(t, f.e.SetComments(f.ctx, warehouse.CommentParams{Table: tbl, Comment: "second",
		Columns: []warehouse.ColumnComment{{Column: "v", Comment: "two"}}}))
	comment, cols := f.comments(tbl, false)
	require.Equal(t, "second", comment)
	require.Equal(t, map[string]string{"v": "two"}, cols)

	view := f.table("described_view")
	require.NoError(t, f.e.CreateOrReplaceView(f.ctx, warehouse.ViewParams{View: view, Query: "SELECT id, v FROM " + f.q(tbl)}))
	require.NoError(t, f.e.SetComments(f.ctx, warehouse.CommentParams{Table: view, View: true, Comment: "served"}))
	comment, _ = f.comments(view, true)
	require.Equal(t, "served", comment)

	err := f.e.SetComments(f.ctx, warehouse.CommentParams{Table: tbl, Columns: []warehouse.ColumnComment{{Column: "no_such_column", Comment: "x"}}})
	require.Error(t, err, "a comment on a column the table lacks")
}

// Scenario: a model asks for a table property no engine has. CheckLayout
// refuses it by name before anything is made, and CreateTable,
// CreateTableAs and ReplaceTable refuse it the same way, making nothing.
func testLayoutUnknownProperty(t *testing.T, f *fixture) {
	layout := warehouse.Layout{Properties: []warehouse.Property{{Key: "no_such_property", Value: "1"}}}
	_, err := f.e.CheckLayout(layout)
	requireLayoutRefused(t, err, "no_such_property")
	tbl := f.table("refused")
	requireLayoutRefused(t, f.e.CreateTable(f.ctx, warehouse.CreateTableParams{Table: tbl,
		Columns: []warehouse.Column{{Name: "id", Type: "BIGINT"}}, Layout: layout}), "no_such_property")
	requireLayoutRefused(t, f.e.CreateTableAs(f.ctx, warehouse.CreateTableAsParams{Table: tbl, Query: f.idsAndTag(1, 2, "x"), Layout: layout}), "no_such_property")
	requireLayoutRefused(t, f.e.ReplaceTable(f.ctx, warehouse.ReplaceTableParams{Table: tbl, Query: f.idsAndTag(1, 2, "x"), Layout: layout}), "no_such_property")
	require.Empty(t, f.objects(f.schema))
}

func requireLayoutRefused(t *testing.T, err error, name string) {
	t.Helper()
	require.ErrorIs(t, err, warehouse.ErrUnsupportedLayout)
	var le *warehouse.LayoutError
	require.True(t, errors.As(err, &le), "a *warehouse.LayoutError, got %T", err)
	require.Contains(t, le.Part, name)
}

// Scenario: a model is partitioned by a bucket of its key and clustered by
// the key. An engine with partitions applies them (CheckLayout notes
// nothing); one without says so in a note naming partitioned_by and
// clustered_by. Either way the table is made, rebuilt and holds the same
// rows.
func testLayoutPartitions(t *testing.T, f *fixture) {
	layout := warehouse.Layout{PartitionedBy: []string{"bucket(id, 4)"}, ClusteredBy: []string{"id"}}
	notes, err := f.e.CheckLayout(layout)
	require.NoError(t, err)
	if len(notes) > 0 {
		require.Len(t, notes, 2)
		require.Contains(t, notes[0], "partitioned_by (bucket(id, 4))")
		require.Contains(t, notes[1], "clustered_by (id)")
	}
	tbl := f.table("partitioned")
	require.NoError(t, f.e.CreateTableAs(f.ctx, warehouse.CreateTableAsParams{Table: tbl, Query: f.idsAndTag(1, 3, "a"), WithData: true, Layout: layout}))
	require.NoError(t, f.e.ReplaceTable(f.ctx, warehouse.ReplaceTableParams{Table: tbl, Query: f.idsAndTag(2, 3, "b"), Layout: layout}))
	require.Equal(t, [][]any{row(2, "b"), row(3, "b")}, f.rowsOf(tbl, "id, v", "id"))
}

// Scenario: a column comment names a column the query lacks (a model
// whose description went stale). CreateTable and CreateTableAs fail and
// leave no table behind: a re-run makes it again rather than finding it
// made without its comments.
func testLayoutBadCommentLeavesNothing(t *testing.T, f *fixture) {
	layout := warehouse.Layout{Comment: "t", ColumnComments: []warehouse.ColumnComment{{Column: "no_such_column", Comment: "x"}}}
	tbl := f.table("stale")
	require.Error(t, f.e.CreateTableAs(f.ctx, warehouse.CreateTableAsParams{Table: tbl, Query: f.idsAndTag(1, 2, "x"), WithData: true, Layout: layout}))
	require.Error(t, f.e.CreateTableAs(f.ctx, warehouse.CreateTableAsParams{Table: tbl, Query: f.idsAndTag(1, 2, "x"), Layout: layout,
		Columns: []warehouse.Column{{Name: "id", Type: "BIGINT"}, {Name: "v", Type: "VARCHAR"}}}))
	require.Error(t, f.e.CreateTable(f.ctx, warehouse.CreateTableParams{Table: tbl, Columns: []warehouse.Column{{Name: "id", Type: "BIGINT"}}, Layout: layout}))
	require.Empty(t, f.objects(f.schema))
}
