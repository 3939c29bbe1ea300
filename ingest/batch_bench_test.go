package ingest_test

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/connector"
	"github.com/gapless-dev/gapless/connector/files"
	"github.com/gapless-dev/gapless/ingest"
	"github.com/gapless-dev/gapless/source"
	"github.com/gapless-dev/gapless/state/sqlite"
	"github.com/gapless-dev/gapless/warehouse/duckdb"
)

// BenchmarkPassTinyBatch measures the fixed cost of a live batch through
// the whole ingest pass, on the embedded default (a DuckDB warehouse file
// and a SQLite state file): a primed source of Parquet files (settle 0s,
// a time_column, so the pass publishes a watermark), k files of one row
// landing before each pass. Each iteration runs a pass that applies the k
// batches and a pass with nothing new, and reports
//
//	ms-pass        the pass that applies k batches
//	ms-idle-pass   the pass with nothing new (registering the source,
//	               reading its state, discovery: it does not touch the
//	               warehouse)
//	ms/batch       (ms-pass - ms-idle-pass) / k: what landing a batch
//	               adds (its fence check, data, marker and commit in the
//	               warehouse, the state store's records of it, and the
//	               pass's work for a source with something new, shared by
//	               the k batches: the fence read, late rows, watermark).
//	ms-raw/batch   DuckDB's own INSERT INTO t SELECT * FROM read_parquet
//	               of the same file, committed alone, in the same database
//	fixed-ms/batch ms/batch - ms-raw/batch: the fixed cost gapless adds
//	               to a batch (fence, marker, state, the pass's share)
//
// Issue 14's target is fixed-ms/batch under 5, whatever the size of the
// served table: table=1k and table=1M prime the source with a first file of
// 1,000 or 1,000,000 rows. The pass keeps the watermark from what the
// steps report (warehouse.IngestParams.TimeColumn), so neither the late
// rows nor the watermark read the table. The landing folder grows by k
// files an iteration; discovery lists it in both passes.
//
//	go test -run '^$' -bench PassTinyBatch -benchtime 200x -count 3 ./ingest/
func BenchmarkPassTinyBatch(b *testing.B) {
	for _, size := range []struct {
		name string
		rows int
	}{{"1k", 1_000}, {"1M", 1_000_000}} {
		for _, k := range []int{1, 10} {
			b.Run(fmt.Sprintf("table=%s/batches=%d", size.name, k), func(b *testing.B) { benchPassTinyBatch(b, size.rows, k) })
		}
	}
}

func benchPassTinyBatch(b *testing.B, rows, k int) {
	ctx := b.Context()
	dir := benchDir(b)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "state.db"))
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, st.Close()) })
	wh, err := duckdb.Open(ctx, filepath.Join(dir, "warehouse.duckdb"), duckdb.Options{})
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, wh.Close()) })
	root := filepath.Join(dir, "project")
	require.NoError(b, os.MkdirAll(filepath.Join(root, "landing"), 0o755))
	d := &source.Definition{Name: src, File: "sources/events.yaml", Connector: source.ConnectorFiles,
		Files: &source.Files{Path: "landing/*.parquet"}, Apply: source.ApplyAppend, TimeColumn: "event_ts"}
	conn, err := files.New(d, files.Options{Root: root})
	require.NoError(b, err)
	next := 0
	var landed []string   // the files of the iteration, for the raw inserts
	land := func(n int) { // n rows, ids and seconds next..next+n-1
		path := filepath.Join(root, "landing", fmt.Sprintf("part-%09d.parquet", next))
		_, err := wh.Query(ctx, fmt.Sprintf("COPY (SELECT i::BIGINT AS id, TIMESTAMP '2024-01-01' + to_seconds(i) AS event_ts, 'v' AS v FROM range(%d, %d) AS t(i)) TO '%s' (FORMAT parquet)",
			next, next+n, strings.ReplaceAll(path, "'", "''")))
		require.NoError(b, err)
		landed = append(landed, path)
		next += n
	}
	// raw is DuckDB's own statement for a batch, in the same database: one
	// INSERT of the file, committed on its own, into a table of the same
	// shape. ms/batch minus it is what gapless adds per batch.
	_, err = wh.Query(ctx, "CREATE TABLE raw_copy (id BIGINT, event_ts TIMESTAMP, v VARCHAR)")
	require.NoError(b, err)
	pass := func() ingest.SourceReport {
		rep, err := ingest.Pass(ctx, ingest.Params{Store: st, Engine: wh, Sources: map[string]*source.Definition{src: d},
			Connectors: []connector.Connector{conn}, Root: root, Logger: slog.New(slog.DiscardHandler)})
		require.NoError(b, err)
		require.Len(b, rep.Sources, 1)
		require.NoError(b, rep.Sources[0].Err)
		return rep.Sources[0]
	}
	land(rows)
	require.Equal(b, int64(1), pass().Built, "the first pass primes the source")
	var busy, idle, raw time.Duration
	passes := 0
	for b.Loop() {
		b.StopTimer()
		landed = landed[:0]
		for range k {
			land(1)
		}
		b.StartTimer()
		began := time.Now()
		r := pass()
		busy += time.Since(began)
		require.Equal(b, k, r.Applied)

		began = time.Now()
		for _, f := range landed {
			_, err := wh.Query(ctx, "INSERT INTO raw_copy SELECT * FROM read_parquet('"+strings.ReplaceAll(f, "'", "''")+"')")
			require.NoError(b, err)
		}
		raw += time.Since(began)

		began = time.Now()
		r = pass()
		idle += time.Since(began)
		require.Zero(b, r.Applied)
		passes++
	}
	n := float64(passes)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / n }
	b.ReportMetric(ms(busy), "ms-pass")
	b.ReportMetric(ms(idle), "ms-idle-pass")
	b.ReportMetric((ms(busy)-ms(idle))/float64(k), "ms/batch")
	b.ReportMetric(ms(raw)/float64(k), "ms-raw/batch")
	b.ReportMetric((ms(busy)-ms(idle)-ms(raw))/float64(k), "fixed-ms/batch")
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
