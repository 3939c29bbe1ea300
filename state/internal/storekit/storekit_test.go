package storekit

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/state"
)

func TestFenceValidate(t *testing.T) {
	t.Parallel()
	now := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	ok := []state.Fence{
		{LeaseKey: "model:demo.events", LeaseToken: "abc"},
		{Environment: "prod", Generation: 3},
		{LeaseKey: "k", LeaseToken: "t", Environment: "prod", Generation: 1},
	}
	for _, f := range ok {
		require.NoError(t, ValidateFence(f, now), "%+v", f)
	}
	bad := []state.Fence{
		{},
		{LeaseKey: "k"},
		{LeaseToken: "t"},
		{Environment: "prod"},
		{Environment: "prod", Generation: -1},
		{LeaseKey: "k", LeaseToken: "t", Generation: 1},
		{LeaseKey: "k", Environment: "prod", Generation: 1},
	}
	for _, f := range bad {
		require.ErrorContains(t, ValidateFence(f, now), "malformed fence", "%+v", f)
	}
	require.ErrorIs(t, ValidateFence(state.Fence{LeaseKey: "k", LeaseToken: "t"}, time.Time{}), state.ErrNoNow)
}

func TestNewLeaseTokenIsUnique(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 1000 {
		tok, err := NewLeaseToken()
		require.NoError(t, err)
		require.Len(t, tok, 32)
		require.False(t, seen[tok])
		seen[tok] = true
	}
}

func TestUnserved(t *testing.T) {
	// Scenario: an environment moves from a@v1, b@v1, c@v1 to a@v2 (new
	// fingerprint), b@v1 (another fingerprint, same version) and d@v1: it
	// stops serving a@v1 and c@v1 only, sorted, once each.
	t.Parallel()
	ref := func(name, fp, version string) state.SnapshotRef {
		return state.SnapshotRef{Name: name, Fingerprint: fp, Version: version}
	}
	before := []state.SnapshotRef{ref("m.c", "f1", "v1"), ref("m.a", "f1", "v1"), ref("m.b", "f1", "v1")}
	after := []state.SnapshotRef{ref("m.a", "f2", "v2"), ref("m.b", "f2", "v1"), ref("m.d", "f1", "v1")}
	require.Equal(t, []state.VersionKey{{Name: "m.a", Version: "v1"}, {Name: "m.c", Version: "v1"}}, Unserved(before, after))
	require.Empty(t, Unserved(nil, after))
}
