package statetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/state"
)

// lastWriteTests check LastWrites and how interval writes maintain it.
func lastWriteTests() []test {
	return []test{
		{"SecondAddWins", testLastWriteSecondAddWins},
		{"SpanOfAMultiRangeAdd", testLastWriteSpan},
		{"RemoveLeavesIt", testLastWriteRemoveLeaves},
		{"FencedStaleWriteLeavesIt", testLastWriteFenced},
		{"RefusedWriteRecordsNothing", testLastWriteRefused},
		{"NeverWrittenKeysAreAbsent", testLastWriteAbsent},
		{"DeleteIntervalsRemovesIt", testLastWriteDelete},
		{"ManyKeysInOneCall", testLastWriteManyKeys},
	}
}

// lastWrites reads the last writes of keys, failing the test on error.
func lastWrites(t testing.TB, b *bundle, keys ...state.VersionKey) map[state.VersionKey]state.LastWrite {
	t.Helper()
	got, err := b.store.LastWrites(b.ctx, keys)
	require.NoError(t, err)
	return got
}

// requireLastWrite checks key's last write is at, over r (instants compared
// with Equal, whatever their location).
func requireLastWrite(t testing.TB, b *bundle, key state.VersionKey, at time.Time, r interval.Range) {
	t.Helper()
	got, ok := lastWrites(t, b, key)[key]
	require.Truef(t, ok, "no last write for %+v", key)
	require.Truef(t, at.Equal(got.At), "last write at %v, want %v", got.At, at)
	require.Truef(t, r.Start.Equal(got.Range.Start) && r.End.Equal(got.Range.End), "last write range %v, want %v", got.Range, r)
}

func testLastWriteSecondAddWins(t *testing.T, b *bundle) {
	// Scenario: two adds to one key, at 05:00 then 06:00 (plus a
	// microsecond), of [04:00, 05:00) then [05:00, 06:00): the last write is
	// the second, its time and range, and not the merged coverage.
	k := vkey("m.a", "v1")
	addAt(t, b, k, set(hours(4, 5)), hour(5))
	requireLastWrite(t, b, k, hour(5), hours(4, 5))
	addAt(t, b, k, set(hours(5, 6)), hour(6).Add(time.Microsecond))
	requireLastWrite(t, b, k, hour(6).Add(time.Microsecond), hours(5, 6))
	got := lastWrites(t, b, k)[k]
	require.Equal(t, time.UTC, got.At.Location())
	requireIntervals(t, b, k, set(hours(4, 6)))
}

func testLastWriteSpan(t *testing.T, b *bundle) {
	// Scenario: one add of [0h,1h) and [10h,12h) records the span of what it
	// wrote, [0h,12h), even though [1h,10h) stays uncovered; a later add
	// of an already covered range (a recompute) is still a write.
	k := vkey("m.a", "v1")
	addAt(t, b, k, set(hours(0, 1), hours(10, 12)), hour(13))
	requireLastWrite(t, b, k, hour(13), hours(0, 12))
	addAt(t, b, k, set(hours(0, 1)), hour(14))
	requireLastWrite(t, b, k, hour(14), hours(0, 1))
}

func testLastWriteRemoveLeaves(t *testing.T, b *bundle) {
	// Scenario: a restatement removes ranges, part then all of them: the
	// last write stays the add's. A key only ever removed from has none.
	k, r := vkey("m.a", "v1"), vkey("m.r", "v1")
	addAt(t, b, k, set(hours(0, 10)), hour(10))
	require.NoError(t, b.store.RemoveIntervals(b.ctx, state.IntervalsParams{Key: k, Ranges: set(hours(2, 3)), Now: hour(11)}))
	requireLastWrite(t, b, k, hour(10), hours(0, 10))
	require.NoError(t, b.store.RemoveIntervals(b.ctx, state.IntervalsParams{Key: k, Ranges: set(hours(0, 10)), Now: hour(12)}))
	requireLastWrite(t, b, k, hour(10), hours(0, 10))
	require.NoError(t, b.store.RemoveIntervals(b.ctx, state.IntervalsParams{Key: r, Ranges: set(hours(0, 10)), Now: hour(12)}))
	require.NotContains(t, lastWrites(t, b, r), r)
}

func testLastWriteFenced(t *testing.T, b *bundle) {
	// Scenario: a fresh lease-fenced add records its write; then the lease
	// is taken over, and the old holder's add fails with ErrFenced and
	// leaves the last write as it was; so does an add fenced by a stale
	// environment generation, and a stale fenced add to a key never
	// written records nothing.
	k, fresh := vkey("m.a", "v1"), vkey("m.fresh", "v1")
	old := acquire(t, b, "run:m.a", "scheduler-1", hour(0), time.Hour)
	require.NoError(t, fencedWrite(b, true, k, set(hours(0, 1)), leaseFence(old), hour(0)))
	requireLastWrite(t, b, k, hour(0), hours(0, 1))

	acquire(t, b, "run:m.a", "scheduler-2", hour(2), time.Hour)
	require.ErrorIs(t, fencedWrite(b, true, k, set(hours(1, 2)), leaseFence(old), hour(2)), state.ErrFenced)
	require.ErrorIs(t, fencedWrite(b, true, fresh, set(hours(1, 2)), leaseFence(old), hour(2)), state.ErrFenced)

	promote(t, b, "prod", "", "p1", hour(0))
	promote(t, b, "prod", "p1", "p2", hour(1))
	stale := state.Fence{Environment: "prod", Generation: 1}
	require.ErrorIs(t, fencedWrite(b, true, k, set(hours(3, 4)), stale, hour(3)), state.ErrFenced)

	requireLastWrite(t, b, k, hour(0), hours(0, 1))
	require.NotContains(t, lastWrites(t, b, fresh), fresh)
	requireIntervals(t, b, k, set(hours(0, 1)))
}

func testLastWriteRefused(t *testing.T, b *bundle) {
	// Scenario: adds the store refuses (no Now; a boundary finer than a
	// microsecond) and an add of the empty set record nothing.
	k := vkey("m.a", "v1")
	require.Error(t, b.store.AddIntervals(b.ctx, state.IntervalsParams{Key: k, Ranges: set(hours(0, 1))}))
	require.Error(t, b.store.AddIntervals(b.ctx, state.IntervalsParams{Key: k,
		Ranges: set(interval.NewRange(hour(0), hour(1).Add(time.Nanosecond))), Now: hour(1)}))
	addAt(t, b, k, interval.Set{}, hour(1))
	require.Empty(t, lastWrites(t, b, k))
}

func testLastWriteAbsent(t *testing.T, b *bundle) {
	// Scenario: no keys read nothing; keys never written to are absent from
	// the result, next to a key that was.
	got, err := b.store.LastWrites(b.ctx, nil)
	require.NoError(t, err)
	require.Empty(t, got)
	k := vkey("m.a", "v1")
	addAt(t, b, k, set(hours(0, 1)), hour(1))
	got = lastWrites(t, b, vkey("m.a", "v2"), k, vkey("m.zz", "v1"))
	require.Len(t, got, 1)
	require.Contains(t, got, k)
}

func testLastWriteDelete(t *testing.T, b *bundle) {
	// Scenario: DeleteIntervals removes the last writes of the versions it
	// names, and only those; a later add records a new one.
	a, c := vkey("m.a", "v1"), vkey("m.a", "v2")
	addAt(t, b, a, set(hours(0, 1)), hour(1))
	addAt(t, b, c, set(hours(0, 2)), hour(2))
	require.NoError(t, b.store.DeleteIntervals(b.ctx, []state.VersionKey{a}))
	got := lastWrites(t, b, a, c)
	require.NotContains(t, got, a)
	requireLastWrite(t, b, c, hour(2), hours(0, 2))
	addAt(t, b, a, set(hours(5, 6)), hour(6))
	requireLastWrite(t, b, a, hour(6), hours(5, 6))
}

func testLastWriteManyKeys(t *testing.T, b *bundle) {
	// Scenario: one LastWrites call names 5,000 keys (one twice), of which
	// every 50th was written, each at its own time and range: those 100
	// are in the result with theirs, and nothing else is.
	keys := make([]state.VersionKey, 0, 5001)
	for i := range 5000 {
		keys = append(keys, vkey(fmt.Sprintf("m.t%05d", i), fmt.Sprintf("v%d", i%7)))
	}
	keys = append(keys, keys[0])
	for i := 0; i < 5000; i += 50 {
		addAt(t, b, keys[i], set(hours(i, i+1), hours(i+3, i+4)), hour(i+5))
	}
	got := lastWrites(t, b, keys...)
	require.Len(t, got, 100)
	for i := 0; i < 5000; i += 50 {
		w, ok := got[keys[i]]
		require.Truef(t, ok, "key %+v", keys[i])
		require.Truef(t, hour(i+5).Equal(w.At), "key %+v: at %v", keys[i], w.At)
		require.Equalf(t, hours(i, i+4).String(), w.Range.String(), "key %+v", keys[i])
	}
}
