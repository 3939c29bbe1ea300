package statetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/state"
)

// lastServedTests check LastServed and how Promote and RemoveEnvironment
// maintain it.
func lastServedTests() []test {
	return []test{
		{"PromoteRecordsWhatItStopsServing", testLastServedPromote},
		{"LatestWinsWhateverTheOrder", testLastServedLatestWins},
		{"RefusedPromotionRecordsNothing", testLastServedRefusedPromotion},
		{"PromotingAnInvalidatedEnvironment", testLastServedInvalidated},
		{"RemoveEnvironmentRecordsItsVersions", testLastServedDelete},
		{"DeleteIntervalsRemovesIt", testLastServedDeleteIntervals},
		{"ManyKeysInOneCall", testLastServedManyKeys},
	}
}

// lastServed reads the last-served times of keys, failing the test on error.
func lastServed(t testing.TB, b *bundle, keys ...state.VersionKey) map[state.VersionKey]time.Time {
	t.Helper()
	got, err := b.store.LastServed(b.ctx, keys)
	require.NoError(t, err)
	return got
}

// requireLastServed checks that the last-served times of keys are exactly
// want (instants compared with Equal, and in UTC).
func requireLastServed(t testing.TB, b *bundle, keys []state.VersionKey, want map[state.VersionKey]time.Time) {
	t.Helper()
	got := lastServed(t, b, keys...)
	require.Len(t, got, len(want), "got %v, want %v", got, want)
	for k, at := range want {
		g, ok := got[k]
		require.Truef(t, ok, "no last-served time for %+v", k)
		require.Truef(t, at.Equal(g), "%+v last served at %v, want %v", k, g, at)
		require.Equal(t, time.UTC, g.Location())
	}
}

func testLastServedPromote(t *testing.T, b *bundle) {
	// Scenario: prod serves a@v1 and b@v1; a promotion at 02:00 replaces
	// a@v1 by a@v2 and keeps b@v1. a@v1 was last served at 02:00; b@v1
	// (still served) and a@v2 (served now) have no time; a model dropped
	// from prod (c@v1, at 03:00) gets one too.
	a1, a2, b1, c1 := vkey("m.a", "v1"), vkey("m.a", "v2"), vkey("m.b", "v1"), vkey("m.c", "v1")
	all := []state.VersionKey{a1, a2, b1, c1}
	promote(t, b, "prod", "", "p1", hour(0), sref("m.a", "v1"), sref("m.b", "v1"), sref("m.c", "v1"))
	requireLastServed(t, b, all, map[state.VersionKey]time.Time{})
	promote(t, b, "prod", "p1", "p2", hour(2), sref("m.a", "v2"), sref("m.b", "v1"), sref("m.c", "v1"))
	requireLastServed(t, b, all, map[state.VersionKey]time.Time{a1: hour(2)})
	promote(t, b, "prod", "p2", "p3", hour(3), sref("m.a", "v2"), sref("m.b", "v1"))
	requireLastServed(t, b, all, map[state.VersionKey]time.Time{a1: hour(2), c1: hour(3)})

	// A revert serves a@v1 again: its time stays until it stops again.
	promote(t, b, "prod", "p3", "p4", hour(4), sref("m.a", "v1"), sref("m.b", "v1"))
	requireLastServed(t, b, all, map[state.VersionKey]time.Time{a1: hour(2), a2: hour(4), c1: hour(3)})
	promote(t, b, "prod", "p4", "p5", hour(5), sref("m.a", "v2"), sref("m.b", "v1"))
	requireLastServed(t, b, all, map[state.VersionKey]time.Time{a1: hour(5), a2: hour(4), c1: hour(3)})
}

func testLastServedLatestWins(t *testing.T, b *bundle) {
	// Scenario: prod and dev both serve a@v1. dev stops serving it at
	// 05:00, then prod at 03:00 (its clock is behind): the latest time,
	// 05:00, is kept, whatever the order of the writes.
	k := vkey("m.a", "v1")
	promote(t, b, "prod", "", "p1", hour(0), sref("m.a", "v1"))
	promote(t, b, "dev", "", "d1", hour(0), sref("m.a", "v1"))
	promote(t, b, "dev", "d1", "d2", hour(5), sref("m.a", "v2"))
	requireLastServed(t, b, []state.VersionKey{k}, map[state.VersionKey]time.Time{k: hour(5)})
	promote(t, b, "prod", "p1", "p2", hour(3), sref("m.a", "v3"))
	requireLastServed(t, b, []state.VersionKey{k}, map[state.VersionKey]time.Time{k: hour(5)})
}

func testLastServedRefusedPromotion(t *testing.T, b *bundle) {
	// Scenario: two promotions that would stop serving a@v1 are refused,
	// one by the compare-and-swap (it expects a plan that is not current),
	// one by its check: neither records a last-served time.
	k := vkey("m.a", "v1")
	promote(t, b, "prod", "", "p1", hour(0), sref("m.a", "v1"))
	_, err := b.store.Promote(b.ctx, state.PromoteParams{Environment: "prod", ExpectedPlanID: "other", PlanID: "p2",
		Snapshots: []state.SnapshotRef{sref("m.a", "v2")}, Now: hour(1)})
	require.ErrorIs(t, err, state.ErrConflictingPlan)
	refused := errors.New("refused")
	_, err = b.store.Promote(b.ctx, state.PromoteParams{Environment: "prod", ExpectedPlanID: "p1", PlanID: "p3",
		Snapshots: []state.SnapshotRef{sref("m.a", "v2")}, Now: hour(2),
		Check: func(context.Context, state.Reader) (state.CheckResult, error) { return state.CheckResult{}, refused }})
	require.ErrorIs(t, err, refused)
	requireLastServed(t, b, []state.VersionKey{k}, map[state.VersionKey]time.Time{})
}

func testLastServedInvalidated(t *testing.T, b *bundle) {
	// Scenario: dev serves a@v1 and is invalidated (its views still stand
	// until the janitor runs). A new plan promotes dev afresh (expecting
	// "") with a@v2: a@v1 was last served then.
	k := vkey("m.a", "v1")
	promote(t, b, "dev", "", "d1", hour(0), sref("m.a", "v1"))
	require.NoError(t, b.store.Invalidate(b.ctx, state.InvalidateParams{Environment: "dev", Now: hour(1)}))
	requireLastServed(t, b, []state.VersionKey{k}, map[state.VersionKey]time.Time{})
	promote(t, b, "dev", "", "d2", hour(2), sref("m.a", "v2"))
	requireLastServed(t, b, []state.VersionKey{k}, map[state.VersionKey]time.Time{k: hour(2)})
}

func testLastServedDelete(t *testing.T, b *bundle) {
	// Scenario: the janitor deletes dev (a@v1, b@v1) at 04:00: both were
	// last served then. A delete pinned to a stale generation is refused
	// and records nothing, and a delete without Now is refused.
	a1, b1 := vkey("m.a", "v1"), vkey("m.b", "v1")
	e1 := promote(t, b, "dev", "", "d1", hour(0), sref("m.a", "v0"))
	e2 := promote(t, b, "dev", "d1", "d2", hour(1), sref("m.a", "v1"), sref("m.b", "v1"))
	a0 := vkey("m.a", "v0")
	keys := []state.VersionKey{a0, a1, b1}
	err := removeErr(b.store.RemoveEnvironment(b.ctx, state.RemoveEnvironmentParams{Name: "dev", Generation: e1.Generation, Now: hour(3)}))
	require.ErrorIs(t, err, state.ErrConflictingPlan)
	requireLastServed(t, b, keys, map[state.VersionKey]time.Time{a0: hour(1)})
	err = removeErr(b.store.RemoveEnvironment(b.ctx, state.RemoveEnvironmentParams{Name: "dev", Generation: e2.Generation}))
	require.Error(t, err)
	require.NotErrorIs(t, err, state.ErrConflictingPlan)
	requireEnv(t, e2, getEnv(t, b, "dev"))

	require.NoError(t, removeErr(b.store.RemoveEnvironment(b.ctx, state.RemoveEnvironmentParams{Name: "dev", Generation: e2.Generation, Now: hour(4)})))
	requireLastServed(t, b, keys, map[state.VersionKey]time.Time{a0: hour(1), a1: hour(4), b1: hour(4)})
	err = removeErr(b.store.RemoveEnvironment(b.ctx, state.RemoveEnvironmentParams{Name: "dev", Generation: e2.Generation, Now: hour(5)}))
	require.ErrorIs(t, err, state.ErrNotFound)
	requireLastServed(t, b, keys, map[state.VersionKey]time.Time{a0: hour(1), a1: hour(4), b1: hour(4)})
}

func testLastServedDeleteIntervals(t *testing.T, b *bundle) {
	// Scenario: the janitor drops a@v1 (DeleteIntervals): its intervals,
	// last write and last-served time go together; b@v1's stay.
	a1, b1 := vkey("m.a", "v1"), vkey("m.b", "v1")
	promote(t, b, "prod", "", "p1", hour(0), sref("m.a", "v1"), sref("m.b", "v1"))
	add(t, b, a1, set(hours(0, 2)))
	promote(t, b, "prod", "p1", "p2", hour(2))
	require.NoError(t, b.store.DeleteIntervals(b.ctx, []state.VersionKey{a1}))
	requireLastServed(t, b, []state.VersionKey{a1, b1}, map[state.VersionKey]time.Time{b1: hour(2)})
	require.Empty(t, lastWrites(t, b, a1))
	requireIntervals(t, b, a1, set())
}

func testLastServedManyKeys(t *testing.T, b *bundle) {
	// Scenario: prod stops serving 1,000 versions in one promotion; one
	// LastServed call over them, an unknown key and a repeated key returns
	// exactly the 1,000.
	old := refs(1000, "old")
	promote(t, b, "prod", "", "p1", hour(0), old...)
	promote(t, b, "prod", "p1", "p2", hour(1), refs(1000, "new")...)
	keys := []state.VersionKey{vkey("m.unknown", "v1"), old[0].VersionKey()}
	want := map[state.VersionKey]time.Time{}
	for _, r := range old {
		keys = append(keys, r.VersionKey())
		want[r.VersionKey()] = hour(1)
	}
	requireLastServed(t, b, keys, want)
	require.Empty(t, lastServed(t, b))
}
