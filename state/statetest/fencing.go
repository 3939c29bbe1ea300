package statetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/state"
)

func fencingTests() []test {
	return []test{
		{"FreshLeaseFenceWrites", testFenceFreshLease},
		{"StaleLeaseTokensWriteNothing", testFenceStaleLease},
		{"EnvironmentGenerationFence", testFenceGeneration},
		{"DeletedEnvironmentFence", testFenceDeletedEnvironment},
		{"MalformedFenceIsRefused", testFenceMalformed},
		{"BothFormsMustHold", testFenceBothForms},
		{"EmptyWriteStillChecksFence", testFenceEmptyWrite},
		{"SourceGenerationFence", testFenceSourceGeneration},
	}
}

// fencedWrite adds (or removes) s on key under fence at now.
func fencedWrite(b *bundle, add bool, key state.VersionKey, s interval.Set, f state.Fence, now time.Time) error {
	p := state.IntervalsParams{Key: key, Ranges: s, Fence: &f, Now: now}
	if add {
		return b.store.AddIntervals(b.ctx, p)
	}
	return b.store.RemoveIntervals(b.ctx, p)
}

func leaseFence(l state.Lease) state.Fence {
	return state.Fence{LeaseKey: l.Key, LeaseToken: l.Token}
}

func testFenceFreshLease(t *testing.T, b *bundle) {
	// Scenario: the holder of an unexpired lease adds and removes intervals
	// under its fence, up to the last microsecond before expiry.
	k := vkey("m.a", "v1")
	l := acquire(t, b, "run:m.a", "scheduler-1", hour(0), time.Hour)
	require.NoError(t, fencedWrite(b, true, k, set(hours(0, 10)), leaseFence(l), hour(0)))
	require.NoError(t, fencedWrite(b, false, k, set(hours(4, 5)), leaseFence(l), hour(1).Add(-time.Microsecond)))
	requireIntervals(t, b, k, set(hours(0, 4), hours(5, 10)))
}

func testFenceStaleLease(t *testing.T, b *bundle) {
	// Scenario: a write fenced by a token that is expired (not yet taken
	// over), taken over, released, or presented for another lease's key
	// fails with ErrFenced, for adds and removes alike, and writes nothing.
	k := vkey("m.a", "v1")
	add(t, b, k, set(hours(0, 10)))
	want := set(hours(0, 10))
	requireFenced := func(name string, f state.Fence, now time.Time) {
		t.Helper()
		for _, isAdd := range []bool{true, false} {
			err := fencedWrite(b, isAdd, k, set(hours(5, 20)), f, now)
			require.ErrorIsf(t, err, state.ErrFenced, "%s (add=%t)", name, isAdd)
		}
		requireIntervals(t, b, k, want)
	}

	old := acquire(t, b, "run:m.a", "scheduler-1", hour(0), time.Hour)
	requireFenced("expired at exactly ExpiresAt", leaseFence(old), hour(1))
	requireFenced("expired", leaseFence(old), hour(2))

	taker := acquire(t, b, "run:m.a", "scheduler-2", hour(2), time.Hour)
	require.NotEqual(t, old.Token, taker.Token)
	requireFenced("taken over", leaseFence(old), hour(2))

	other := acquire(t, b, "run:m.b", "scheduler-3", hour(2), time.Hour)
	requireFenced("token of another lease", state.Fence{LeaseKey: "run:m.a", LeaseToken: other.Token}, hour(2))
	requireFenced("unknown lease", state.Fence{LeaseKey: "run:nothing", LeaseToken: taker.Token}, hour(2))

	require.NoError(t, b.store.ReleaseLease(b.ctx, state.ReleaseLeaseParams{Key: taker.Key, Token: taker.Token}))
	requireFenced("released", leaseFence(taker), hour(2))
	require.Equal(t, 1, rowCount(t, b))
}

func testFenceGeneration(t *testing.T, b *bundle) {
	// Scenario: a writer pinned to generation 1 of prod writes while prod is
	// at 1; after a promotion to generation 2 the same fence fails with
	// ErrFenced and writes nothing, while a fence on generation 2 writes.
	k := vkey("m.a", "v1")
	e1 := promote(t, b, "prod", "", "plan-1", hour(0))
	f1 := state.Fence{Environment: "prod", Generation: e1.Generation}
	require.NoError(t, fencedWrite(b, true, k, set(hours(0, 5)), f1, hour(0)))

	e2 := promote(t, b, "prod", "plan-1", "plan-2", hour(1))
	require.Greater(t, e2.Generation, e1.Generation)
	require.ErrorIs(t, fencedWrite(b, true, k, set(hours(5, 10)), f1, hour(1)), state.ErrFenced)
	require.ErrorIs(t, fencedWrite(b, false, k, set(hours(0, 5)), f1, hour(1)), state.ErrFenced)
	requireIntervals(t, b, k, set(hours(0, 5)))

	f2 := state.Fence{Environment: "prod", Generation: e2.Generation}
	require.NoError(t, fencedWrite(b, true, k, set(hours(5, 10)), f2, hour(1)))
	requireIntervals(t, b, k, set(hours(0, 10)))

	future := state.Fence{Environment: "prod", Generation: e2.Generation + 1}
	require.ErrorIs(t, fencedWrite(b, true, k, set(hours(20, 21)), future, hour(1)), state.ErrFenced)
	unknown := state.Fence{Environment: "nowhere", Generation: 1}
	require.ErrorIs(t, fencedWrite(b, true, k, set(hours(20, 21)), unknown, hour(1)), state.ErrFenced)
	requireIntervals(t, b, k, set(hours(0, 10)))
}

func testFenceDeletedEnvironment(t *testing.T, b *bundle) {
	// Scenario: an environment is deleted and created again. A fence on the
	// deleted incarnation's generation fails both while it is gone and after
	// it is recreated: generations are never reused for a name, so such a
	// fence can never pass again. So does a fence that also carries a lease
	// its writer still holds (a scheduler's).
	k := vkey("m.a", "v1")
	e1 := promote(t, b, "dev", "", "plan-1", hour(0))
	stale := state.Fence{Environment: "dev", Generation: e1.Generation}
	l := acquire(t, b, "version/m.a@v1", "scheduler-1", hour(0), 10*time.Hour)
	staleLeased := state.Fence{Environment: "dev", Generation: e1.Generation, LeaseKey: l.Key, LeaseToken: l.Token}
	require.NoError(t, b.store.CheckFence(b.ctx, staleLeased, hour(1)))
	require.NoError(t, removeErr(b.store.RemoveEnvironment(b.ctx, state.RemoveEnvironmentParams{Name: "dev", Generation: e1.Generation, Now: hour(3)})))
	require.ErrorIs(t, fencedWrite(b, true, k, set(hours(0, 1)), stale, hour(1)), state.ErrFenced)
	require.ErrorIs(t, b.store.CheckFence(b.ctx, staleLeased, hour(1)), state.ErrFenced)
	require.ErrorIs(t, fencedWrite(b, true, k, set(hours(0, 1)), staleLeased, hour(1)), state.ErrFenced)

	e2 := promote(t, b, "dev", "", "plan-2", hour(2))
	require.Greater(t, e2.Generation, e1.Generation, "a recreated environment must not reuse a generation")
	require.ErrorIs(t, fencedWrite(b, true, k, set(hours(0, 1)), stale, hour(2)), state.ErrFenced)
	requireIntervals(t, b, k, interval.Set{})
}

func testFenceMalformed(t *testing.T, b *bundle) {
	// Scenario: a fence with an incomplete form (or none) fails closed: the
	// write is refused with an error, never performed unfenced.
	k := vkey("m.a", "v1")
	l := acquire(t, b, "run:m.a", "scheduler-1", hour(0), time.Hour)
	e := promote(t, b, "prod", "", "plan-1", hour(0))
	for _, f := range []state.Fence{
		{},
		{LeaseKey: l.Key},
		{LeaseToken: l.Token},
		{Environment: "prod"},
		{LeaseKey: l.Key, LeaseToken: l.Token, Environment: "prod"},
		{LeaseKey: l.Key, Environment: "prod", Generation: e.Generation},
	} {
		require.Errorf(t, fencedWrite(b, true, k, set(hours(0, 1)), f, hour(0)), "fence %+v", f)
	}
	requireIntervals(t, b, k, interval.Set{})
}

func testFenceBothForms(t *testing.T, b *bundle) {
	// Scenario: a scheduler's write carries its version lease and the
	// generation it planned under. It succeeds while both hold; once a
	// promotion moves the generation, or the lease expires, it fails with
	// ErrFenced and writes nothing; CheckFence agrees with the write, before
	// it, each time.
	k := vkey("m.a", "v1")
	l := acquire(t, b, "version/m.a@v1", "scheduler-1", hour(0), time.Hour)
	e := promote(t, b, "prod", "", "plan-1", hour(0))
	both := state.Fence{LeaseKey: l.Key, LeaseToken: l.Token, Environment: "prod", Generation: e.Generation}
	require.NoError(t, b.store.CheckFence(b.ctx, both, hour(0)))
	require.NoError(t, fencedWrite(b, true, k, set(hours(0, 1)), both, hour(0)))

	expired := hour(0).Add(2 * time.Hour)
	require.ErrorIs(t, b.store.CheckFence(b.ctx, both, expired), state.ErrFenced)
	require.ErrorIs(t, fencedWrite(b, true, k, set(hours(1, 2)), both, expired), state.ErrFenced, "the lease expired")

	promote(t, b, "prod", "plan-1", "plan-2", hour(0))
	require.ErrorIs(t, b.store.CheckFence(b.ctx, both, hour(0)), state.ErrFenced)
	require.ErrorIs(t, fencedWrite(b, true, k, set(hours(1, 2)), both, hour(0)), state.ErrFenced, "the generation moved")
	requireIntervals(t, b, k, set(hours(0, 1)))
	require.Error(t, b.store.CheckFence(b.ctx, state.Fence{LeaseKey: l.Key}, hour(0)), "malformed")
}

func testFenceEmptyWrite(t *testing.T, b *bundle) {
	// Scenario: a stale writer that has nothing to write still learns that
	// it is stale: an empty add under a stale fence fails with ErrFenced.
	l := acquire(t, b, "run:m.a", "scheduler-1", hour(0), time.Hour)
	err := fencedWrite(b, true, vkey("m.a", "v1"), interval.Set{}, leaseFence(l), hour(3))
	require.ErrorIs(t, err, state.ErrFenced)
}

func testFenceSourceGeneration(t *testing.T, b *bundle) {
	// Scenario: a source's watermark write is fenced on the generation it
	// was computed from. While generation 1 serves, a fence on 1 writes;
	// once generation 2 swaps in, the fence on 1 fails with ErrFenced for
	// adds, removes and CheckFence alike and writes nothing, while a fence
	// on 2 writes. A fence on a source that is not defined (unknown, or
	// removed) fails; a source form without a generation is malformed.
	k := state.SourceKey(src)
	ensure(t, b, "h1", hour(0))
	swap(t, b, plan(t, b, 5, hour(0)).Generation, hour(0))
	g1 := state.Fence{Source: src, SourceGeneration: 1}
	require.NoError(t, b.store.CheckFence(b.ctx, g1, hour(1)))
	require.NoError(t, fencedWrite(b, true, k, set(hours(0, 2)), g1, hour(1)))

	swap(t, b, plan(t, b, 6, hour(2)).Generation, hour(2))
	for _, isAdd := range []bool{true, false} {
		require.ErrorIsf(t, fencedWrite(b, isAdd, k, set(hours(0, 5)), g1, hour(3)), state.ErrFenced, "add=%t", isAdd)
	}
	require.ErrorIs(t, b.store.CheckFence(b.ctx, g1, hour(3)), state.ErrFenced)
	requireIntervals(t, b, k, set(hours(0, 2)))
	g2 := state.Fence{Source: src, SourceGeneration: 2}
	require.NoError(t, fencedWrite(b, true, k, set(hours(2, 3)), g2, hour(3)))
	requireIntervals(t, b, k, set(hours(0, 3)))

	unknown := state.Fence{Source: "raw.nothing", SourceGeneration: 1}
	require.ErrorIs(t, fencedWrite(b, true, k, set(hours(3, 4)), unknown, hour(3)), state.ErrFenced)
	require.Error(t, fencedWrite(b, true, k, set(hours(3, 4)), state.Fence{Source: src}, hour(3)), "malformed")
	_, err := b.store.RemoveSource(b.ctx, state.RemoveSourceParams{Source: src, Expect: state.SourceExpectation{Serving: 2}, Now: hour(4)})
	require.NoError(t, err)
	require.ErrorIs(t, fencedWrite(b, true, k, set(hours(3, 4)), g2, hour(4)), state.ErrFenced, "a removed source")
	requireIntervals(t, b, k, set(hours(0, 3)))
}
