package trino_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
	"github.com/gapless-dev/gapless/warehouse/trino"
)

// Scenario: the Iceberg table properties gapless passes on are the ones the
// Trino server has: every property CheckLayout accepts is in the catalog's
// system.metadata.table_properties, and every property there is accepted.
func TestLayoutIcebergPropertiesAreTrinos(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	rows := query(t, e, "SELECT property_name FROM system.metadata.table_properties WHERE catalog_name = current_catalog ORDER BY 1")
	require.NotEmpty(t, rows)
	var server []string
	for _, r := range rows {
		server = append(server, r[0].(string))
	}
	require.True(t, slices.Contains(server, "partitioning") && slices.Contains(server, "sorted_by"), "%v", server)
	for _, p := range server {
		_, err := e.CheckLayout(warehouse.Layout{Properties: []warehouse.Property{{Key: p, Value: "'x'"}}})
		if p == "partitioning" {
			require.ErrorContains(t, err, "write partitioned_by instead") // where identity fields are refused
			continue
		}
		require.NoError(t, err, "property %s of the server", p)
	}
	_, err := e.CheckLayout(warehouse.Layout{Properties: []warehouse.Property{{Key: "fillfactor", Value: "70"}}})
	require.ErrorIs(t, err, warehouse.ErrUnsupportedLayout)
}

// Scenario: a model partitioned by day(ts) and truncate(region, 2), clustered by id,
// stored as ORC with format_version 2: the Iceberg table has exactly that
// partitioning, sort order, format and version, and keeps them when a FULL
// model's rebuild replaces it. An expression Iceberg has no transform for,
// or a table format other than Iceberg, is refused by name before any DDL.
func TestLayoutIcebergTableIsPartitionedAndSorted(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	ctx := t.Context()
	require.NoError(t, e.CreateSchema(ctx, "wt"))
	layout := warehouse.Layout{
		PartitionedBy: []string{"day(ts)", "truncate(region, 2)"},
		ClusteredBy:   []string{"id DESC"},
		Format:        "orc",
		TableFormat:   "iceberg",
		Properties:    []warehouse.Property{{Key: "format_version", Value: "2"}},
	}
	notes, err := e.CheckLayout(layout)
	require.NoError(t, err)
	require.Empty(t, notes)
	tbl := table("sales")
	q := "SELECT TIMESTAMP '2024-01-01 10:00:00' + g * INTERVAL '1' DAY AS ts, CAST(g AS BIGINT) AS id, IF(g % 2 = 0, 'eu', 'us') AS region FROM UNNEST(sequence(0, 5)) AS s(g)"
	require.NoError(t, e.CreateTableAs(ctx, warehouse.CreateTableAsParams{Table: tbl, Query: q, WithData: true, Layout: layout}))
	requireIcebergLayout := func(when string) {
		t.Helper()
		ddl := query(t, e, "SHOW CREATE TABLE "+e.QuoteTable(tbl))[0][0].(string)
		require.Contains(t, ddl, "partitioning = ARRAY['day(ts)','truncate(region, 2)']", when)
		require.Contains(t, ddl, "sorted_by = ARRAY['id DESC NULLS LAST']", when)
		require.Contains(t, ddl, "format = 'ORC'", when)
		require.Contains(t, ddl, "format_version = 2", when)
		parts := query(t, e, `SELECT count(*) FROM `+e.QuoteTable(warehouse.Table{Schema: "wt", Name: "sales$partitions"}))
		require.Equal(t, [][]any{{int64(6)}}, parts, when) // six days, each one region
	}
	requireIcebergLayout("after the create")
	require.NoError(t, e.ReplaceTable(ctx, warehouse.ReplaceTableParams{Table: tbl, Query: q, Layout: layout}))
	requireIcebergLayout("after a rebuild")

	for _, bad := range []warehouse.Layout{
		{PartitionedBy: []string{"upper(region)"}},
		{ClusteredBy: []string{"id + 1"}},
		{TableFormat: "delta"},
		{Format: "csv"},
		{Properties: []warehouse.Property{{Key: "format_version", Value: "2); DROP TABLE x; --"}}},
		{PartitionedBy: []string{"region"}}, // identity: see TestLayoutRacingWritersOnPartitionedTables
		{Properties: []warehouse.Property{{Key: "partitioning", Value: "ARRAY['id']"}}},
	} {
		err := e.CreateTableAs(ctx, warehouse.CreateTableAsParams{Table: table("refused"), Query: q, Layout: bad})
		require.ErrorIs(t, err, warehouse.ErrUnsupportedLayout, "%+v", bad)
	}
	exists, err := e.TableExists(ctx, table("refused"))
	require.NoError(t, err)
	require.False(t, exists)
}

// Scenario: TestRacingWritersNeverLoseABatch on partitioned tables
// (trinodb/trino#31072: concurrent MERGEs on an identity-partitioned
// Iceberg table can both commit). Two processes and several workers write
// disjoint hours and the same hour at once, on a table partitioned by
// hour(ts), by truncate and by bucket of the batch's tag (each writer its
// own partition). Every hour must end with exactly one writer's rows, each
// once.
//
// Partitioned by the tag itself (identity), this test failed in 2 of 3
// runs: both writers of an hour committed, and the hour held 20 rows
// instead of 10 (trinodb/trino#31072: the conflict check looks only at
// the partitions a MERGE writes). So gapless refuses identity partitions
// on Trino, on the time column too (rows of one interval re-run with other
// times land in other partitions).
func TestLayoutRacingWritersOnPartitionedTables(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	for _, identity := range []string{"v", "ts"} {
		_, err := e.CheckLayout(warehouse.Layout{PartitionedBy: []string{identity}})
		require.ErrorIs(t, err, warehouse.ErrUnsupportedLayout)
		require.ErrorContains(t, err, "trinodb/trino#31072")
	}
	for _, part := range []string{"hour(ts)", "truncate(v, 1)", "bucket(v, 4)"} {
		t.Run(strings.NewReplacer("(", "_", ")", "", " ", "", ",", "_").Replace(part), func(t *testing.T) {
			t.Parallel()
			url := pooledCatalog(t)
			open := func() *trino.Engine {
				e, err := trino.Open(t.Context(), url)
				require.NoError(t, err)
				t.Cleanup(func() { _ = e.Close() })
				return e
			}
			a, b := open(), open()
			require.NoError(t, a.CreateSchema(t.Context(), "wt"))
			tbl := table("events")
			require.NoError(t, a.CreateTable(t.Context(), warehouse.CreateTableParams{Table: tbl, Columns: []warehouse.Column{
				{Name: "ts", Type: "TIMESTAMP"}, {Name: "id", Type: "BIGINT"}, {Name: "v", Type: "TEXT"},
			}, Layout: warehouse.Layout{PartitionedBy: []string{part}}}))
			raceWriters(t, a, b, tbl, 3, 10, "partitioned by "+part)
		})
	}
}
