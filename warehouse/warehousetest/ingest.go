package warehousetest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2" // writes the Parquet fixtures
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
)

// The ingestion contract (warehouse.Ingester), on every engine:
//   - a replayed step is ErrAlreadyApplied and writes nothing; of
//     concurrent appliers of one step exactly one commits;
//   - the fence refuses a retired generation's chunk and swap, and a live
//     batch of a generation that does not serve (unless it catches up);
//   - batches apply in order, chunks too;
//   - a swap refuses when the new generation is behind the serving one,
//     and is atomic: when it fails, the old view, the old fence and both
//     tables stay;
//   - a view that reads the source's view keeps working across a swap and
//     serves the new generation's rows.
var ingestScenarios = []scenario{
	{"FencePlansAndRetires", testFencePlansAndRetires},
	{"BuildAndSwapFromEveryFormat", testBuildAndSwapFromEveryFormat},
	{"ReplayedMarkerIsNoop", testReplayedMarkerIsNoop},
	{"ConcurrentSameMarkerOneWins", testConcurrentSameMarkerOneWins},
	{"FenceRefusesRetiredGeneration", testFenceRefusesRetiredGeneration},
	{"SwapIsAtomic", testSwapIsAtomic},
	{"SwapRefusesWhenBehind", testSwapRefusesWhenBehind},
	{"LiveBatchFencedOnServing", testLiveBatchFencedOnServing},
	{"BatchesInOrder", testBatchesInOrder},
	{"ViewDependentsSurviveSwap", testViewDependentsSurviveSwap},
	{"ApplyModes", testApplyModes},
	{"BadInputWritesNothing", testIngestBadInput},
	{"RowsBelowPinSkipped", testRowsBelowPinSkipped},
	{"ViewColumnsChangeAcrossSwap", testViewColumnsChangeAcrossSwap},
	{"ChunkZeroCleansACrashedBuild", testChunkZeroCleansACrashedBuild},
	{"CancelledStepWritesNothing", testCancelledStepWritesNothing},
	{"SwapRacingABatchNeverLosesIt", testSwapRacingABatchNeverLosesIt},
	{"StepReportsWrittenTimes", testStepReportsWrittenTimes},
}

// ingestSource is the source every scenario lands.
const ingestSource = "raw.events"

// ing is a scenario's view of the engine as an Ingester.
type ing struct {
	*fixture
	in   warehouse.Ingester
	dir  string
	view warehouse.Table
	n    int // staged files so far
}

func newIng(t *testing.T, f *fixture) *ing {
	t.Helper()
	in, ok := f.e.(warehouse.Ingester)
	require.True(t, ok, "%T does not implement warehouse.Ingester", f.e)
	return &ing{fixture: f, in: in, dir: t.TempDir(), view: warehouse.Table{Schema: "raw", Name: "events"}}
}

// phys is generation g's physical table.
func (g *ing) phys(gen int64) warehouse.Table {
	return warehouse.Table{Schema: g.schema, Name: fmt.Sprintf("events__g%d", gen)}
}

// stage writes rows (id, v) as a staged file of format and returns it.
func (g *ing) stage(format warehouse.FileFormat, rows ...[2]any) warehouse.StagedFiles {
	g.t.Helper()
	g.n++
	base := filepath.Join(g.dir, fmt.Sprintf("f%03d", g.n))
	var b strings.Builder
	switch format {
	case warehouse.FormatJSON:
		for _, r := range rows {
			fmt.Fprintf(&b, "{\"id\": %d, \"v\": %q}\n", r[0], r[1])
		}
		path := base + ".ndjson"
		require.NoError(g.t, os.WriteFile(path, []byte(b.String()), 0o600))
		return warehouse.StagedFiles{Format: format, Paths: []string{path}}
	}
	b.WriteString("id,v\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "%d,%s\n", r[0], r[1])
	}
	csv := base + ".csv"
	require.NoError(g.t, os.WriteFile(csv, []byte(b.String()), 0o600))
	if format == warehouse.FormatCSV {
		return warehouse.StagedFiles{Format: format, Paths: []string{csv}}
	}
	db, err := sql.Open("duckdb", "")
	require.NoError(g.t, err)
	defer func() { require.NoError(g.t, db.Close()) }()
	pq := base + ".parquet"
	_, err = db.Exec(fmt.Sprintf("COPY (SELECT CAST(id AS BIGINT) AS id, CAST(v AS VARCHAR) AS v FROM read_csv('%s', header = true)) TO '%s' (FORMAT parquet)", csv, pq))
	require.NoError(g.t, err)
	return warehouse.StagedFiles{Format: format, Paths: []string{pq}}
}

func (g *ing) apply(p warehouse.IngestParams) error {
	g.t.Helper()
	if p.Source == "" {
		p.Source = ingestSource
	}
	if p.Table == (warehouse.Table{}) {
		p.Table = g.phys(p.Generation)
	}
	if p.Step == warehouse.StepSwap && p.View == (warehouse.Table{}) {
		p.View = g.view
	}
	if p.Step == warehouse.StepBatch && p.Apply == "" {
		p.Apply = warehouse.IngestAppend
	}
	_, err := g.in.ApplyIngest(g.ctx, p)
	if err != nil {
		var we *warehouse.Error
		require.True(g.t, errors.As(err, &we), "ApplyIngest returned %T, not a *warehouse.Error: %v", err, err)
	}
	return err
}

func (g *ing) ok(p warehouse.IngestParams) {
	g.t.Helper()
	require.NoError(g.t, g.apply(p))
}

func (g *ing) fence(from, gen, covered int64) {
	g.t.Helper()
	g.ok(warehouse.IngestParams{Step: warehouse.StepFence, From: from, Generation: gen, Covered: covered})
}

func (g *ing) chunk(gen, idx int64, files warehouse.StagedFiles) error {
	g.t.Helper()
	return g.apply(warehouse.IngestParams{Step: warehouse.StepChunk, Generation: gen, Index: idx, Files: files})
}

func (g *ing) batch(gen, seq int64, catchUp bool, files warehouse.StagedFiles) error {
	g.t.Helper()
	return g.apply(warehouse.IngestParams{Step: warehouse.StepBatch, Generation: gen, Index: seq, CatchUp: catchUp, Files: files})
}

func (g *ing) swap(gen, chunks int64) error {
	g.t.Helper()
	return g.apply(warehouse.IngestParams{Step: warehouse.StepSwap, Generation: gen, Chunks: chunks})
}

// ids returns the ids of t, sorted.
func (g *ing) ids(t warehouse.Table) []int64 {
	g.t.Helper()
	rows := g.query("SELECT id FROM " + g.q(t) + " ORDER BY id")
	out := make([]int64, 0, len(rows))
	for _, r := range rows {
		n, ok := r[0].(int64)
		require.True(g.t, ok, "id is %T", r[0])
		out = append(out, n)
	}
	return out
}

func (g *ing) state() warehouse.IngestState {
	g.t.Helper()
	st, err := g.in.IngestState(g.ctx, ingestSource)
	require.NoError(g.t, err)
	return st
}

// hasMarker reports whether the source has the marker.
func (g *ing) hasMarker(gen int64, kind string, idx int64) bool {
	for _, m := range g.state().Markers {
		if m.Generation == gen && m.Kind == kind && m.Index == idx {
			return true
		}
	}
	return false
}

// serve builds generation 1 from one chunk of ids and swaps it in.
func (g *ing) serve(ids ...int64) {
	g.t.Helper()
	g.fence(0, 1, 0)
	require.NoError(g.t, g.chunk(1, 0, g.stage(warehouse.FormatParquet, pairs(ids...)...)))
	require.NoError(g.t, g.swap(1, 1))
}

func pairs(ids ...int64) [][2]any {
	out := make([][2]any, len(ids))
	for i, id := range ids {
		out[i] = [2]any{id, fmt.Sprintf("v%d", id)}
	}
	return out
}

// Scenario: a source's first plan creates its fence; planning the next
// generation is a compare-and-swap on the planned one, so a planner with
// stale evidence is fenced and a replay is already applied.
func testFencePlansAndRetires(t *testing.T, f *fixture) {
	g := newIng(t, f)
	require.False(t, g.state().Exists)
	g.fence(0, 1, 0)
	st := g.state()
	require.True(t, st.Exists)
	require.Equal(t, int64(1), st.PlannedGeneration)
	require.Equal(t, int64(0), st.ServingGeneration)
	require.ErrorIs(t, g.apply(warehouse.IngestParams{Step: warehouse.StepFence, From: 0, Generation: 1}), warehouse.ErrAlreadyApplied)
	require.ErrorIs(t, g.apply(warehouse.IngestParams{Step: warehouse.StepFence, From: 0, Generation: 2}), warehouse.ErrFenced)
	g.fence(1, 2, 0)
	require.ErrorIs(t, g.apply(warehouse.IngestParams{Step: warehouse.StepFence, From: 1, Generation: 3}), warehouse.ErrFenced)
	require.ErrorIs(t, g.apply(warehouse.IngestParams{Step: warehouse.StepFence, From: 1, Generation: 2}), warehouse.ErrAlreadyApplied)
	require.Equal(t, int64(2), g.state().PlannedGeneration)
}

// Scenario: a generation is built from a Parquet, a CSV and an NDJSON
// chunk and swapped in: the source's view serves every row once, and the
// fence and markers say so.
func testBuildAndSwapFromEveryFormat(t *testing.T, f *fixture) {
	g := newIng(t, f)
	g.fence(0, 1, 0)
	require.NoError(t, g.chunk(1, 0, g.stage(warehouse.FormatParquet, pairs(1, 2)...)))
	require.NoError(t, g.chunk(1, 1, g.stage(warehouse.FormatCSV, pairs(3)...)))
	require.NoError(t, g.chunk(1, 2, g.stage(warehouse.FormatJSON, pairs(4, 5)...)))
	require.NoError(t, g.swap(1, 3))
	require.Equal(t, []int64{1, 2, 3, 4, 5}, g.ids(g.view))
	require.Equal(t, [][]any{{int64(3), "v3"}}, g.query("SELECT id, v FROM "+g.q(g.view)+" WHERE id = 3"))
	st := g.state()
	require.Equal(t, int64(1), st.ServingGeneration)
	require.True(t, g.hasMarker(1, warehouse.MarkerSwap, 0))
	for _, m := range st.Markers {
		if m.Kind == warehouse.MarkerChunk && m.Index == 2 {
			require.Equal(t, int64(2), m.Rows)
		}
	}
}

// Scenario: a chunk and a live batch are replayed after they committed (a
// crash before the state store heard of them): each replay is already
// applied and the rows are there once.
func testReplayedMarkerIsNoop(t *testing.T, f *fixture) {
	g := newIng(t, f)
	g.fence(0, 1, 0)
	c0 := g.stage(warehouse.FormatParquet, pairs(1, 2)...)
	require.NoError(t, g.chunk(1, 0, c0))
	require.ErrorIs(t, g.chunk(1, 0, c0), warehouse.ErrAlreadyApplied)
	require.NoError(t, g.swap(1, 1))
	require.ErrorIs(t, g.swap(1, 1), warehouse.ErrAlreadyApplied)
	b1 := g.stage(warehouse.FormatCSV, pairs(3)...)
	require.NoError(t, g.batch(1, 1, false, b1))
	require.ErrorIs(t, g.batch(1, 1, false, b1), warehouse.ErrAlreadyApplied)
	require.Equal(t, []int64{1, 2, 3}, g.ids(g.view))
}

// Scenario: eight workers race to apply one live batch: exactly one
// commits, the others are already applied, and the rows are there once.
func testConcurrentSameMarkerOneWins(t *testing.T, f *fixture) {
	g := newIng(t, f)
	g.serve(1)
	b1 := g.stage(warehouse.FormatParquet, pairs(2, 3)...)
	const workers = 8
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			_, errs[i] = g.in.ApplyIngest(g.ctx, warehouse.IngestParams{Source: ingestSource, Step: warehouse.StepBatch,
				Generation: 1, Index: 1, Table: g.phys(1), Files: b1, Apply: warehouse.IngestAppend})
		})
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		if err == nil {
			won++
			continue
		}
		require.ErrorIs(t, err, warehouse.ErrAlreadyApplied)
	}
	require.Equal(t, 1, won)
	require.Equal(t, []int64{1, 2, 3}, g.ids(g.view))
}

// Scenario: a resync retires generation 1 while it builds; its late
// chunk and its swap are refused by the warehouse fence and write nothing.
func testFenceRefusesRetiredGeneration(t *testing.T, f *fixture) {
	g := newIng(t, f)
	g.fence(0, 1, 0)
	require.NoError(t, g.chunk(1, 0, g.stage(warehouse.FormatParquet, pairs(1)...)))
	g.fence(1, 2, 0)
	require.ErrorIs(t, g.chunk(1, 1, g.stage(warehouse.FormatParquet, pairs(2)...)), warehouse.ErrFenced)
	require.ErrorIs(t, g.chunk(1, 0, g.stage(warehouse.FormatParquet, pairs(9)...)), warehouse.ErrAlreadyApplied)
	require.ErrorIs(t, g.swap(1, 1), warehouse.ErrFenced)
	require.Equal(t, []int64{1}, g.ids(g.phys(1)))
	ok, err := f.e.TableExists(f.ctx, g.view)
	require.NoError(t, err)
	require.False(t, ok, "the fenced swap created the view")
	st := g.state()
	require.Equal(t, int64(0), st.ServingGeneration)
	require.False(t, g.hasMarker(1, warehouse.MarkerSwap, 0))
	require.False(t, g.hasMarker(1, warehouse.MarkerChunk, 1))
	// The new generation builds and swaps.
	require.NoError(t, g.chunk(2, 0, g.stage(warehouse.FormatParquet, pairs(1, 2)...)))
	require.NoError(t, g.swap(2, 1))
	require.Equal(t, []int64{1, 2}, g.ids(g.view))
}

// Scenario: generation 2's swap fails half-way (its table was dropped
// under it): the view still serves generation 1, the fence still says 1
// serves, no swap marker is written, and generation 1's table is intact.
func testSwapIsAtomic(t *testing.T, f *fixture) {
	g := newIng(t, f)
	g.serve(1, 2)
	g.fence(1, 2, 0)
	require.NoError(t, g.chunk(2, 0, g.stage(warehouse.FormatParquet, pairs(1, 2, 3)...)))
	require.NoError(t, f.e.DropTable(f.ctx, g.phys(2)))
	err := g.swap(2, 1)
	require.Error(t, err)
	require.NotErrorIs(t, err, warehouse.ErrAlreadyApplied)
	require.Equal(t, []int64{1, 2}, g.ids(g.view))
	require.Equal(t, []int64{1, 2}, g.ids(g.phys(1)))
	st := g.state()
	require.Equal(t, int64(1), st.ServingGeneration)
	require.Equal(t, int64(2), st.PlannedGeneration)
	require.False(t, g.hasMarker(2, warehouse.MarkerSwap, 0))
	// Replanned and rebuilt, generation 3 swaps in; generation 1's table stays.
	g.fence(2, 3, 0)
	require.NoError(t, g.chunk(3, 0, g.stage(warehouse.FormatParquet, pairs(1, 2, 3)...)))
	require.NoError(t, g.swap(3, 1))
	require.Equal(t, []int64{1, 2, 3}, g.ids(g.view))
	require.Equal(t, []int64{1, 2}, g.ids(g.phys(1)))
}

// Scenario: generation 1 serves and takes live batches 1 and 2;
// generation 2's snapshot covers batch 1 only. Its swap refuses (it would
// lose batch 2's rows) until it caught up with batch 2, and then serves
// every row once.
func testSwapRefusesWhenBehind(t *testing.T, f *fixture) {
	g := newIng(t, f)
	g.serve(1)
	b1 := g.stage(warehouse.FormatParquet, pairs(2)...)
	b2 := g.stage(warehouse.FormatParquet, pairs(3)...)
	require.NoError(t, g.batch(1, 1, false, b1))
	g.fence(1, 2, 1) // generation 2's snapshot: ids 1 and 2, through batch 1
	require.NoError(t, g.chunk(2, 0, g.stage(warehouse.FormatParquet, pairs(1, 2)...)))
	require.NoError(t, g.batch(1, 2, false, b2))
	require.ErrorIs(t, g.swap(2, 1), warehouse.ErrBehind)
	require.Equal(t, []int64{1, 2, 3}, g.ids(g.view))
	require.Equal(t, int64(1), g.state().ServingGeneration)
	require.NoError(t, g.batch(2, 2, true, b2))
	require.NoError(t, g.swap(2, 1))
	require.Equal(t, []int64{1, 2, 3}, g.ids(g.view))
	require.Equal(t, int64(2), g.state().ServingGeneration)
}

// Scenario: a live batch applies only to the serving generation: one for
// a generation still building (without catch-up) is fenced, and after the
// swap one for the old generation is fenced too; neither writes a row.
func testLiveBatchFencedOnServing(t *testing.T, f *fixture) {
	g := newIng(t, f)
	g.serve(1)
	g.fence(1, 2, 0)
	require.NoError(t, g.chunk(2, 0, g.stage(warehouse.FormatParquet, pairs(1)...)))
	b1 := g.stage(warehouse.FormatParquet, pairs(2)...)
	require.ErrorIs(t, g.batch(2, 1, false, b1), warehouse.ErrFenced)
	require.Equal(t, []int64{1}, g.ids(g.phys(2)))
	require.NoError(t, g.swap(2, 1))
	require.ErrorIs(t, g.batch(1, 1, false, b1), warehouse.ErrFenced)
	require.Equal(t, []int64{1}, g.ids(g.phys(1)))
	require.NoError(t, g.batch(2, 1, false, b1))
	require.Equal(t, []int64{1, 2}, g.ids(g.view))
}

// Scenario: batch 2 arrives before batch 1, chunk 1 before chunk 0, a
// swap before the last chunk: each is refused as out of order, writing
// nothing, and applies once its predecessors did.
func testBatchesInOrder(t *testing.T, f *fixture) {
	g := newIng(t, f)
	g.fence(0, 1, 0)
	c1 := g.stage(warehouse.FormatParquet, pairs(2)...)
	require.ErrorIs(t, g.chunk(1, 1, c1), warehouse.ErrOutOfOrder)
	require.NoError(t, g.chunk(1, 0, g.stage(warehouse.FormatParquet, pairs(1)...)))
	require.NoError(t, g.chunk(1, 1, c1))
	require.ErrorIs(t, g.swap(1, 3), warehouse.ErrOutOfOrder, "a swap before the snapshot's last chunk")
	require.NoError(t, g.swap(1, 2))
	b2 := g.stage(warehouse.FormatCSV, pairs(4)...)
	require.ErrorIs(t, g.batch(1, 2, false, b2), warehouse.ErrOutOfOrder)
	require.Equal(t, []int64{1, 2}, g.ids(g.view))
	require.NoError(t, g.batch(1, 1, false, g.stage(warehouse.FormatCSV, pairs(3)...)))
	require.NoError(t, g.batch(1, 2, false, b2))
	require.Equal(t, []int64{1, 2, 3, 4}, g.ids(g.view))
	require.False(t, g.hasMarker(1, warehouse.MarkerBatch, 3))
}

// Scenario: a VIEW model reads the source's view; after a swap to a new
// generation it keeps working and serves the new rows (PostgreSQL binds
// views to what they read, so the engine must keep it bound).
func testViewDependentsSurviveSwap(t *testing.T, f *fixture) {
	g := newIng(t, f)
	g.serve(1, 2)
	model := f.table("event_count")
	require.NoError(t, f.e.CreateOrReplaceView(f.ctx, warehouse.ViewParams{View: model, Query: "SELECT count(*) AS n FROM " + g.q(g.view)}))
	require.Equal(t, [][]any{{int64(2)}}, g.query("SELECT n FROM "+g.q(model)))
	g.fence(1, 2, 0)
	require.NoError(t, g.chunk(2, 0, g.stage(warehouse.FormatParquet, pairs(1, 2, 3, 4)...)))
	require.NoError(t, g.swap(2, 1))
	require.Equal(t, [][]any{{int64(4)}}, g.query("SELECT n FROM "+g.q(model)))
	require.Equal(t, []int64{1, 2}, g.ids(g.phys(1)), "the old generation's table is kept")
}

// Scenario: live batches apply by the source's mode: append adds, upsert
// replaces the rows of a key (and refuses a key staged twice), replace
// replaces the table.
func testApplyModes(t *testing.T, f *fixture) {
	g := newIng(t, f)
	g.serve(1, 2)
	up := g.stage(warehouse.FormatJSON, [2]any{int64(2), "new"}, [2]any{int64(3), "v3"})
	require.NoError(t, g.apply(warehouse.IngestParams{Step: warehouse.StepBatch, Generation: 1, Index: 1,
		Files: up, Apply: warehouse.IngestUpsert, Key: []string{"id"}}))
	require.Equal(t, [][]any{{int64(1), "v1"}, {int64(2), "new"}, {int64(3), "v3"}}, g.query("SELECT id, v FROM "+g.q(g.view)+" ORDER BY id"))
	dup := g.stage(warehouse.FormatCSV, [2]any{int64(1), "a"}, [2]any{int64(1), "b"})
	require.ErrorIs(t, g.apply(warehouse.IngestParams{Step: warehouse.StepBatch, Generation: 1, Index: 2,
		Files: dup, Apply: warehouse.IngestUpsert, Key: []string{"id"}}), warehouse.ErrDuplicateKey)
	require.False(t, g.hasMarker(1, warehouse.MarkerBatch, 2))
	require.NoError(t, g.apply(warehouse.IngestParams{Step: warehouse.StepBatch, Generation: 1, Index: 2,
		Files: g.stage(warehouse.FormatParquet, pairs(7, 8)...), Apply: warehouse.IngestReplace}))
	require.Equal(t, []int64{7, 8}, g.ids(g.view))
	require.NoError(t, g.batch(1, 3, false, g.stage(warehouse.FormatCSV, pairs(9)...)))
	require.Equal(t, []int64{7, 8, 9}, g.ids(g.view))
}

// Scenario: bad input (a missing staged file, an unknown format, no key
// for an upsert) fails with a clear error and leaves no marker and no row.
func testIngestBadInput(t *testing.T, f *fixture) {
	g := newIng(t, f)
	g.serve(1)
	missing := filepath.Join(g.dir, "missing.parquet")
	err := g.batch(1, 1, false, warehouse.StagedFiles{Format: warehouse.FormatParquet, Paths: []string{missing}})
	require.Error(t, err)
	require.Contains(t, err.Error(), "missing.parquet")
	require.False(t, g.hasMarker(1, warehouse.MarkerBatch, 1))
	err = g.batch(1, 1, false, warehouse.StagedFiles{Format: "xlsx", Paths: []string{missing}})
	require.ErrorIs(t, err, warehouse.ErrInvalidArgument)
	err = g.apply(warehouse.IngestParams{Step: warehouse.StepBatch, Generation: 1, Index: 1,
		Files: g.stage(warehouse.FormatCSV, pairs(2)...), Apply: warehouse.IngestUpsert})
	require.ErrorIs(t, err, warehouse.ErrInvalidArgument)
	require.Equal(t, []int64{1}, g.ids(g.view))
	require.NoError(t, g.batch(1, 1, false, g.stage(warehouse.FormatCSV, pairs(2)...)))
	require.Equal(t, []int64{1, 2}, g.ids(g.view))
}

// stageJSON writes lines as a staged NDJSON file.
func (g *ing) stageJSON(lines ...string) warehouse.StagedFiles {
	g.t.Helper()
	g.n++
	path := filepath.Join(g.dir, fmt.Sprintf("f%03d.ndjson", g.n))
	require.NoError(g.t, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
	return warehouse.StagedFiles{Format: warehouse.FormatJSON, Paths: []string{path}}
}

// Scenario: generation 2's snapshot is pinned at position 20, inside live
// batch 2 (positions 15 to 25). Catching up with batch 2, it skips the rows
// at or below its pin, which its snapshot holds: every row once.
func testRowsBelowPinSkipped(t *testing.T, f *fixture) {
	g := newIng(t, f)
	g.fence(0, 1, 0)
	require.NoError(t, g.chunk(1, 0, g.stageJSON(`{"id": 1, "_gapless_pos": 10}`)))
	require.NoError(t, g.swap(1, 1))
	b2 := g.stageJSON(`{"id": 2, "_gapless_pos": 15}`, `{"id": 3, "_gapless_pos": 25}`)
	g.fence(1, 2, 1)
	require.NoError(t, g.chunk(2, 0, g.stageJSON(`{"id": 1, "_gapless_pos": 10}`, `{"id": 2, "_gapless_pos": 15}`)))
	require.NoError(t, g.batch(1, 1, false, g.stageJSON(`{"id": 99, "_gapless_pos": 12}`)))
	require.NoError(t, g.batch(1, 2, false, b2))
	require.NoError(t, g.apply(warehouse.IngestParams{Step: warehouse.StepBatch, Generation: 2, Index: 2, CatchUp: true, Files: b2, Pin: 20}))
	require.Equal(t, []int64{1, 2, 3}, g.ids(g.phys(2)))
	require.NoError(t, g.swap(2, 1))
	require.Equal(t, []int64{1, 2, 3}, g.ids(g.view))
}

// Scenario: the next generation's files have other columns (one more, then
// one fewer): the swap still repoints the source's view, and a view model
// over it that names the columns kept keeps working.
func testViewColumnsChangeAcrossSwap(t *testing.T, f *fixture) {
	g := newIng(t, f)
	g.serve(1, 2)
	model := f.table("ids")
	require.NoError(t, f.e.CreateOrReplaceView(f.ctx, warehouse.ViewParams{View: model, Query: "SELECT id FROM " + g.q(g.view)}))
	g.fence(1, 2, 0)
	require.NoError(t, g.chunk(2, 0, g.stageJSON(`{"id": 1, "v": "a", "w": 1}`, `{"id": 2, "v": "b", "w": 2}`, `{"id": 3, "v": "c", "w": 3}`)))
	require.NoError(t, g.swap(2, 1))
	require.Equal(t, [][]any{{int64(3)}}, g.query("SELECT w FROM "+g.q(g.view)+" WHERE id = 3"))
	require.Equal(t, []int64{1, 2, 3}, g.ids(model))
	g.fence(2, 3, 0)
	require.NoError(t, g.chunk(3, 0, g.stageJSON(`{"id": 4}`, `{"id": 5}`)))
	require.NoError(t, g.swap(3, 1))
	require.Equal(t, []int64{4, 5}, g.ids(model))
	cols, err := f.e.Columns(f.ctx, g.view)
	require.NoError(t, err)
	require.Len(t, cols, 1)
}

// Scenario: generation 1's table exists with rows no chunk marker accounts
// for (left by a build that died outside a step's transaction): chunk 0
// re-creates the table, so only the snapshot's rows are in it.
func testChunkZeroCleansACrashedBuild(t *testing.T, f *fixture) {
	g := newIng(t, f)
	g.fence(0, 1, 0)
	f.createAs(g.phys(1), "SELECT CAST(77 AS BIGINT) AS id, CAST('junk' AS VARCHAR) AS v")
	require.NoError(t, g.chunk(1, 0, g.stage(warehouse.FormatParquet, pairs(1, 2)...)))
	require.Equal(t, []int64{1, 2}, g.ids(g.phys(1)))
}

// Scenario: the ingest worker is stopped before a step runs: the step fails
// with the cancellation and leaves no marker and no row; run again, it
// applies.
func testCancelledStepWritesNothing(t *testing.T, f *fixture) {
	g := newIng(t, f)
	g.serve(1)
	ctx, cancel := context.WithCancel(f.ctx)
	cancel()
	b1 := g.stage(warehouse.FormatParquet, pairs(2)...)
	_, err := g.in.ApplyIngest(ctx, warehouse.IngestParams{Source: ingestSource, Step: warehouse.StepBatch, Generation: 1, Index: 1,
		Table: g.phys(1), Files: b1, Apply: warehouse.IngestAppend})
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, g.hasMarker(1, warehouse.MarkerBatch, 1))
	require.Equal(t, []int64{1}, g.ids(g.view))
	require.NoError(t, g.batch(1, 1, false, b1))
	require.Equal(t, []int64{1, 2}, g.ids(g.view))
}

// Scenario: a live batch onto the serving generation races the swap of the
// next one, round after round. Exactly one of them wins each time: either
// the batch commits and the swap is behind, or the swap commits and the
// batch is fenced off the retired table. Applying the loser again (the
// batch onto whichever generation serves, after catching the new one up)
// ends every round with every row once: no row a table served vanishes.
func testSwapRacingABatchNeverLosesIt(t *testing.T, f *fixture) {
	g := newIng(t, f)
	g.serve(1)
	want := []int64{1}
	serving, seq := int64(1), int64(0)
	for round := int64(2); round <= 5; round++ {
		// Plan generation round from a snapshot of what serves.
		g.fence(round-1, round, seq)
		require.NoError(t, g.chunk(round, 0, g.stage(warehouse.FormatParquet, pairs(want...)...)))
		seq++
		id := 100 + round
		b := g.stage(warehouse.FormatParquet, pairs(id)...)
		want = append(want, id)
		var batchErr, swapErr error
		start := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			<-start
			_, batchErr = g.in.ApplyIngest(g.ctx, warehouse.IngestParams{Source: ingestSource, Step: warehouse.StepBatch,
				Generation: serving, Index: seq, Table: g.phys(serving), Files: b, Apply: warehouse.IngestAppend})
		})
		wg.Go(func() {
			<-start
			_, swapErr = g.in.ApplyIngest(g.ctx, warehouse.IngestParams{Source: ingestSource, Step: warehouse.StepSwap,
				Generation: round, Chunks: 1, Table: g.phys(round), View: g.view})
		})
		close(start)
		wg.Wait()
		switch {
		case batchErr == nil:
			require.ErrorIs(t, swapErr, warehouse.ErrBehind, "round %d: the batch committed, so the swap must be behind", round)
			require.NoError(t, g.batch(round, seq, true, b))
			require.NoError(t, g.swap(round, 1))
		case swapErr == nil:
			require.ErrorIs(t, batchErr, warehouse.ErrFenced, "round %d: the swap committed, so the batch must be fenced", round)
			require.NoError(t, g.batch(round, seq, false, b))
		default:
			require.Failf(t, "neither won", "round %d: batch: %v; swap: %v", round, batchErr, swapErr)
		}
		serving = round
		require.Equal(t, want, g.ids(g.view), "round %d", round)
	}
}
