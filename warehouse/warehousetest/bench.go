package warehousetest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
)

// RunBenchmarks measures the operations gapless runs most, each on a fresh
// engine from newEngine (which the benchmark closes):
//
//   - InsertInterval: one hour of 3,600 rows replaced in a table of a day,
//     read from a source table of 86,400 rows (a backfill or scheduler run);
//   - MergeByKey: 1,000 keys (half new) merged into 100,000 rows;
//   - ReplaceTable: a 100,000-row table rebuilt and swapped;
//   - InsertRows: 1,000 seed rows of five columns;
//   - Query: a one-row read with a bound parameter.
func RunBenchmarks(b *testing.B, newEngine func(b *testing.B) warehouse.Engine) {
	b.Run("InsertInterval/hour_of_3600_rows", func(b *testing.B) {
		e, src, dst := benchSetup(b, newEngine)
		ctx := b.Context()
		q := "SELECT ts, id, v FROM " + e.QuoteTable(src)
		for h := range 24 {
			_, err := e.InsertInterval(ctx, warehouse.InsertIntervalParams{Table: dst, TimeColumn: "ts", Start: ts(h, 0, 0), End: ts(h+1, 0, 0), Query: q})
			require.NoError(b, err)
		}
		for i := 0; b.Loop(); i++ {
			h := i % 24
			n, err := e.InsertInterval(ctx, warehouse.InsertIntervalParams{Table: dst, TimeColumn: "ts", Start: ts(h, 0, 0), End: ts(h+1, 0, 0), Query: q})
			require.NoError(b, err)
			require.Equal(b, int64(3600), n)
		}
		b.ReportMetric(3600, "rows/op")
	})

	b.Run("MergeByKey/1000_keys_into_100k", func(b *testing.B) {
		e := newEngine(b)
		b.Cleanup(func() { _ = e.Close() })
		d := dialectOf(b, e)
		ctx := b.Context()
		require.NoError(b, e.CreateSchema(ctx, testSchema))
		tbl := warehouse.Table{Schema: testSchema, Name: "users"}
		require.NoError(b, e.CreateTableAs(ctx, warehouse.CreateTableAsParams{Table: tbl, WithData: true,
			Query: `SELECT CAST(g AS BIGINT) AS id, ` + d.cast("'user'", "TEXT") + ` AS name, CAST(g AS BIGINT) AS score FROM ` + d.series(1, 100000)}))
		for i := 0; b.Loop(); i++ {
			// Keys 99,501..100,500 at i = 0, shifting by 500 each run: half
			// update rows merged before, half are new.
			from := 99501 + 500*i
			n, err := e.MergeByKey(ctx, warehouse.MergeParams{Table: tbl, Key: []string{"id"},
				Query: fmt.Sprintf(`SELECT CAST(g AS BIGINT) AS id, %s AS name, CAST(%d AS BIGINT) AS score FROM %s`,
					d.cast("'merged'", "TEXT"), i, d.series(from, from+999))})
			require.NoError(b, err)
			require.Equal(b, int64(1000), n)
		}
	})

	b.Run("ReplaceTable/100k_rows", func(b *testing.B) {
		e := newEngine(b)
		b.Cleanup(func() { _ = e.Close() })
		d := dialectOf(b, e)
		ctx := b.Context()
		require.NoError(b, e.CreateSchema(ctx, testSchema))
		tbl := warehouse.Table{Schema: testSchema, Name: "full"}
		for i := 0; b.Loop(); i++ {
			require.NoError(b, e.ReplaceTable(ctx, warehouse.ReplaceTableParams{Table: tbl,
				Query: `SELECT CAST(g AS BIGINT) AS id, ` + d.cast(fmt.Sprintf("'run %d'", i), "TEXT") + ` AS v FROM ` + d.series(1, 100000)}))
		}
	})

	b.Run("InsertRows/1000_rows", func(b *testing.B) {
		e := newEngine(b)
		b.Cleanup(func() { _ = e.Close() })
		ctx := b.Context()
		require.NoError(b, e.CreateSchema(ctx, testSchema))
		tbl := warehouse.Table{Schema: testSchema, Name: "seed"}
		require.NoError(b, e.CreateTable(ctx, warehouse.CreateTableParams{Table: tbl, Columns: []warehouse.Column{
			{Name: "id", Type: "BIGINT"}, {Name: "name", Type: "TEXT"}, {Name: "ts", Type: "TIMESTAMP"},
			{Name: "ok", Type: "BOOLEAN"}, {Name: "x", Type: "DOUBLE PRECISION"},
		}}))
		rows := make([][]any, 1000)
		for i := range rows {
			rows[i] = []any{int64(i), fmt.Sprintf("row %d", i), ts(i%24, 0, 0), i%2 == 0, float64(i)}
		}
		for b.Loop() {
			n, err := e.InsertRows(ctx, warehouse.InsertRowsParams{Table: tbl, Columns: seedColumns, Rows: rows})
			require.NoError(b, err)
			require.Equal(b, int64(len(rows)), n)
		}
	})

	b.Run("Query/point_read", func(b *testing.B) {
		e, src, _ := benchSetup(b, newEngine)
		ctx := b.Context()
		q := "SELECT ts, v FROM " + e.QuoteTable(src) + " WHERE id = " + dialectOf(b, e).param(1)
		for i := 0; b.Loop(); i++ {
			res, err := e.Query(ctx, q, int64(i%86400))
			require.NoError(b, err)
			require.Len(b, res.Rows, 1)
		}
	})
}

// benchSetup returns an engine with wt.source holding one row per second
// of 2024-01-01 (ts, id, v) and an empty wt.events of the same shape.
func benchSetup(b *testing.B, newEngine func(b *testing.B) warehouse.Engine) (warehouse.Engine, warehouse.Table, warehouse.Table) {
	b.Helper()
	e := newEngine(b)
	b.Cleanup(func() { _ = e.Close() })
	d := dialectOf(b, e)
	ctx := b.Context()
	require.NoError(b, e.CreateSchema(ctx, testSchema))
	src := warehouse.Table{Schema: testSchema, Name: "source"}
	day := `SELECT ` + timestampLit(ts(0, 0, 0)) + ` + g * INTERVAL '1' SECOND AS ts, CAST(g AS BIGINT) AS id, ` + d.cast("'value'", "TEXT") + ` AS v
		FROM ` + d.series(0, 86399)
	require.NoError(b, e.CreateTableAs(ctx, warehouse.CreateTableAsParams{Table: src, Query: day, WithData: true}))
	dst := warehouse.Table{Schema: testSchema, Name: "events"}
	require.NoError(b, e.CreateTableAs(ctx, warehouse.CreateTableAsParams{Table: dst, Query: day}))
	return e, src, dst
}
