package statetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/state"
)

// appliedTests check RecordApplied: the per-generation applied seq, a
// compare-and-swap pinned to {source, generation} that only moves forward.
func appliedTests() []test {
	return []test{
		{"MovesOnlyForward", testAppliedForward},
		{"RetiredGenerationIsRefused", testAppliedRetired},
		{"KeptAcrossTransitions", testAppliedKept},
		{"ConcurrentRecordersEndAtTheMax", testAppliedRace},
		{"RejectsBadCalls", testAppliedBad},
		{"ChunksMoveOnlyForward", testAppliedChunks},
		{"TimesMoveOnlyForward", testAppliedTimes},
	}
}

// applied records seq applied to generation g of src, failing on error.
func applied(t testing.TB, b *bundle, g, seq int64) state.Generation {
	t.Helper()
	out, err := b.store.RecordApplied(b.ctx, state.RecordAppliedParams{Source: src, Generation: g, Seq: seq})
	require.NoError(t, err)
	return out
}

// appliedSeq reads generation g's applied seq from GetSource.
func appliedSeq(t testing.TB, b *bundle, g int64) int64 {
	t.Helper()
	for _, gen := range getSource(t, b).Generations {
		if gen.Generation == g {
			return gen.AppliedSeq
		}
	}
	require.Failf(t, "no such generation", "generation %d", g)
	return 0
}

func testAppliedForward(t *testing.T, b *bundle) {
	// Scenario: four batches are staged (the source's LastSeq is 4) and
	// generation 1 built; its applied seq moves 1 -> 3; recording 2, or 3
	// again, is a no-op returning 3; a seq never staged (5) is refused and
	// leaves 3; then 4 is recorded.
	ensure(t, b, "h1", hour(0))
	stage(t, b, 1, file(1), file(2), file(3), file(4))
	require.Equal(t, int64(4), getSource(t, b).LastSeq)
	plan(t, b, 1, hour(2))
	require.Zero(t, appliedSeq(t, b, 1))

	require.Equal(t, int64(1), applied(t, b, 1, 1).AppliedSeq)
	require.Equal(t, int64(3), applied(t, b, 1, 3).AppliedSeq)
	require.Equal(t, int64(3), applied(t, b, 1, 2).AppliedSeq, "moving backward returns the stored seq")
	require.Equal(t, int64(3), applied(t, b, 1, 3).AppliedSeq)
	require.Equal(t, int64(3), appliedSeq(t, b, 1))

	_, err := b.store.RecordApplied(b.ctx, state.RecordAppliedParams{Source: src, Generation: 1, Seq: 5})
	require.Error(t, err)
	require.Contains(t, err.Error(), "never staged")
	require.Equal(t, int64(3), appliedSeq(t, b, 1))

	require.Equal(t, int64(4), applied(t, b, 1, 4).AppliedSeq)
	require.Equal(t, int64(4), appliedSeq(t, b, 1))
}

func testAppliedRetired(t *testing.T, b *bundle) {
	// Scenario: generation 1 serves with seq 2 applied; generation 2 is
	// built and swapped in, retiring generation 1. A late recorder of
	// generation 1 (seq 3) is refused with ErrConflictingGeneration and
	// generation 1 keeps 2. A building generation retired by a resync
	// (generation 3) is refused the same way, and an unknown generation
	// too.
	ensure(t, b, "h1", hour(0))
	stage(t, b, 1, file(1), file(2), file(3))
	plan(t, b, 1, hour(2))
	swap(t, b, 1, hour(3))
	applied(t, b, 1, 2)
	_, err := b.store.RequestBuild(b.ctx, state.RequestBuildParams{Source: src, Reason: "resync", Now: hour(4)})
	require.NoError(t, err)
	plan(t, b, 3, hour(5))
	swap(t, b, 2, hour(6))

	_, err = b.store.RecordApplied(b.ctx, state.RecordAppliedParams{Source: src, Generation: 1, Seq: 3})
	require.ErrorIs(t, err, state.ErrConflictingGeneration)
	require.Equal(t, int64(2), appliedSeq(t, b, 1))

	_, err = b.store.RequestBuild(b.ctx, state.RequestBuildParams{Source: src, Reason: "resync", Now: hour(7)})
	require.NoError(t, err)
	plan(t, b, 3, hour(8))
	_, err = b.store.RetireGeneration(b.ctx, state.RetireGenerationParams{Source: src, Generation: 3, Reason: "superseded", Now: hour(9)})
	require.NoError(t, err)
	_, err = b.store.RecordApplied(b.ctx, state.RecordAppliedParams{Source: src, Generation: 3, Seq: 3})
	require.ErrorIs(t, err, state.ErrConflictingGeneration)
	require.Zero(t, appliedSeq(t, b, 3))

	_, err = b.store.RecordApplied(b.ctx, state.RecordAppliedParams{Source: src, Generation: 9, Seq: 1})
	require.ErrorIs(t, err, state.ErrConflictingGeneration)
}

func testAppliedKept(t *testing.T, b *bundle) {
	// Scenario: a building generation's applied seq (its catch-up) is
	// kept by its RecordSwap, and the serving one's by the swap that
	// retires it: transitions rewrite generation rows, never the seq.
	ensure(t, b, "h1", hour(0))
	stage(t, b, 1, file(1), file(2), file(3))
	plan(t, b, 1, hour(2))
	applied(t, b, 1, 2)
	swap(t, b, 1, hour(3))
	require.Equal(t, int64(2), appliedSeq(t, b, 1))
	applied(t, b, 1, 3)
	_, err := b.store.RequestBuild(b.ctx, state.RequestBuildParams{Source: src, Reason: "resync", Now: hour(4)})
	require.NoError(t, err)
	plan(t, b, 3, hour(5))
	applied(t, b, 2, 3)
	s := swap(t, b, 2, hour(6))
	require.Equal(t, int64(2), s.Serving)
	require.Equal(t, int64(3), appliedSeq(t, b, 1))
	require.Equal(t, int64(3), appliedSeq(t, b, 2))
	require.Equal(t, int64(3), getSource(t, b).LastSeq)
}

func testAppliedRace(t *testing.T, b *bundle) {
	// Scenario: 8 recorders of one generation, recording seqs 1..8, start
	// together. Every call succeeds, none returns less than its own seq,
	// and the generation ends at 8, whatever the order they ran in.
	ensure(t, b, "h1", hour(0))
	var batches []state.Batch
	for i := range int64(racers) {
		batches = append(batches, file(i+1))
	}
	stage(t, b, 1, batches...)
	plan(t, b, racers, hour(2))
	swap(t, b, 1, hour(3))
	outs := make([]state.Generation, racers)
	errs := make([]error, racers)
	race(racers, func(i int) {
		outs[i], errs[i] = b.store.RecordApplied(b.ctx, state.RecordAppliedParams{Source: src, Generation: 1, Seq: int64(i + 1)})
	})
	for i := range racers {
		require.NoError(t, errs[i])
		require.GreaterOrEqual(t, outs[i].AppliedSeq, int64(i+1))
	}
	require.Equal(t, int64(racers), appliedSeq(t, b, 1))
}

func testAppliedBad(t *testing.T, b *bundle) {
	// Scenario: an unknown source is ErrNotFound; no source name, a
	// generation 0 or a negative seq are refused.
	_, err := b.store.RecordApplied(b.ctx, state.RecordAppliedParams{Source: src, Generation: 1, Seq: 1})
	require.ErrorIs(t, err, state.ErrNotFound)
	ensure(t, b, "h1", hour(0))
	stage(t, b, 1, file(1))
	plan(t, b, 1, hour(2))
	for _, p := range []state.RecordAppliedParams{
		{Generation: 1, Seq: 1},
		{Source: src, Seq: 1},
		{Source: src, Generation: 1, Seq: -1},
	} {
		_, err := b.store.RecordApplied(b.ctx, p)
		require.Errorf(t, err, "%+v", p)
	}
	require.Zero(t, appliedSeq(t, b, 1))
}

func testAppliedChunks(t *testing.T, b *bundle) {
	// Scenario: generation 1 is planned with 3 chunks; its chunks applied
	// move 0 -> 2, recording 1 is a no-op returning 2, 4 (above its 3
	// chunks) is refused leaving 2, then 3; the applied seq is untouched.
	// Once retired by a resync, generation 1 is refused its chunks.
	ensure(t, b, "h1", hour(0))
	stage(t, b, 1, file(1))
	g := plan(t, b, 1, hour(2))
	require.Equal(t, 3, g.Chunks)
	rec := func(gen int64, chunks int) (state.Generation, error) {
		return b.store.RecordApplied(b.ctx, state.RecordAppliedParams{Source: src, Generation: gen, Chunks: chunks})
	}
	chunksOf := func() int { return generation(t, getSource(t, b), 1).ChunksApplied }
	require.Zero(t, chunksOf())
	out, err := rec(1, 2)
	require.NoError(t, err)
	require.Equal(t, 2, out.ChunksApplied)
	out, err = rec(1, 1)
	require.NoError(t, err)
	require.Equal(t, 2, out.ChunksApplied, "moving backward returns the stored count")
	_, err = rec(1, 4)
	require.Error(t, err)
	require.Equal(t, 2, chunksOf())
	_, err = rec(1, 3)
	require.NoError(t, err)
	require.Equal(t, 3, chunksOf())
	require.Zero(t, appliedSeq(t, b, 1))

	_, err = b.store.RequestBuild(b.ctx, state.RequestBuildParams{Source: src, Retire: 1, Reason: "resync", Now: hour(3)})
	require.NoError(t, err)
	_, err = rec(1, 3)
	require.ErrorIs(t, err, state.ErrConflictingGeneration)
}
