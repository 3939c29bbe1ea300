package duckdb

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
)

// eventsSQL selects rows lo..hi-1 of the benchmarks' event table: the
// shape of a typical raw source (a key, a time, a foreign key, a measure
// and a short text).
func eventsSQL(lo, hi int64) string {
	return fmt.Sprintf(`SELECT i AS id, TIMESTAMP '2024-01-01' + to_seconds(i) AS event_ts, i %% 1000 AS user_id,
  (i %% 97) * 1.5 AS amount, 'event-' || (i %% 50) AS kind FROM range(%d, %d) AS t(i)`, lo, hi)
}

// writeParquet writes rows lo..hi-1 of eventsSQL to path with DuckDB's
// own COPY.
func writeParquet(tb testing.TB, e *Engine, path string, lo, hi int64) {
	tb.Helper()
	require.NoError(tb, e.write(tb.Context(), func(s *session) error {
		_, err := s.exec(tb.Context(), "COPY ("+eventsSQL(lo, hi)+") TO "+quoteLiteral(path)+" (FORMAT parquet)")
		return err
	}))
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// rawExec runs one statement on its own (its own transaction) under the
// write lock: what DuckDB costs without the ingest step around it.
func rawExec(ctx context.Context, e *Engine, q string) (int64, error) {
	var n int64
	err := e.write(ctx, func(s *session) error {
		var err error
		n, err = s.exec(ctx, q)
		return err
	})
	return n, err
}

// checkpoint runs DuckDB's CHECKPOINT, untimed, after each timed write
// of rows rows in a comparison: otherwise the automatic one (when the WAL
// passes 16 MB) lands on whichever write crosses the threshold, every time
// on the same side of a comparison that repeats in a fixed pattern. Writes
// of a few rows (the fixed cost) reach the threshold seldom enough not to
// need it.
func checkpoint(b *testing.B, e *Engine, rows int64) {
	b.Helper()
	if rows < 1000 {
		return
	}
	b.StopTimer()
	_, err := rawExec(b.Context(), e, "CHECKPOINT")
	require.NoError(b, err)
	b.StartTimer()
}

// servingSource fences, builds from one chunk of files and swaps in
// generation 1 of source, so that live batches apply onto table.
func servingSource(tb testing.TB, e *Engine, source string, table warehouse.Table, files ...string) {
	tb.Helper()
	ctx := tb.Context()
	_, err := e.ApplyIngest(ctx, warehouse.IngestParams{Source: source, Step: warehouse.StepFence, Generation: 1})
	require.NoError(tb, err)
	_, err = e.ApplyIngest(ctx, warehouse.IngestParams{Source: source, Step: warehouse.StepChunk, Generation: 1, Table: table,
		Files: warehouse.StagedFiles{Format: warehouse.FormatParquet, Paths: files}})
	require.NoError(tb, err)
	_, err = e.ApplyIngest(ctx, warehouse.IngestParams{Source: source, Step: warehouse.StepSwap, Generation: 1, Chunks: 1,
		Table: table, View: warehouse.Table{Schema: "raw", Name: table.Name}})
	require.NoError(tb, err)
}

// BenchmarkIngestBatch measures a live batch (ApplyIngest StepBatch,
// append) from one Parquet file on a database file (the production
// default, which syncs every commit), against DuckDB's own
//
//	INSERT INTO t SELECT * FROM read_parquet('file')
//
// of the same file into a table of the same shape in the same database, as
// one statement. Each iteration runs both, in turns (the engine first in
// odd iterations, second in even ones), each followed by an untimed
// CHECKPOINT (see checkpoint). rows=100000 is issue
// 14's target (engine/raw within 1.2); rows=1 is the fixed cost of a batch
// (the fence check, the marker, the predecessor check and the commit; the
// state store's part is ingest's BenchmarkPassTinyBatch). With
// time=event_ts the step also reports the written rows' least and
// greatest event_ts and how many are late (IngestParams.TimeColumn, what
// the ingest pass keeps the watermark from); time=none does not.
//
//	go test -run '^$' -bench IngestBatch -count 3 ./warehouse/duckdb/
func BenchmarkIngestBatch(b *testing.B) {
	for _, rows := range []int64{100_000, 1} {
		for _, tc := range []string{"none", "event_ts"} {
			b.Run(fmt.Sprintf("rows=%d/time=%s", rows, tc), func(b *testing.B) { benchIngestBatch(b, rows, tc) })
		}
	}
}

func benchIngestBatch(b *testing.B, rows int64, timeColumn string) {
	if timeColumn == "none" {
		timeColumn = ""
	}
	ctx := b.Context()
	dir := benchDir(b)
	e, err := Open(ctx, filepath.Join(dir, "bench.duckdb"), Options{})
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, e.Close()) })
	file := filepath.Join(dir, "batch.parquet")
	writeParquet(b, e, file, 0, rows)
	table := warehouse.Table{Schema: "gapless__raw", Name: "events__g1"}
	servingSource(b, e, "raw.events", table, file)
	_, err = rawExec(ctx, e, "CREATE TABLE gapless__raw.raw_events AS SELECT * FROM read_parquet("+quoteLiteral(file)+")")
	require.NoError(b, err)
	raw := "INSERT INTO gapless__raw.raw_events SELECT * FROM read_parquet(" + quoteLiteral(file) + ")"
	var took [2]time.Duration
	engine := func(seq int64) {
		began := time.Now()
		res, err := e.ApplyIngest(ctx, warehouse.IngestParams{Source: "raw.events", Step: warehouse.StepBatch, Generation: 1, Index: seq,
			Table: table, Apply: warehouse.IngestAppend, Files: warehouse.StagedFiles{Format: warehouse.FormatParquet, Paths: []string{file}},
			TimeColumn: timeColumn, LateBefore: time.Date(2024, 1, 1, 0, 1, 0, 0, time.UTC)})
		took[0] += time.Since(began)
		require.NoError(b, err)
		require.Equal(b, rows, res.Rows)
	}
	insert := func() {
		began := time.Now()
		n, err := rawExec(ctx, e, raw)
		took[1] += time.Since(began)
		require.NoError(b, err)
		require.Equal(b, rows, n)
	}
	seq := int64(0)
	for b.Loop() {
		seq++
		if seq%2 == 1 { // in turns, so that a slower stretch of a noisy machine weighs on both
			engine(seq)
			checkpoint(b, e, rows)
			insert()
		} else {
			insert()
			checkpoint(b, e, rows)
			engine(seq)
		}
		checkpoint(b, e, rows)
	}
	n := float64(seq)
	b.ReportMetric(float64(took[0].Microseconds())/n/1000, "ms-engine/batch")
	b.ReportMetric(float64(took[1].Microseconds())/n/1000, "ms-raw/batch")
	b.ReportMetric(took[0].Seconds()/took[1].Seconds(), "engine/raw")
}

// buildSizes are the row counts of BenchmarkIngestBuild: 200,000, and
// 10,000,000 (issue 14's target) with GAPLESS_BENCH_LARGE=1.
func buildSizes() []int64 {
	if os.Getenv("GAPLESS_BENCH_LARGE") == "1" {
		return []int64{200_000, 10_000_000}
	}
	return []int64{200_000}
}

// BenchmarkIngestBuild measures a full build in chunks on a database file:
// StepFence, StepChunk for each of 10 chunks of 10 Parquet files, StepSwap
// (with no live batch to catch up), against one
//
//	CREATE OR REPLACE TABLE t AS SELECT * FROM read_parquet([every file])
//
// in the same database (engine/raw), and against the same CREATE TABLE AS
// with preserve_insertion_order off, as the engine writes chunks
// (engine/raw_unordered: what chunking itself costs). Each iteration
// builds the next generation and runs the two CREATE TABLE AS, in turns,
// each followed by a CHECKPOINT (as BenchmarkIngestBatch; the checkpoints
// DuckDB makes between the chunks count). The retired generation's table
// is dropped outside the timing, so the database does not grow. Issue
// 14's target is engine/raw within 1.3 for 10 million rows:
//
//	GAPLESS_BENCH_LARGE=1 go test -run '^$' -bench IngestBuild -benchtime 3x -timeout 30m ./warehouse/duckdb/
func BenchmarkIngestBuild(b *testing.B) {
	const files, chunks = 100, 10
	for _, rows := range buildSizes() {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			ctx := b.Context()
			dir := benchDir(b)
			e, err := Open(ctx, filepath.Join(dir, "bench.duckdb"), Options{})
			require.NoError(b, err)
			b.Cleanup(func() { require.NoError(b, e.Close()) })
			paths := make([]string, files)
			per := rows / files
			for i := range paths {
				paths[i] = filepath.Join(dir, fmt.Sprintf("part-%03d.parquet", i))
				writeParquet(b, e, paths[i], int64(i)*per, int64(i+1)*per)
			}
			lits := make([]string, len(paths))
			for i, p := range paths {
				lits[i] = quoteLiteral(p)
			}
			raw := "CREATE OR REPLACE TABLE main.ctas AS SELECT * FROM read_parquet([" + strings.Join(lits, ", ") + "])"
			rawUnordered := "CREATE OR REPLACE TABLE main.ctas_unordered AS SELECT * FROM read_parquet([" + strings.Join(lits, ", ") + "])"
			const source = "raw.events"
			view := warehouse.Table{Schema: "raw", Name: "events"}
			var took [3]time.Duration
			engine := func(gen int64) {
				table := warehouse.Table{Schema: "gapless__raw", Name: fmt.Sprintf("events__g%d", gen)}
				began := time.Now()
				var built int64
				_, err := e.ApplyIngest(ctx, warehouse.IngestParams{Source: source, Step: warehouse.StepFence, Generation: gen, From: gen - 1})
				require.NoError(b, err)
				for c := range chunks {
					res, err := e.ApplyIngest(ctx, warehouse.IngestParams{Source: source, Step: warehouse.StepChunk, Generation: gen, Index: int64(c),
						Table: table, Files: warehouse.StagedFiles{Format: warehouse.FormatParquet, Paths: paths[c*files/chunks : (c+1)*files/chunks]}})
					require.NoError(b, err)
					built += res.Rows
				}
				_, err = e.ApplyIngest(ctx, warehouse.IngestParams{Source: source, Step: warehouse.StepSwap, Generation: gen, Chunks: chunks,
					Table: table, View: view})
				require.NoError(b, err)
				took[0] += time.Since(began)
				require.Equal(b, per*files, built)
			}
			ctas := func() {
				began := time.Now()
				_, err := rawExec(ctx, e, raw)
				took[1] += time.Since(began)
				require.NoError(b, err)
				checkpoint(b, e, rows)
				// The same with preserve_insertion_order off, as the
				// engine writes chunks: what chunking itself costs.
				began = time.Now()
				require.NoError(b, e.write(ctx, func(s *session) error {
					return unordered(ctx, s, func() error {
						_, err := s.exec(ctx, rawUnordered)
						return err
					})
				}))
				took[2] += time.Since(began)
			}
			gen := int64(0)
			for b.Loop() {
				gen++
				if gen%2 == 1 { // in turns, so that a slower stretch of a noisy machine weighs on both
					engine(gen)
					checkpoint(b, e, rows)
					ctas()
				} else {
					ctas()
					checkpoint(b, e, rows)
					engine(gen)
				}
				checkpoint(b, e, rows)
				if gen > 1 {
					b.StopTimer()
					_, err := rawExec(ctx, e, fmt.Sprintf("DROP TABLE gapless__raw.events__g%d", gen-1))
					require.NoError(b, err)
					b.StartTimer()
				}
			}
			n := float64(gen)
			b.ReportMetric(took[0].Seconds()/n, "s-engine/build")
			b.ReportMetric(took[1].Seconds()/n, "s-raw/build")
			b.ReportMetric(took[2].Seconds()/n, "s-raw-unordered/build")
			b.ReportMetric(took[0].Seconds()/took[1].Seconds(), "engine/raw")
			b.ReportMetric(took[0].Seconds()/took[2].Seconds(), "engine/raw_unordered")
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
