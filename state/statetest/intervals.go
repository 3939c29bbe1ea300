package statetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/state"
)

func intervalTests() []test {
	return []test{
		{"AddGetRemove", testIntervalsAddGetRemove},
		{"AdjacentAddsCompactToOneRow", testIntervalsAdjacentCompact},
		{"OverlappingAddsCompact", testIntervalsOverlappingCompact},
		{"MultiRangeAddBridgesGaps", testIntervalsMultiRange},
		{"RemoveEdgeCases", testIntervalsRemoveEdges},
		{"VersionsAreIndependent", testIntervalsVersionsIndependent},
		{"GetTenThousandKeys", testIntervalsManyKeys},
		{"DeleteIntervals", testIntervalsDelete},
		{"EmptyInputs", testIntervalsEmpty},
		{"RejectsBadInput", testIntervalsBadInput},
		{"MatchesSetModel", testIntervalsProperty},
	}
}

func testIntervalsAddGetRemove(t *testing.T, b *bundle) {
	// Scenario: [0h,6h) is added and read back as one range; removing
	// [2h,3h) splits it into two ranges stored as two rows.
	k := vkey("m.a", "v1")
	add(t, b, k, set(hours(0, 6)))
	requireIntervals(t, b, k, set(hours(0, 6)))
	require.Equal(t, 1, rowCount(t, b))

	require.NoError(t, b.store.RemoveIntervals(b.ctx, state.IntervalsParams{Key: k, Ranges: set(hours(2, 3)), Now: hour(0)}))
	requireIntervals(t, b, k, set(hours(0, 2), hours(3, 6)))
	require.Equal(t, 2, rowCount(t, b))
}

func testIntervalsAdjacentCompact(t *testing.T, b *bundle) {
	// Scenario: 1,000 hourly batches are recorded one call each, in order,
	// and 200 more are recorded backwards before them. The version holds one
	// range, and storage holds one row: never one per bucket.
	k := vkey("m.hourly", "v1")
	for i := range 1000 {
		add(t, b, k, set(hours(i, i+1)))
	}
	for i := -1; i >= -200; i-- {
		add(t, b, k, set(hours(i, i+1)))
	}
	got, err := b.store.GetIntervals(b.ctx, []state.VersionKey{k})
	require.NoError(t, err)
	require.Equal(t, 1, got[k].Len())
	require.True(t, set(hours(-200, 1000)).Equal(got[k]), "got %v", got[k])
	require.Equal(t, 1, rowCount(t, b))
}

func testIntervalsOverlappingCompact(t *testing.T, b *bundle) {
	// Scenario: overlapping, contained, duplicate and touching adds end up
	// as the minimal set of ranges, one row each.
	k := vkey("m.a", "v1")
	for _, r := range []interval.Range{
		hours(0, 5), hours(3, 8), hours(8, 10), hours(20, 30), hours(22, 25), hours(20, 30), hours(40, 41),
	} {
		add(t, b, k, set(r))
	}
	requireIntervals(t, b, k, set(hours(0, 10), hours(20, 30), hours(40, 41)))
	require.Equal(t, 3, rowCount(t, b))

	add(t, b, k, set(hours(9, 21)))
	requireIntervals(t, b, k, set(hours(0, 30), hours(40, 41)))
	require.Equal(t, 2, rowCount(t, b))
}

func testIntervalsMultiRange(t *testing.T, b *bundle) {
	// Scenario: one add carries several ranges; a second one fills exactly
	// the gaps between them and everything merges into one row. Ranges not
	// touched by an add keep their rows.
	k := vkey("m.a", "v1")
	add(t, b, k, set(hours(0, 2), hours(4, 6), hours(8, 10), hours(100, 101)))
	require.Equal(t, 4, rowCount(t, b))
	add(t, b, k, set(hours(2, 4), hours(6, 8)))
	requireIntervals(t, b, k, set(hours(0, 10), hours(100, 101)))
	require.Equal(t, 2, rowCount(t, b))
}

func testIntervalsRemoveEdges(t *testing.T, b *bundle) {
	// Scenario: removals at a range's start, at its end, across two ranges,
	// over nothing stored, and over everything, each leave exactly the set
	// difference.
	k := vkey("m.a", "v1")
	remove := func(s interval.Set) {
		t.Helper()
		require.NoError(t, b.store.RemoveIntervals(b.ctx, state.IntervalsParams{Key: k, Ranges: s, Now: hour(0)}))
	}
	add(t, b, k, set(hours(0, 10), hours(20, 30)))

	remove(set(hours(0, 1)))
	requireIntervals(t, b, k, set(hours(1, 10), hours(20, 30)))
	remove(set(hours(29, 35)))
	requireIntervals(t, b, k, set(hours(1, 10), hours(20, 29)))
	remove(set(hours(8, 22)))
	requireIntervals(t, b, k, set(hours(1, 8), hours(22, 29)))
	remove(set(hours(50, 60), hours(10, 20)))
	requireIntervals(t, b, k, set(hours(1, 8), hours(22, 29)))
	remove(set(hours(3, 4), hours(25, 26)))
	requireIntervals(t, b, k, set(hours(1, 3), hours(4, 8), hours(22, 25), hours(26, 29)))
	require.Equal(t, 4, rowCount(t, b))
	remove(set(hours(-100, 100)))
	requireIntervals(t, b, k, interval.Set{})
	require.Equal(t, 0, rowCount(t, b))
	remove(set(hours(0, 1)))
	requireIntervals(t, b, k, interval.Set{})
}

func testIntervalsVersionsIndependent(t *testing.T, b *bundle) {
	// Scenario: two versions of one model and the same version string of
	// another model are three separate records.
	a1, a2, b1 := vkey("m.a", "v1"), vkey("m.a", "v2"), vkey("m.b", "v1")
	add(t, b, a1, set(hours(0, 10)))
	add(t, b, a2, set(hours(5, 15)))
	add(t, b, b1, set(hours(10, 11)))
	require.NoError(t, b.store.RemoveIntervals(b.ctx, state.IntervalsParams{Key: a1, Ranges: set(hours(0, 20)), Now: hour(0)}))

	got, err := b.store.GetIntervals(b.ctx, []state.VersionKey{a1, a2, b1})
	require.NoError(t, err)
	require.True(t, got[a1].IsEmpty())
	require.True(t, set(hours(5, 15)).Equal(got[a2]))
	require.True(t, set(hours(10, 11)).Equal(got[b1]))
}

func testIntervalsManyKeys(t *testing.T, b *bundle) {
	// Scenario: one GetIntervals call names 10,000 keys, of which 100 have
	// intervals (a key is also named twice). Every key is in the result;
	// the 100 have their ranges, the others an empty set.
	keys := make([]state.VersionKey, 0, 10001)
	for i := range 10000 {
		keys = append(keys, vkey(fmt.Sprintf("m.t%05d", i), fmt.Sprintf("v%d", i%7)))
	}
	keys = append(keys, keys[0])
	for i := 0; i < 10000; i += 100 {
		add(t, b, keys[i], set(hours(i, i+1), hours(i+2, i+3)))
	}

	got, err := b.store.GetIntervals(b.ctx, keys)
	require.NoError(t, err)
	require.Len(t, got, 10000)
	for i, k := range keys[:10000] {
		want := interval.Set{}
		if i%100 == 0 {
			want = set(hours(i, i+1), hours(i+2, i+3))
		}
		require.Truef(t, want.Equal(got[k]), "key %+v: want %v, got %v", k, want, got[k])
	}
}

func testIntervalsDelete(t *testing.T, b *bundle) {
	// Scenario: DeleteIntervals removes every range of the named versions
	// (and ignores unknown ones); other versions keep theirs.
	a, c, d := vkey("m.a", "v1"), vkey("m.a", "v2"), vkey("m.d", "v1")
	add(t, b, a, set(hours(0, 1), hours(3, 4)))
	add(t, b, c, set(hours(0, 1)))
	add(t, b, d, set(hours(0, 1)))
	require.NoError(t, b.store.DeleteIntervals(b.ctx, []state.VersionKey{a, d, vkey("m.zz", "never")}))

	got, err := b.store.GetIntervals(b.ctx, []state.VersionKey{a, c, d})
	require.NoError(t, err)
	require.True(t, got[a].IsEmpty())
	require.True(t, got[d].IsEmpty())
	require.True(t, set(hours(0, 1)).Equal(got[c]))
	require.Equal(t, 1, rowCount(t, b))
	require.NoError(t, b.store.DeleteIntervals(b.ctx, nil))
}

func testIntervalsEmpty(t *testing.T, b *bundle) {
	// Scenario: no keys read nothing; adding or removing an empty set
	// succeeds and stores nothing.
	got, err := b.store.GetIntervals(b.ctx, nil)
	require.NoError(t, err)
	require.Empty(t, got)
	k := vkey("m.a", "v1")
	add(t, b, k, interval.Set{})
	require.NoError(t, b.store.RemoveIntervals(b.ctx, state.IntervalsParams{Key: k, Now: hour(0)}))
	requireIntervals(t, b, k, interval.Set{})
	require.Equal(t, 0, rowCount(t, b))
}

func testIntervalsBadInput(t *testing.T, b *bundle) {
	// Scenario: a key without a name or version, and a boundary that is not
	// a whole microsecond (which the store cannot hold without widening or
	// narrowing the range), are refused with an error and write nothing.
	k := vkey("m.a", "v1")
	add(t, b, k, set(hours(0, 1)))
	for _, p := range []state.IntervalsParams{
		{Key: vkey("", "v1"), Ranges: set(hours(5, 6))},
		{Key: vkey("m.a", ""), Ranges: set(hours(5, 6))},
		{Key: k, Ranges: set(interval.NewRange(hour(5), hour(6).Add(time.Nanosecond)))},
		{Key: k, Ranges: set(interval.NewRange(hour(5).Add(500*time.Nanosecond), hour(6)))},
	} {
		p.Now = hour(0)
		require.Errorf(t, b.store.AddIntervals(b.ctx, p), "add %+v", p)
		require.Errorf(t, b.store.RemoveIntervals(b.ctx, p), "remove %+v", p)
	}
	requireIntervals(t, b, k, set(hours(0, 1)))
	require.Equal(t, 1, rowCount(t, b))
}
