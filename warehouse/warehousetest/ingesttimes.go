package warehousetest

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
)

// timedRow is a staged row (id, ts, _gapless_pos) of stageTimed; a zero
// ts is NULL.
type timedRow struct {
	id  int64
	ts  time.Time
	pos int64
}

// stageTimed writes rows as a staged Parquet file with a TIMESTAMP column
// ts and the position column.
func (g *ing) stageTimed(rows ...timedRow) warehouse.StagedFiles {
	g.t.Helper()
	g.n++
	path := filepath.Join(g.dir, fmt.Sprintf("f%03d.parquet", g.n))
	vals := make([]string, len(rows))
	for i, r := range rows {
		ts := "NULL"
		if !r.ts.IsZero() {
			ts = "TIMESTAMP '" + r.ts.UTC().Format("2006-01-02 15:04:05") + "'"
		}
		vals[i] = fmt.Sprintf("(%d::BIGINT, %s::TIMESTAMP, %d::BIGINT)", r.id, ts, r.pos)
	}
	db, err := sql.Open("duckdb", "")
	require.NoError(g.t, err)
	defer func() { require.NoError(g.t, db.Close()) }()
	_, err = db.Exec(fmt.Sprintf(`COPY (SELECT * FROM (VALUES %s) AS t(id, ts, "_gapless_pos")) TO '%s' (FORMAT parquet)`,
		strings.Join(vals, ", "), path))
	require.NoError(g.t, err)
	return warehouse.StagedFiles{Format: warehouse.FormatParquet, Paths: []string{path}}
}

// applyTimed applies p with the time column ts and returns its result.
func (g *ing) applyTimed(p warehouse.IngestParams) (warehouse.IngestResult, error) {
	g.t.Helper()
	p.Source, p.Table, p.TimeColumn = ingestSource, g.phys(p.Generation), "ts"
	if p.Apply == "" {
		p.Apply = warehouse.IngestAppend
	}
	return g.in.ApplyIngest(g.ctx, p)
}

// Scenario: a chunk or batch given the source's time column reports the
// least and greatest time of the rows it wrote (not of the table, not of
// rows skipped below the pin, NULL times ignored) and how many of them
// are older than LateBefore; an upsert reports the rows it replaced; a
// replay reports nothing; staged rows without the time column write
// nothing and say so. The ingest pass keeps a source's watermark from
// these figures instead of reading its table.
func testStepReportsWrittenTimes(t *testing.T, f *fixture) {
	g := newIng(t, f)
	at := func(h int) time.Time { return time.Date(2024, 1, 1, h, 0, 0, 0, time.UTC) }
	g.fence(0, 1, 0)
	res, err := g.applyTimed(warehouse.IngestParams{Step: warehouse.StepChunk, Generation: 1,
		Files: g.stageTimed(timedRow{1, at(3), 1}, timedRow{2, at(1), 2})})
	require.NoError(t, err)
	require.Equal(t, warehouse.IngestResult{Rows: 2, MinTime: at(1), MaxTime: at(3)}, res)
	require.NoError(t, g.swap(1, 1))

	// Batch 1: two of three rows are older than 03:00, one is newer than
	// all the table holds.
	b1 := g.stageTimed(timedRow{3, at(0), 3}, timedRow{4, at(2), 4}, timedRow{5, at(5), 5})
	p1 := warehouse.IngestParams{Step: warehouse.StepBatch, Generation: 1, Index: 1, Files: b1, LateBefore: at(3)}
	res, err = g.applyTimed(p1)
	require.NoError(t, err)
	require.Equal(t, warehouse.IngestResult{Rows: 3, MinTime: at(0), MaxTime: at(5), Late: 2}, res)
	res, err = g.applyTimed(p1)
	require.ErrorIs(t, err, warehouse.ErrAlreadyApplied)
	require.Equal(t, warehouse.IngestResult{}, res, "a replay wrote nothing, so it reports no times")

	// Batch 2 straddles a pin at 10: the row at position 6 (09:00) is
	// skipped, and so are its time and its lateness.
	res, err = g.applyTimed(warehouse.IngestParams{Step: warehouse.StepBatch, Generation: 1, Index: 2, Pin: 10, LateBefore: at(5),
		Files: g.stageTimed(timedRow{6, at(9), 6}, timedRow{7, at(1), 11}, timedRow{8, time.Time{}, 12})})
	require.NoError(t, err)
	require.Equal(t, warehouse.IngestResult{Rows: 2, MinTime: at(1), MaxTime: at(1), Late: 1}, res)

	// Batch 3 holds no time: nothing to report but its rows.
	res, err = g.applyTimed(warehouse.IngestParams{Step: warehouse.StepBatch, Generation: 1, Index: 3, LateBefore: at(5),
		Files: g.stageTimed(timedRow{9, time.Time{}, 13})})
	require.NoError(t, err)
	require.Equal(t, warehouse.IngestResult{Rows: 1}, res)

	// Batch 4 upserts id 5 (the row of 05:00) to 04:00, and adds id 10.
	res, err = g.applyTimed(warehouse.IngestParams{Step: warehouse.StepBatch, Generation: 1, Index: 4, Apply: warehouse.IngestUpsert, Key: []string{"id"},
		Files: g.stageTimed(timedRow{5, at(4), 14}, timedRow{10, at(4), 15})})
	require.NoError(t, err)
	require.Equal(t, warehouse.IngestResult{Rows: 2, MinTime: at(4), MaxTime: at(4), Replaced: 1}, res)

	// Staged rows without the time column: refused, naming it; nothing
	// written.
	_, err = g.applyTimed(warehouse.IngestParams{Step: warehouse.StepBatch, Generation: 1, Index: 5,
		Files: g.stage(warehouse.FormatCSV, pairs(11)...)})
	require.ErrorIs(t, err, warehouse.ErrInvalidArgument)
	require.Contains(t, err.Error(), `"ts"`)
	require.False(t, g.hasMarker(1, warehouse.MarkerBatch, 5))
	require.Equal(t, []int64{1, 2, 3, 4, 5, 7, 8, 9, 10}, g.ids(g.view))
	_, err = g.applyTimed(warehouse.IngestParams{Step: warehouse.StepSwap, Generation: 1, Chunks: 1})
	require.ErrorIs(t, err, warehouse.ErrInvalidArgument, "a time column is for chunks and batches")
}
