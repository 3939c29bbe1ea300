package duckdb

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
)

// BenchmarkSmallBatch measures the fixed cost of one backfill batch on a
// database file (the production default, which syncs every commit): one
// day of 288 rows into an empty range of a table that grows batch by
// batch, as a first deploy fills it. Each iteration writes one batch three
// ways, in turn, each into its own table of one database:
//
//	engine  InsertInterval (the range is empty: one INSERT, its own
//	        transaction)
//	tx      what InsertInterval ran before: BEGIN, DELETE of the range,
//	        INSERT, COMMIT, on one connection
//	raw     the INSERT alone, as one statement: the least a batch costs
//
// and reports each per batch and engine/raw, tx/raw.
//
//	go test -run '^$' -bench SmallBatch -benchtime 500x ./warehouse/duckdb/
func BenchmarkSmallBatch(b *testing.B) {
	ctx := b.Context()
	e, err := Open(ctx, filepath.Join(b.TempDir(), "bench.duckdb"), Options{})
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, e.Close()) })
	require.NoError(b, e.CreateSchema(ctx, "s"))
	cols := []warehouse.Column{{Name: "ts", Type: "TIMESTAMP"}, {Name: "id", Type: "BIGINT"}, {Name: "v", Type: "DOUBLE"}}
	tables := map[string]warehouse.Table{}
	for _, name := range []string{"engine", "tx", "raw"} {
		tables[name] = warehouse.Table{Schema: "s", Name: name}
		require.NoError(b, e.CreateTable(ctx, warehouse.CreateTableParams{Table: tables[name], Columns: cols}))
	}
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	query := func(lo, hi time.Time) string {
		return fmt.Sprintf("SELECT g.ts AS ts, epoch(g.ts)::BIGINT / 300 AS id, 1.5 AS v FROM generate_series(TIMESTAMP '%s', TIMESTAMP '%s', INTERVAL 5 MINUTE) AS g(ts)",
			lo.Format(time.DateTime), hi.Format(time.DateTime))
	}
	insertSQL := func(t warehouse.Table, q string) string {
		return "INSERT INTO " + quoteTable(t) + " (\"ts\", \"id\", \"v\")\nSELECT gapless_q.\"ts\", gapless_q.\"id\", gapless_q.\"v\" FROM (\n" + q +
			"\n) AS gapless_q\nWHERE gapless_q.\"ts\" >= $1 AND gapless_q.\"ts\" < $2"
	}
	var took [3]time.Duration
	i := 0
	b.ResetTimer()
	for b.Loop() {
		lo, hi := base.AddDate(0, 0, i), base.AddDate(0, 0, i+1)
		q := query(lo, hi)
		i++
		began := time.Now()
		n, err := e.InsertInterval(ctx, warehouse.InsertIntervalParams{Table: tables["engine"], TimeColumn: "ts", Start: lo, End: hi, Query: q})
		took[0] += time.Since(began)
		require.NoError(b, err)
		require.EqualValues(b, 288, n)

		began = time.Now()
		require.NoError(b, e.write(ctx, func(s *session) error {
			return s.inTx(ctx, func() error {
				if _, err := s.exec(ctx, `DELETE FROM "s"."tx" WHERE "ts" >= $1 AND "ts" < $2`, lo, hi); err != nil {
					return err
				}
				_, err := s.exec(ctx, insertSQL(tables["tx"], q), lo, hi)
				return err
			})
		}))
		took[1] += time.Since(began)

		began = time.Now()
		require.NoError(b, e.write(ctx, func(s *session) error {
			_, err := s.exec(ctx, insertSQL(tables["raw"], q), lo, hi)
			return err
		}))
		took[2] += time.Since(began)
	}
	n := float64(i)
	b.ReportMetric(float64(took[0].Microseconds())/n, "µs-engine/batch")
	b.ReportMetric(float64(took[1].Microseconds())/n, "µs-tx/batch")
	b.ReportMetric(float64(took[2].Microseconds())/n, "µs-raw/batch")
	b.ReportMetric(took[0].Seconds()/took[2].Seconds(), "engine/raw")
	b.ReportMetric(took[1].Seconds()/took[2].Seconds(), "tx/raw")
}
