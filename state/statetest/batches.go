package statetest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/state"
)

// batchTests check the sources' live queue (state.BatchQueue).
func batchTests() []test {
	return []test{
		{"StageIsIdempotentByPosition", testBatchStageIdempotent},
		{"OverlapRefusesTheWholeCall", testBatchOverlap},
		{"ListPagesInSeqOrder", testBatchList},
		{"SeqsAreNeverReused", testBatchSeqNeverReused},
		{"ConcurrentStagersStageOnce", testBatchRace},
		{"RejectsBadBatches", testBatchBad},
	}
}

// file returns an append batch of the file at position n, [n, n+1).
func file(n int64) state.Batch {
	return state.Batch{From: n, To: n + 1, Kind: state.BatchAppend, Location: fmt.Sprintf("landing/events/%03d.csv", n), Rows: 10 * n,
		MinTime: hour(int(n)), MaxTime: hour(int(n) + 1)}
}

// stage stages batches of src at now, failing the test on error.
func stage(t testing.TB, b *bundle, now int, batches ...state.Batch) []state.Batch {
	t.Helper()
	out, err := b.store.StageBatches(b.ctx, state.StageBatchesParams{Source: src, Batches: batches, Now: hour(now)})
	require.NoError(t, err)
	return out
}

// listBatches lists every batch of src.
func listBatches(t testing.TB, b *bundle) []state.Batch {
	t.Helper()
	out, err := b.store.ListBatches(b.ctx, state.ListBatchesParams{Source: src})
	require.NoError(t, err)
	return out
}

func testBatchStageIdempotent(t *testing.T, b *bundle) {
	// Scenario: three files are staged (seqs 1..3, every field kept); a
	// crashed poller stages the last two again with a fourth: the two are
	// the staged ones (same seqs, first staging time), only the fourth is
	// new (seq 4).
	ensure(t, b, "h1", hour(0))
	first := stage(t, b, 1, file(1), file(2), file(3))
	for i, got := range first {
		want := file(int64(i + 1))
		want.Source, want.Seq, want.StagedAt = src, int64(i+1), hour(1)
		require.Equal(t, want, normBatch(got))
	}
	again := stage(t, b, 2, file(2), file(3), file(4))
	require.Equal(t, first[1:], again[:2])
	require.Equal(t, int64(4), again[2].Seq)
	require.Equal(t, hour(2), again[2].StagedAt.UTC())
	all := listBatches(t, b)
	require.Len(t, all, 4)
	for i, got := range all {
		require.Equal(t, int64(i+1), got.Seq)
		require.Equal(t, int64(i+1), got.From)
	}
	require.Equal(t, normBatch(first[0]), normBatch(all[0]))
}

// normBatch returns b with its times in UTC.
func normBatch(b state.Batch) state.Batch {
	b.MinTime, b.MaxTime, b.StagedAt = b.MinTime.UTC(), b.MaxTime.UTC(), b.StagedAt.UTC()
	return b
}

func testBatchOverlap(t *testing.T, b *bundle) {
	// Scenario: files 1 and 2 are staged. A call that stages file 3 and
	// then a batch at position 2 that is not the staged one (another file),
	// or that starts inside a staged batch, is refused whole: file 3 is not
	// staged either.
	ensure(t, b, "h1", hour(0))
	stage(t, b, 1, file(1), file(2))
	other := file(2)
	other.Location = "landing/events/other.csv"
	inside := state.Batch{From: 1, To: 3, Kind: state.BatchAppend, Location: "x"}
	for _, bad := range []state.Batch{other, inside} {
		_, err := b.store.StageBatches(b.ctx, state.StageBatchesParams{Source: src, Batches: []state.Batch{file(3), bad}, Now: hour(2)})
		require.Errorf(t, err, "%+v", bad)
		_, err = b.store.StageBatches(b.ctx, state.StageBatchesParams{Source: src, Batches: []state.Batch{bad}, Now: hour(2)})
		require.Errorf(t, err, "%+v", bad)
	}
	require.Len(t, listBatches(t, b), 2)
	require.Equal(t, int64(3), stage(t, b, 3, file(3))[0].Seq)
}

func testBatchList(t *testing.T, b *bundle) {
	// Scenario: five batches are listed in pages of two after a seq; a
	// negative limit is an error; another source's queue is its own.
	ensure(t, b, "h1", hour(0))
	_, err := b.store.EnsureSources(b.ctx, state.EnsureSourcesParams{
		Sources: []state.SourceDefinition{{Name: "raw.other", Connector: "files"}}, Now: hour(0),
	})
	require.NoError(t, err)
	stage(t, b, 1, file(1), file(2), file(3), file(4), file(5))
	_, err = b.store.StageBatches(b.ctx, state.StageBatchesParams{Source: "raw.other", Batches: []state.Batch{file(1)}, Now: hour(1)})
	require.NoError(t, err)
	var seqs []int64
	after := int64(0)
	for {
		page, err := b.store.ListBatches(b.ctx, state.ListBatchesParams{Source: src, AfterSeq: after, Limit: 2})
		require.NoError(t, err)
		require.LessOrEqual(t, len(page), 2)
		if len(page) == 0 {
			break
		}
		for _, p := range page {
			seqs = append(seqs, p.Seq)
			after = p.Seq
		}
	}
	require.Equal(t, []int64{1, 2, 3, 4, 5}, seqs)
	_, err = b.store.ListBatches(b.ctx, state.ListBatchesParams{Source: src, Limit: -1})
	require.Error(t, err)
	other, err := b.store.ListBatches(b.ctx, state.ListBatchesParams{Source: "raw.other"})
	require.NoError(t, err)
	require.Len(t, other, 1)
	require.Equal(t, int64(1), other[0].Seq)
}

func testBatchSeqNeverReused(t *testing.T, b *bundle) {
	// Scenario: batches 1..3 are staged and 1..2 pruned; the next is 4.
	// All are pruned; the next is still 5, and a pruned batch staged again
	// is refused (it is behind the queue), not staged twice. The source is
	// removed (its queue dropped) and defined again: positions start over,
	// seqs do not.
	ensure(t, b, "h1", hour(0))
	stage(t, b, 1, file(1), file(2), file(3))
	n, err := b.store.PruneBatches(b.ctx, state.PruneBatchesParams{Source: src, BelowSeq: 3})
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
	require.Equal(t, int64(4), stage(t, b, 2, file(4))[0].Seq)
	_, err = b.store.PruneBatches(b.ctx, state.PruneBatchesParams{Source: src, BelowSeq: 5})
	require.NoError(t, err)
	require.Empty(t, listBatches(t, b))
	require.Equal(t, int64(5), stage(t, b, 3, file(5))[0].Seq)
	_, err = b.store.StageBatches(b.ctx, state.StageBatchesParams{Source: src, Batches: []state.Batch{file(1)}, Now: hour(4)})
	require.Error(t, err)

	_, err = b.store.RemoveSource(b.ctx, state.RemoveSourceParams{Source: src, Now: hour(5)})
	require.NoError(t, err)
	_, err = b.store.StageBatches(b.ctx, state.StageBatchesParams{Source: src, Batches: []state.Batch{file(6)}, Now: hour(6)})
	require.ErrorIs(t, err, state.ErrNotFound)
	ensure(t, b, "h1", hour(7))
	require.Empty(t, listBatches(t, b))
	require.Equal(t, int64(6), stage(t, b, 8, file(1))[0].Seq)
}

func testBatchRace(t *testing.T, b *bundle) {
	// Scenario: 8 pollers stage the same two files at once. Both are
	// staged once (seqs 1 and 2), and every poller gets them back.
	ensure(t, b, "h1", hour(0))
	outs := make([][]state.Batch, racers)
	errs := make([]error, racers)
	race(racers, func(i int) {
		outs[i], errs[i] = b.store.StageBatches(b.ctx, state.StageBatchesParams{Source: src, Batches: []state.Batch{file(1), file(2)}, Now: hour(1)})
	})
	for i := range racers {
		require.NoError(t, errs[i])
		require.Len(t, outs[i], 2)
		require.Equal(t, []int64{1, 2}, []int64{outs[i][0].Seq, outs[i][1].Seq})
	}
	require.Len(t, listBatches(t, b), 2)
}

func testBatchBad(t *testing.T, b *bundle) {
	// Scenario: an empty or reversed range, no location, an unknown kind,
	// a replace batch without its run, no Now, or an unknown source are
	// refused; nothing is staged.
	_, err := b.store.StageBatches(b.ctx, state.StageBatchesParams{Source: src, Batches: []state.Batch{file(1)}, Now: hour(1)})
	require.ErrorIs(t, err, state.ErrNotFound)
	ensure(t, b, "h1", hour(0))
	for _, bad := range []state.Batch{
		{From: 2, To: 2, Kind: state.BatchAppend, Location: "a"},
		{From: 3, To: 2, Kind: state.BatchAppend, Location: "a"},
		{From: 1, To: 2, Kind: state.BatchAppend},
		{From: 1, To: 2, Kind: "merge", Location: "a"},
		{From: 1, To: 2, Kind: state.BatchReplaceHead, Location: "a"},
	} {
		_, err := b.store.StageBatches(b.ctx, state.StageBatchesParams{Source: src, Batches: []state.Batch{file(0), bad}, Now: hour(1)})
		require.Errorf(t, err, "%+v", bad)
	}
	_, err = b.store.StageBatches(b.ctx, state.StageBatchesParams{Source: src, Batches: []state.Batch{file(1)}})
	require.ErrorIs(t, err, state.ErrNoNow)
	require.Empty(t, listBatches(t, b))
	head := state.Batch{From: 1, To: 2, Kind: state.BatchReplaceHead, ReplaceRun: "full/run-1", Location: "landing/events/full/run-1/a.csv"}
	require.Equal(t, "full/run-1", stage(t, b, 2, head)[0].ReplaceRun)
}
