package postgres_test

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/internal/pgtest"
	"github.com/gapless-dev/gapless/warehouse"
	"github.com/gapless-dev/gapless/warehouse/postgres"
)

// benchEventsSQL is the DuckDB query of the benchmark's rows, the shape of
// warehouse/duckdb's BenchmarkIngestBatch.
func benchEventsSQL(rows int64) string {
	return fmt.Sprintf(`SELECT i AS id, TIMESTAMP '2024-01-01' + to_seconds(i) AS event_ts, i %% 1000 AS user_id,
  ((i %% 97) * 1.5)::DOUBLE AS amount, 'event-' || (i %% 50) AS kind FROM range(0, %d) AS t(i)`, rows)
}

// decodeParquet reads the benchmark's rows from file with DuckDB, as Go
// values ready for pgx's CopyFrom.
func decodeParquet(b *testing.B, duck *sql.DB, file string) [][]any {
	b.Helper()
	rs, err := duck.QueryContext(b.Context(), "SELECT * FROM read_parquet('"+strings.ReplaceAll(file, "'", "''")+"')")
	require.NoError(b, err)
	defer rs.Close() //nolint:errcheck // rs.Err below reports what the read lost
	var decoded [][]any
	for rs.Next() {
		var id, user int64
		var at time.Time
		var amount float64
		var kind string
		require.NoError(b, rs.Scan(&id, &at, &user, &amount, &kind))
		decoded = append(decoded, []any{id, at.UTC(), user, amount, kind})
	}
	require.NoError(b, rs.Err())
	return decoded
}

// BenchmarkIngestBatch measures a live batch (ApplyIngest StepBatch,
// append) from one Parquet file on the PostgreSQL engine, which decodes
// the file with an embedded in-memory DuckDB and streams the rows in with
// COPY, against a raw COPY (pgx CopyFrom, its own transaction) of the same
// rows, already decoded in memory, into a table of the same shape in the
// same database. Each iteration runs both, in turns (the engine first in
// odd iterations). No target: the difference is the file's decoding, the
// fence and marker statements and the transaction around them.
//
//	go test -run '^$' -bench IngestBatch -count 3 ./warehouse/postgres/
func BenchmarkIngestBatch(b *testing.B) {
	for _, rows := range []int64{100_000, 1} {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			ctx := b.Context()
			e, err := postgres.Open(ctx, pgtest.NewDatabase(b))
			require.NoError(b, err)
			b.Cleanup(func() { require.NoError(b, e.Close()) })
			file := filepath.Join(benchDir(b), "batch.parquet")
			duck, err := sql.Open("duckdb", "")
			require.NoError(b, err)
			b.Cleanup(func() { require.NoError(b, duck.Close()) })
			_, err = duck.ExecContext(ctx, "COPY ("+benchEventsSQL(rows)+") TO '"+strings.ReplaceAll(file, "'", "''")+"' (FORMAT parquet)")
			require.NoError(b, err)
			decoded := decodeParquet(b, duck, file)
			files := warehouse.StagedFiles{Format: warehouse.FormatParquet, Paths: []string{file}}
			table := warehouse.Table{Schema: "gapless__raw", Name: "events__g1"}
			_, err = e.ApplyIngest(ctx, warehouse.IngestParams{Source: "raw.events", Step: warehouse.StepFence, Generation: 1})
			require.NoError(b, err)
			_, err = e.ApplyIngest(ctx, warehouse.IngestParams{Source: "raw.events", Step: warehouse.StepChunk, Generation: 1, Table: table, Files: files})
			require.NoError(b, err)
			_, err = e.ApplyIngest(ctx, warehouse.IngestParams{Source: "raw.events", Step: warehouse.StepSwap, Generation: 1, Chunks: 1,
				Table: table, View: warehouse.Table{Schema: "raw", Name: "events"}})
			require.NoError(b, err)
			_, err = e.Pool().Exec(ctx, "CREATE TABLE gapless__raw.raw_copy (LIKE gapless__raw.events__g1)")
			require.NoError(b, err)
			cols := []string{"id", "event_ts", "user_id", "amount", "kind"}

			var took [2]time.Duration
			engine := func(seq int64) {
				began := time.Now()
				res, err := e.ApplyIngest(ctx, warehouse.IngestParams{Source: "raw.events", Step: warehouse.StepBatch, Generation: 1, Index: seq,
					Table: table, Apply: warehouse.IngestAppend, Files: files})
				took[0] += time.Since(began)
				require.NoError(b, err)
				require.Equal(b, rows, res.Rows)
			}
			raw := func() {
				began := time.Now()
				n, err := e.Pool().CopyFrom(ctx, pgx.Identifier{"gapless__raw", "raw_copy"}, cols, pgx.CopyFromRows(decoded))
				took[1] += time.Since(began)
				require.NoError(b, err)
				require.Equal(b, rows, n)
			}
			seq := int64(0)
			for b.Loop() {
				seq++
				if seq%2 == 1 {
					engine(seq)
					raw()
				} else {
					raw()
					engine(seq)
				}
			}
			n := float64(seq)
			b.ReportMetric(float64(took[0].Microseconds())/n/1000, "ms-engine/batch")
			b.ReportMetric(float64(took[1].Microseconds())/n/1000, "ms-copy/batch")
			b.ReportMetric(took[0].Seconds()/took[1].Seconds(), "engine/copy")
		})
	}
}

// benchDir is a temporary folder for b whose path holds no "key=value"
// segment: b.TempDir is named after the benchmark ("rows=1"), which
// DuckDB's readers would take for a hive partition and add as a column.
func benchDir(b *testing.B) string {
	dir, err := os.MkdirTemp("", "gapless-bench-")
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, os.RemoveAll(dir)) })
	return dir
}
