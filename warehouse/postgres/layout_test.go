package postgres_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
)

// Scenario: a model sets physical_properties (fillfactor = 70,
// autovacuum_enabled = false) and partitioned_by on PostgreSQL. The
// storage parameters are on the table when it is made and after a FULL
// model's rebuild swaps it; partitioned_by is noted as not applied (the
// table stays a plain one). A parameter PostgreSQL does not have, a value
// that is not a plain literal, or a table format is refused by name.
func TestLayoutStorageParameters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	layout := warehouse.Layout{
		PartitionedBy: []string{"id"},
		Properties:    []warehouse.Property{{Key: "fillfactor", Value: "70"}, {Key: "AUTOVACUUM_ENABLED", Value: "false"}},
	}
	notes, err := b.e.CheckLayout(layout)
	require.NoError(t, err)
	require.Len(t, notes, 1)
	require.Contains(t, notes[0], "partitioned_by (id) is not applied on PostgreSQL")
	options := func() [][]any {
		t.Helper()
		res, err := b.e.Query(b.ctx, "SELECT c.relkind::text, array_to_string(c.reloptions, ',') FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 's' AND c.relname = 't'")
		require.NoError(t, err)
		return res.Rows
	}
	want := [][]any{{"r", "fillfactor=70,autovacuum_enabled=false"}}
	require.NoError(t, b.e.CreateTableAs(b.ctx, warehouse.CreateTableAsParams{Table: tbl("t"), Query: "SELECT 1 AS id", WithData: true, Layout: layout}))
	require.Equal(t, want, options())
	require.NoError(t, b.e.ReplaceTable(b.ctx, warehouse.ReplaceTableParams{Table: tbl("t"), Query: "SELECT 2 AS id", Layout: layout}))
	require.Equal(t, want, options(), "after the swap")

	for _, bad := range []warehouse.Layout{
		{Properties: []warehouse.Property{{Key: "format", Value: "'PARQUET'"}}},
		{Properties: []warehouse.Property{{Key: "fillfactor", Value: "70); DROP TABLE s.t; --"}}},
		{Format: "parquet"},
		{TableFormat: "iceberg"},
	} {
		err := b.e.CreateTable(b.ctx, warehouse.CreateTableParams{Table: tbl("refused"), Columns: []warehouse.Column{{Name: "id", Type: "bigint"}}, Layout: bad})
		require.ErrorIs(t, err, warehouse.ErrUnsupportedLayout, "%+v", bad)
	}
}
