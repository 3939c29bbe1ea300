package trino_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
	"github.com/gapless-dev/gapless/warehouse/trino"
)

// yearEnv makes BenchmarkHourlyYear run a whole year (8,760 hours); by
// default it runs two batches (1,440 hours), which CI's -benchtime 1x
// affords.
const yearEnv = "GAPLESS_TRINO_BENCH_YEAR"

// batchHours is the backfill's batch_size: 30 days of an hourly model.
const batchHours = 720

// yearStart is the first hour of the benchmarks' year.
var yearStart = time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC)

// hoursQuery is a model query of perHour rows in each hour of [from, to)
// (hours counted from yearStart), generated with sequence() (at most
// 10,000 elements each) crossed: the rows a batch's query computes.
func hoursQuery(from, to, perHour int) string {
	step := 3600 / perHour
	return fmt.Sprintf(`SELECT TIMESTAMP '2023-01-01 00:00:00' + h.h * INTERVAL '1' HOUR + r.r * INTERVAL '%d' SECOND AS ts,
       CAST(h.h * 1000 + r.r AS BIGINT) AS id, CAST('value' AS VARCHAR) AS v
FROM UNNEST(sequence(%d, %d)) AS h(h) CROSS JOIN UNNEST(sequence(0, %d)) AS r(r)`, step, from, to-1, perHour-1)
}

// BenchmarkHourlyYear measures a backfill of an hourly model on Trino:
// one year (or two batches) InsertInterval'd in batches of 720 hours, and
// the same rows written by one INSERT ... SELECT, at 500 rows and at 1
// row per hour; the same batches as plain INSERTs (a reference: the cost
// of batching alone); and the fixed cost of one batch (InsertInterval of
// one row). Each op fills a fresh empty table (made outside the timer).
func BenchmarkHourlyYear(b *testing.B) {
	hours := 2 * batchHours
	if os.Getenv(yearEnv) != "" {
		hours = 8760
	}
	e := newEngine(b)
	ctx := b.Context()
	require.NoError(b, e.CreateSchema(ctx, "wt"))
	n := 0
	fresh := func(b *testing.B) warehouse.Table {
		b.Helper()
		b.StopTimer()
		defer b.StartTimer()
		n++
		tbl := table(fmt.Sprintf("hourly_%d", n))
		require.NoError(b, e.CreateTable(ctx, warehouse.CreateTableParams{Table: tbl, Columns: []warehouse.Column{
			{Name: "ts", Type: "TIMESTAMP"}, {Name: "id", Type: "BIGINT"}, {Name: "v", Type: "VARCHAR"},
		}}))
		return tbl
	}
	for _, perHour := range []int{500, 1} {
		rows := int64(hours * perHour)
		b.Run(fmt.Sprintf("%d_per_hour/batched_%dh", perHour, batchHours), func(b *testing.B) {
			batches := 0
			for range b.N {
				tbl := fresh(b)
				for from := 0; from < hours; from += batchHours {
					to := min(from+batchHours, hours)
					got, err := e.InsertInterval(ctx, warehouse.InsertIntervalParams{Table: tbl, TimeColumn: "ts",
						Start: yearStart.Add(time.Duration(from) * time.Hour), End: yearStart.Add(time.Duration(to) * time.Hour),
						Query: hoursQuery(from, to, perHour)})
					require.NoError(b, err)
					require.Equal(b, int64((to-from)*perHour), got)
					batches++
				}
			}
			b.ReportMetric(float64(rows), "rows/op")
			b.ReportMetric(float64(batches)/float64(b.N), "batches/op")
		})
		// The floor of any per-batch path: one plain INSERT per batch, which
		// would append again on a re-run (so not what InsertInterval does),
		// for the ratio batching alone costs on this cluster.
		b.Run(fmt.Sprintf("%d_per_hour/batched_%dh_plain_insert_reference", perHour, batchHours), func(b *testing.B) {
			for range b.N {
				tbl := fresh(b)
				for from := 0; from < hours; from += batchHours {
					to := min(from+batchHours, hours)
					res, err := e.Query(ctx, "INSERT INTO "+e.QuoteTable(tbl)+" (ts, id, v) "+hoursQuery(from, to, perHour))
					require.NoError(b, err)
					require.Equal(b, [][]any{{int64((to - from) * perHour)}}, res.Rows)
				}
			}
			b.ReportMetric(float64(rows), "rows/op")
		})
		b.Run(fmt.Sprintf("%d_per_hour/one_insert_select", perHour), func(b *testing.B) {
			for range b.N {
				tbl := fresh(b)
				res, err := e.Query(ctx, "INSERT INTO "+e.QuoteTable(tbl)+" (ts, id, v) "+hoursQuery(0, hours, perHour))
				require.NoError(b, err)
				require.Equal(b, [][]any{{rows}}, res.Rows)
			}
			b.ReportMetric(float64(rows), "rows/op")
		})
	}
	b.Run("fixed_cost_per_batch", func(b *testing.B) {
		tbl := fresh(b)
		for i := range b.N {
			h := i % 24
			_, err := e.InsertInterval(ctx, warehouse.InsertIntervalParams{Table: tbl, TimeColumn: "ts",
				Start: yearStart.Add(time.Duration(h) * time.Hour), End: yearStart.Add(time.Duration(h+1) * time.Hour),
				Query: hoursQuery(h, h+1, 1)})
			require.NoError(b, err)
		}
	})
}

// BenchmarkPromote100Views measures a promotion of 100 models on Trino:
// CreateOrReplaceViews of 100 views, each op repointing all of them to the
// other of two generations of physical tables (target: under 30 s).
func BenchmarkPromote100Views(b *testing.B) {
	e := newEngine(b)
	ctx := b.Context()
	require.NoError(b, e.CreateSchema(ctx, "wt"))
	require.NoError(b, e.CreateSchema(ctx, "env"))
	for g := range 2 {
		require.NoError(b, e.CreateTableAs(ctx, warehouse.CreateTableAsParams{Table: table(fmt.Sprintf("gen_%d", g)), WithData: true,
			Query: fmt.Sprintf("SELECT CAST(%d AS BIGINT) AS gen", g)}))
	}
	batch := func(g int) []warehouse.ViewParams {
		views := make([]warehouse.ViewParams, 100)
		for i := range views {
			views[i] = warehouse.ViewParams{View: warehouse.Table{Schema: "env", Name: fmt.Sprintf("model_%03d", i)},
				Query: fmt.Sprintf("SELECT gen, %d AS model FROM %s", i, e.QuoteTable(table(fmt.Sprintf("gen_%d", g))))}
		}
		return views
	}
	// The first batch creates the views; every timed one repoints them.
	require.NoError(b, e.CreateOrReplaceViews(ctx, batch(1)))
	b.ResetTimer()
	for i := range b.N {
		require.NoError(b, e.CreateOrReplaceViews(ctx, batch(i%2)))
	}
	b.StopTimer()
	checkServed(b, e, i2gen(b.N))
}

func i2gen(n int) int64 { return int64((n - 1) % 2) }

// checkServed checks that the last promoted view serves generation g.
func checkServed(b *testing.B, e *trino.Engine, g int64) {
	b.Helper()
	require.Equal(b, [][]any{{g}}, query(b, e, "SELECT gen FROM env.model_099"))
}
