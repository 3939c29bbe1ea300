package statetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/state"
)

// blockedTests check RecordBlocked (a failing batch recorded, cleared by
// RecordApplied once it applies) and AddLateRows, both pinned to
// {source, generation}.
func blockedTests() []test {
	return []test{
		{"CountsAttemptsOfOneBatch", testBlockedAttempts},
		{"ClearedWhenTheBatchApplies", testBlockedCleared},
		{"StaleGenerationIsRefused", testBlockedStale},
		{"RejectsBadCalls", testBlockedBad},
		{"LateRowsAccumulate", testLateRows},
	}
}

// block records batch seq of src failing on generation g at now.
func block(t testing.TB, b *bundle, g, seq int64, reason string, now int) state.SourceBlock {
	t.Helper()
	out, err := b.store.RecordBlocked(b.ctx, state.RecordBlockedParams{Source: src, Generation: g, Seq: seq,
		Location: file(seq).Location, Reason: reason, Now: hour(now)})
	require.NoError(t, err)
	return out
}

func testBlockedAttempts(t *testing.T, b *bundle) {
	// Scenario: generation 1 serves with batch 1 applied; batch 2 fails at
	// hour 3 and again at hour 4 with another reason: one block, first
	// failed at 3, last at 4, two attempts, the last reason, shown on the
	// source. Batch 3 failing then (batch 2 was fixed) starts a new block.
	ensure(t, b, "h1", hour(0))
	stage(t, b, 1, file(1), file(2), file(3))
	plan(t, b, 1, hour(1))
	swap(t, b, 1, hour(2))
	applied(t, b, 1, 1)
	require.Nil(t, getSource(t, b).Blocked)

	block(t, b, 1, 2, "landing/events/002.csv: line 2: bad id", 3)
	got := block(t, b, 1, 2, "landing/events/002.csv: line 3: bad ts", 4)
	want := state.SourceBlock{Generation: 1, Seq: 2, Location: "landing/events/002.csv", Reason: "landing/events/002.csv: line 3: bad ts",
		FirstFailedAt: hour(3), LastFailedAt: hour(4), Attempts: 2}
	require.Equal(t, want, got)
	s := getSource(t, b)
	require.NotNil(t, s.Blocked)
	require.Equal(t, want, normBlock(*s.Blocked))

	applied(t, b, 1, 2)
	got = block(t, b, 1, 3, "landing/events/003.csv: empty", 5)
	require.Equal(t, state.SourceBlock{Generation: 1, Seq: 3, Location: "landing/events/003.csv", Reason: "landing/events/003.csv: empty",
		FirstFailedAt: hour(5), LastFailedAt: hour(5), Attempts: 1}, got)
	require.Equal(t, got, normBlock(*getSource(t, b).Blocked))
}

// normBlock puts a read block's times in UTC.
func normBlock(x state.SourceBlock) state.SourceBlock {
	x.FirstFailedAt, x.LastFailedAt = x.FirstFailedAt.UTC(), x.LastFailedAt.UTC()
	return x
}

func testBlockedCleared(t *testing.T, b *bundle) {
	// Scenario: batch 3 blocks generation 1, which serves. Recording batch
	// 2 applied keeps the block, and so does batch 3 applied to another
	// generation (a build in flight); batch 3 applied to generation 1
	// clears it.
	ensure(t, b, "h1", hour(0))
	stage(t, b, 1, file(1), file(2), file(3))
	plan(t, b, 1, hour(1))
	swap(t, b, 1, hour(2))
	applied(t, b, 1, 1)
	block(t, b, 1, 3, "landing/events/003.csv: bad", 3)
	applied(t, b, 1, 2)
	require.NotNil(t, getSource(t, b).Blocked, "batch 2 applied: batch 3 still blocks")

	_, err := b.store.RequestBuild(b.ctx, state.RequestBuildParams{Source: src, Reason: "resync", Now: hour(4)})
	require.NoError(t, err)
	plan(t, b, 3, hour(5))
	applied(t, b, 2, 3)
	require.NotNil(t, getSource(t, b).Blocked, "applied to generation 2: generation 1 still lacks batch 3")

	applied(t, b, 1, 3)
	require.Nil(t, getSource(t, b).Blocked)
}

func testBlockedStale(t *testing.T, b *bundle) {
	// Scenario: batch 2 blocks building generation 2's catch-up; a resync
	// retires generation 2. The block is no longer shown, and a late
	// recorder of generation 2 is refused with ErrConflictingGeneration,
	// writing nothing; so is an unknown generation. The same batch
	// failing on the next build, generation 3, keeps its first failure and
	// counts one more attempt, and stays shown once generation 3 serves.
	ensure(t, b, "h1", hour(0))
	stage(t, b, 1, file(1), file(2))
	plan(t, b, 0, hour(1))
	swap(t, b, 1, hour(2))
	_, err := b.store.RequestBuild(b.ctx, state.RequestBuildParams{Source: src, Reason: "resync", Now: hour(3)})
	require.NoError(t, err)
	plan(t, b, 1, hour(4))
	applied(t, b, 2, 1)
	block(t, b, 2, 2, "landing/events/002.csv: bad", 5)
	require.NotNil(t, getSource(t, b).Blocked)

	_, err = b.store.RequestBuild(b.ctx, state.RequestBuildParams{Source: src, Retire: 2, Reason: "resync", Now: hour(6)})
	require.NoError(t, err)
	require.Nil(t, getSource(t, b).Blocked, "its generation is retired")
	_, err = b.store.RecordBlocked(b.ctx, state.RecordBlockedParams{Source: src, Generation: 2, Seq: 2,
		Location: file(2).Location, Reason: "late", Now: hour(7)})
	require.ErrorIs(t, err, state.ErrConflictingGeneration)
	_, err = b.store.RecordBlocked(b.ctx, state.RecordBlockedParams{Source: src, Generation: 9, Seq: 2,
		Location: file(2).Location, Reason: "late", Now: hour(7)})
	require.ErrorIs(t, err, state.ErrConflictingGeneration)
	require.Nil(t, getSource(t, b).Blocked)

	plan(t, b, 1, hour(8))
	got := block(t, b, 3, 2, "landing/events/002.csv: still bad", 9)
	require.Equal(t, 2, got.Attempts, "the same batch: its first failure is kept")
	require.Equal(t, hour(5), got.FirstFailedAt)
	require.NotNil(t, getSource(t, b).Blocked)
	swap(t, b, 3, hour(10))
	require.NotNil(t, getSource(t, b).Blocked, "generation 3 serves and still lacks batch 2")
}

func testBlockedBad(t *testing.T, b *bundle) {
	// Scenario: an unknown source is ErrNotFound; a batch the generation
	// holds, one never staged, no location, no reason, no Now are refused,
	// recording nothing.
	_, err := b.store.RecordBlocked(b.ctx, state.RecordBlockedParams{Source: src, Generation: 1, Seq: 1, Location: "x", Reason: "y", Now: hour(1)})
	require.ErrorIs(t, err, state.ErrNotFound)
	ensure(t, b, "h1", hour(0))
	stage(t, b, 1, file(1), file(2))
	plan(t, b, 1, hour(1))
	applied(t, b, 1, 1)
	for _, p := range []state.RecordBlockedParams{
		{Source: src, Generation: 1, Seq: 1, Location: "x", Reason: "y", Now: hour(2)},
		{Source: src, Generation: 1, Seq: 3, Location: "x", Reason: "y", Now: hour(2)},
		{Source: src, Generation: 1, Seq: 2, Reason: "y", Now: hour(2)},
		{Source: src, Generation: 1, Seq: 2, Location: "x", Now: hour(2)},
		{Source: src, Generation: 1, Seq: 2, Location: "x", Reason: "y"},
		{Generation: 1, Seq: 2, Location: "x", Reason: "y", Now: hour(2)},
	} {
		_, err := b.store.RecordBlocked(b.ctx, p)
		require.Errorf(t, err, "%+v", p)
	}
	require.Nil(t, getSource(t, b).Blocked)
}

func testLateRows(t *testing.T, b *bundle) {
	// Scenario: 3 then 4 late rows applied to serving generation 1 make a
	// total of 7 (0 adds nothing); negative rows are refused, and so is a
	// generation retired by the swap of generation 2, leaving 7; the total
	// is kept across the swap.
	ensure(t, b, "h1", hour(0))
	stage(t, b, 1, file(1))
	plan(t, b, 1, hour(1))
	swap(t, b, 1, hour(2))
	add := func(g, rows int64) (int64, error) {
		return b.store.AddLateRows(b.ctx, state.AddLateRowsParams{Source: src, Generation: g, Rows: rows})
	}
	n, err := add(1, 3)
	require.NoError(t, err)
	require.Equal(t, int64(3), n)
	n, err = add(1, 4)
	require.NoError(t, err)
	require.Equal(t, int64(7), n)
	n, err = add(1, 0)
	require.NoError(t, err)
	require.Equal(t, int64(7), n)
	_, err = add(1, -1)
	require.Error(t, err)

	_, err = b.store.RequestBuild(b.ctx, state.RequestBuildParams{Source: src, Reason: "resync", Now: hour(3)})
	require.NoError(t, err)
	plan(t, b, 1, hour(4))
	swap(t, b, 2, hour(5))
	_, err = add(1, 5)
	require.ErrorIs(t, err, state.ErrConflictingGeneration)
	require.Equal(t, int64(7), getSource(t, b).LateRows)
	n, err = add(2, 1)
	require.NoError(t, err)
	require.Equal(t, int64(8), n)
}
