package warehousetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/warehouse"
)

// The skip contract (warehouse.IngestParams.Skip), on every engine: a
// skipped batch passes the fence and order checks of any batch and writes
// its marker (0 rows) and nothing else, so the batch after it applies, a
// replay of it is already applied, and a retired generation's skip is
// fenced.
var skipScenarios = []scenario{
	{"SkipKeepsTheOrder", testSkipKeepsTheOrder},
	{"ReplayedSkipIsAlreadyApplied", testReplayedSkipIsAlreadyApplied},
	{"SkipOfRetiredGenerationIsFenced", testSkipOfRetiredGenerationIsFenced},
	{"SkipNamesNoFiles", testSkipNamesNoFiles},
}

// skip skips batch seq of generation gen.
func (g *ing) skip(gen, seq int64, catchUp bool) error {
	g.t.Helper()
	return g.apply(warehouse.IngestParams{Step: warehouse.StepBatch, Generation: gen, Index: seq, CatchUp: catchUp, Skip: true})
}

// marker returns the source's marker, failing the test when it is absent.
func (g *ing) marker(gen int64, kind string, idx int64) warehouse.IngestMarker {
	g.t.Helper()
	for _, m := range g.state().Markers {
		if m.Generation == gen && m.Kind == kind && m.Index == idx {
			return m
		}
	}
	require.Failf(g.t, "no marker", "generation %d %s %d", gen, kind, idx)
	return warehouse.IngestMarker{}
}

// Scenario: generation 1 serves; batch 2's file is gone for good, so
// batch 2 is skipped after batch 1 applied. The skip writes batch 2's
// marker with 0 rows and no row; batch 3 then applies in order. A skip of
// batch 5 before batch 4 is out of order, as a batch would be.
func testSkipKeepsTheOrder(t *testing.T, f *fixture) {
	g := newIng(t, f)
	g.serve(1)
	require.NoError(t, g.batch(1, 1, false, g.stage(warehouse.FormatCSV, pairs(2)...)))
	require.ErrorIs(t, g.skip(1, 3, false), warehouse.ErrOutOfOrder, "a skip before its predecessor")
	require.NoError(t, g.skip(1, 2, false))
	require.Equal(t, int64(0), g.marker(1, warehouse.MarkerBatch, 2).Rows)
	require.Equal(t, []int64{1, 2}, g.ids(g.view))
	require.NoError(t, g.batch(1, 3, false, g.stage(warehouse.FormatCSV, pairs(4)...)))
	require.Equal(t, []int64{1, 2, 4}, g.ids(g.view))
	require.ErrorIs(t, g.skip(1, 5, false), warehouse.ErrOutOfOrder)
	require.False(t, g.hasMarker(1, warehouse.MarkerBatch, 5))
}

// Scenario: a skip is replayed after it committed (a crash before the
// state store heard of it): the replay is already applied, and so is the
// batch itself should its file come back, writing no row.
func testReplayedSkipIsAlreadyApplied(t *testing.T, f *fixture) {
	g := newIng(t, f)
	g.serve(1)
	require.NoError(t, g.skip(1, 1, false))
	require.ErrorIs(t, g.skip(1, 1, false), warehouse.ErrAlreadyApplied)
	require.ErrorIs(t, g.batch(1, 1, false, g.stage(warehouse.FormatCSV, pairs(9)...)), warehouse.ErrAlreadyApplied)
	require.Equal(t, []int64{1}, g.ids(g.view))
	require.Equal(t, int64(0), g.marker(1, warehouse.MarkerBatch, 1).Rows)
}

// Scenario: generation 2 is planned and swapped in over generation 1: a
// late skip of generation 1 is fenced and writes no marker; generation
// 2's skip, before its swap, is fenced too unless it catches up.
func testSkipOfRetiredGenerationIsFenced(t *testing.T, f *fixture) {
	g := newIng(t, f)
	g.serve(1)
	g.fence(1, 2, 0)
	require.NoError(t, g.chunk(2, 0, g.stage(warehouse.FormatParquet, pairs(1)...)))
	require.ErrorIs(t, g.skip(2, 1, false), warehouse.ErrFenced, "a live skip of a generation that does not serve")
	require.NoError(t, g.skip(2, 1, true))
	require.NoError(t, g.swap(2, 1))
	require.ErrorIs(t, g.skip(1, 1, false), warehouse.ErrFenced)
	require.False(t, g.hasMarker(1, warehouse.MarkerBatch, 1))
	require.Equal(t, int64(2), g.state().ServingGeneration)
	require.Equal(t, []int64{1}, g.ids(g.view))
}

// Scenario: a skip that names staged files, or a pin, or that is not a
// batch, is an invalid argument and writes nothing; a batch that is not a
// skip still needs its files.
func testSkipNamesNoFiles(t *testing.T, f *fixture) {
	g := newIng(t, f)
	g.serve(1)
	files := g.stage(warehouse.FormatCSV, pairs(2)...)
	for _, p := range []warehouse.IngestParams{
		{Step: warehouse.StepBatch, Generation: 1, Index: 1, Skip: true, Files: files},
		{Step: warehouse.StepBatch, Generation: 1, Index: 1, Skip: true, Pin: 3},
		{Step: warehouse.StepChunk, Generation: 1, Index: 1, Skip: true},
		{Step: warehouse.StepBatch, Generation: 1, Index: 0, Skip: true},
		{Step: warehouse.StepBatch, Generation: 1, Index: 1},
	} {
		require.ErrorIs(t, g.apply(p), warehouse.ErrInvalidArgument, "%+v", p)
	}
	require.False(t, g.hasMarker(1, warehouse.MarkerBatch, 1))
	require.False(t, g.hasMarker(1, warehouse.MarkerChunk, 1))
	require.Equal(t, []int64{1}, g.ids(g.view))
}
