package statetest

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/state"
)

func snapshotTests() []test {
	return []test{
		{"PushAndGetRoundTrips", testSnapshotRoundTrip},
		{"PushIsIdempotent", testSnapshotPushIdempotent},
		{"GetManyWithMissingKeys", testSnapshotGetMany},
		{"Delete", testSnapshotDelete},
		{"EmptyCalls", testSnapshotEmptyCalls},
		{"RejectsNil", testSnapshotRejectsNil},
	}
}

func testSnapshotRoundTrip(t *testing.T, b *bundle) {
	// Scenario: a snapshot with every model field set is pushed and read
	// back; it is equal to what was pushed, Model included, and its JSON is
	// the same.
	s := newSnapshot("sales.orders", "SELECT id, event_ts FROM raw.events")
	require.NoError(t, b.store.PushSnapshots(b.ctx, []*snapshot.Snapshot{s}))

	got, err := b.store.GetSnapshots(b.ctx, []state.SnapshotKey{state.KeyOf(s)})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, s, got[state.KeyOf(s)])

	want, err := json.Marshal(s)
	require.NoError(t, err)
	have, err := json.Marshal(got[state.KeyOf(s)])
	require.NoError(t, err)
	require.JSONEq(t, string(want), string(have))
}

func testSnapshotPushIdempotent(t *testing.T, b *bundle) {
	// Scenario: a snapshot is pushed twice, then a different content is
	// pushed under the same key. Every push succeeds and the first content
	// stays: a snapshot is immutable.
	s := newSnapshot("sales.orders", "SELECT 1")
	require.NoError(t, b.store.PushSnapshots(b.ctx, []*snapshot.Snapshot{s}))
	require.NoError(t, b.store.PushSnapshots(b.ctx, []*snapshot.Snapshot{s, s}))

	impostor := newSnapshot("sales.orders", "SELECT 1")
	impostor.Canonical = "SELECT 2"
	impostor.Model.Owner = "someone-else"
	require.Equal(t, state.KeyOf(s), state.KeyOf(impostor))
	require.NoError(t, b.store.PushSnapshots(b.ctx, []*snapshot.Snapshot{impostor}))

	got, err := b.store.GetSnapshots(b.ctx, []state.SnapshotKey{state.KeyOf(s)})
	require.NoError(t, err)
	require.Equal(t, s, got[state.KeyOf(s)])
}

func testSnapshotGetMany(t *testing.T, b *bundle) {
	// Scenario: 300 snapshots are pushed in one call; reading them together
	// with 200 keys that were never pushed returns exactly the 300.
	var snaps []*snapshot.Snapshot
	var keys []state.SnapshotKey
	for i := range 300 {
		s := newSnapshot(fmt.Sprintf("m.t%03d", i), fmt.Sprintf("SELECT %d", i))
		snaps = append(snaps, s)
		keys = append(keys, state.KeyOf(s))
	}
	require.NoError(t, b.store.PushSnapshots(b.ctx, snaps))
	for i := range 200 {
		keys = append(keys, state.SnapshotKey{Name: fmt.Sprintf("m.t%03d", i), Fingerprint: "missing"})
	}

	got, err := b.store.GetSnapshots(b.ctx, keys)
	require.NoError(t, err)
	require.Len(t, got, len(snaps))
	for _, s := range snaps {
		require.Equal(t, s, got[state.KeyOf(s)])
	}
}

func testSnapshotDelete(t *testing.T, b *bundle) {
	// Scenario: of three snapshots two are deleted (with a key that never
	// existed in the same call); the third remains, and intervals keyed by
	// the deleted snapshots' version are untouched.
	a, c, d := newSnapshot("m.a", "SELECT 1"), newSnapshot("m.c", "SELECT 1"), newSnapshot("m.d", "SELECT 1")
	require.NoError(t, b.store.PushSnapshots(b.ctx, []*snapshot.Snapshot{a, c, d}))
	add(t, b, vkey(a.Name, a.Version), set(hours(0, 5)))

	require.NoError(t, b.store.DeleteSnapshots(b.ctx, []state.SnapshotKey{
		state.KeyOf(a), state.KeyOf(c), {Name: "m.zz", Fingerprint: "never"},
	}))
	got, err := b.store.GetSnapshots(b.ctx, []state.SnapshotKey{state.KeyOf(a), state.KeyOf(c), state.KeyOf(d)})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, d, got[state.KeyOf(d)])
	requireIntervals(t, b, vkey(a.Name, a.Version), set(hours(0, 5)))
}

func testSnapshotEmptyCalls(t *testing.T, b *bundle) {
	// Scenario: every snapshot method accepts an empty list.
	require.NoError(t, b.store.PushSnapshots(b.ctx, nil))
	got, err := b.store.GetSnapshots(b.ctx, nil)
	require.NoError(t, err)
	require.Empty(t, got)
	require.NoError(t, b.store.DeleteSnapshots(b.ctx, nil))
}

func testSnapshotRejectsNil(t *testing.T, b *bundle) {
	// Scenario: a batch holding a nil snapshot is refused with an error (no
	// panic), and its valid snapshots are not recorded either.
	s := newSnapshot("m.a", "SELECT 1")
	require.Error(t, b.store.PushSnapshots(b.ctx, []*snapshot.Snapshot{s, nil}))
	got, err := b.store.GetSnapshots(b.ctx, []state.SnapshotKey{state.KeyOf(s)})
	require.NoError(t, err)
	require.Empty(t, got)
}
