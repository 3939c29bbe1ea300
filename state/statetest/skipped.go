package statetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/state"
)

// skippedTests check RecordSkipped: a batch whose staged data is gone
// marked skipped once, with its event in the same transaction, pinned to
// {source, generation, seq}.
func skippedTests() []test {
	return []test{
		{"MarksOnceWithItsEvent", testSkippedMarksOnce},
		{"RefusesUnstagedSeqAndRetiredGeneration", testSkippedRefused},
	}
}

// skippedEvents returns the events of kind source_batch_skipped of src.
func skippedEvents(t testing.TB, b *bundle) []state.Event {
	t.Helper()
	var out []state.Event
	for _, e := range sourceEvents(t, b) {
		if e.Kind == state.EventSourceBatchSkipped {
			out = append(out, e)
		}
	}
	return out
}

func testSkippedMarksOnce(t *testing.T, b *bundle) {
	// Scenario: generation 1 serves with batch 1 applied; batch 2 blocks.
	// Its skip at hour 3 marks batch 2 skipped (shown by ListBatches,
	// batches 1 and 3 not), moves the applied seq to 2, clears the block
	// and appends one source_batch_skipped event naming generation 1, seq
	// 2 and its file, with the reason. Recording it again at hour 4 (a
	// replay) keeps hour 3 and adds no event; so does a build in flight,
	// generation 2, skipping it too, which moves only generation 2's
	// applied seq.
	ensure(t, b, "h1", hour(0))
	stage(t, b, 1, file(1), file(2), file(3))
	plan(t, b, 1, hour(1))
	swap(t, b, 1, hour(2))
	applied(t, b, 1, 1)
	block(t, b, 1, 2, "landing/events/002.csv: bad", 2)
	skip := func(g int64, now int) state.Batch {
		t.Helper()
		out, err := b.store.RecordSkipped(b.ctx, state.RecordSkippedParams{Source: src, Generation: g, Seq: 2,
			Reason: "landing/events/002.csv was removed", Now: hour(now)})
		require.NoError(t, err)
		return out
	}
	got := skip(1, 3)
	require.Equal(t, int64(2), got.Seq)
	require.True(t, got.SkippedAt.Equal(hour(3)))
	bs := listBatches(t, b)
	require.Len(t, bs, 3)
	require.True(t, bs[0].SkippedAt.IsZero())
	require.True(t, bs[1].SkippedAt.Equal(hour(3)), "batch 2 is skipped")
	require.True(t, bs[2].SkippedAt.IsZero())
	require.Equal(t, int64(2), appliedSeq(t, b, 1))
	require.Nil(t, getSource(t, b).Blocked, "the skip clears the block")
	evs := skippedEvents(t, b)
	require.Len(t, evs, 1)
	require.Equal(t, "landing/events/002.csv was removed", evs[0].Reason)
	require.Equal(t, state.SourceEventData{Generation: 1, Seq: 2, Location: "landing/events/002.csv"}, eventData(t, evs[0]))
	require.True(t, evs[0].At.Equal(hour(3)))

	got = skip(1, 4)
	require.True(t, got.SkippedAt.Equal(hour(3)), "a replay keeps the first skip")
	require.Len(t, skippedEvents(t, b), 1, "a replay appends no event")

	_, err := b.store.RequestBuild(b.ctx, state.RequestBuildParams{Source: src, Reason: "resync", Now: hour(5)})
	require.NoError(t, err)
	plan(t, b, 1, hour(5))
	skip(2, 6)
	require.Equal(t, int64(2), appliedSeq(t, b, 2))
	require.Equal(t, int64(2), appliedSeq(t, b, 1))
	require.Len(t, skippedEvents(t, b), 1, "skipped already: no second event")
	require.True(t, listBatches(t, b)[1].SkippedAt.Equal(hour(3)))
}

func testSkippedRefused(t *testing.T, b *bundle) {
	// Scenario: an unknown source is ErrNotFound. A seq never staged, a
	// pruned one, no reason or no Now are refused; so are a generation
	// retired by a resync (ErrConflictingGeneration) and an unknown one.
	// None marks a batch or writes an event.
	_, err := b.store.RecordSkipped(b.ctx, state.RecordSkippedParams{Source: src, Generation: 1, Seq: 1, Reason: "y", Now: hour(1)})
	require.ErrorIs(t, err, state.ErrNotFound)
	ensure(t, b, "h1", hour(0))
	stage(t, b, 1, file(1), file(2), file(3))
	plan(t, b, 1, hour(1))
	swap(t, b, 1, hour(2))
	_, err = b.store.PruneBatches(b.ctx, state.PruneBatchesParams{Source: src, BelowSeq: 2})
	require.NoError(t, err)
	for _, p := range []state.RecordSkippedParams{
		{Source: src, Generation: 1, Seq: 4, Reason: "y", Now: hour(3)},
		{Source: src, Generation: 1, Seq: 1, Reason: "y", Now: hour(3)},
		{Source: src, Generation: 1, Seq: 0, Reason: "y", Now: hour(3)},
		{Source: src, Generation: 1, Seq: 2, Now: hour(3)},
		{Source: src, Generation: 1, Seq: 2, Reason: "y"},
		{Generation: 1, Seq: 2, Reason: "y", Now: hour(3)},
	} {
		_, err := b.store.RecordSkipped(b.ctx, p)
		require.Errorf(t, err, "%+v", p)
	}
	_, err = b.store.RecordSkipped(b.ctx, state.RecordSkippedParams{Source: src, Generation: 9, Seq: 2, Reason: "y", Now: hour(3)})
	require.ErrorIs(t, err, state.ErrConflictingGeneration)

	_, err = b.store.RequestBuild(b.ctx, state.RequestBuildParams{Source: src, Reason: "resync", Now: hour(4)})
	require.NoError(t, err)
	plan(t, b, 1, hour(5))
	_, err = b.store.RequestBuild(b.ctx, state.RequestBuildParams{Source: src, Retire: 2, Reason: "resync", Now: hour(6)})
	require.NoError(t, err)
	_, err = b.store.RecordSkipped(b.ctx, state.RecordSkippedParams{Source: src, Generation: 2, Seq: 2, Reason: "y", Now: hour(7)})
	require.ErrorIs(t, err, state.ErrConflictingGeneration)

	for _, x := range listBatches(t, b) {
		require.Truef(t, x.SkippedAt.IsZero(), "batch %d", x.Seq)
	}
	require.Empty(t, skippedEvents(t, b))
	require.Equal(t, int64(0), appliedSeq(t, b, 1))
}
