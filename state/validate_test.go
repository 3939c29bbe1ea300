package state

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestFenceValidate(t *testing.T) {
	t.Parallel()
	now := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	ok := []Fence{
		{LeaseKey: "model:demo.events", LeaseToken: "abc"},
		{Environment: "prod", Generation: 3},
		{LeaseKey: "k", LeaseToken: "t", Environment: "prod", Generation: 1},
	}
	for _, f := range ok {
		require.NoError(t, f.Validate(now), "%+v", f)
	}
	bad := []Fence{
		{},
		{LeaseKey: "k"},
		{LeaseToken: "t"},
		{Environment: "prod"},
		{Environment: "prod", Generation: -1},
		{LeaseKey: "k", LeaseToken: "t", Generation: 1},
		{LeaseKey: "k", Environment: "prod", Generation: 1},
	}
	for _, f := range bad {
		require.ErrorContains(t, f.Validate(now), "malformed fence", "%+v", f)
	}
	require.ErrorIs(t, Fence{LeaseKey: "k", LeaseToken: "t"}.Validate(time.Time{}), ErrNoNow)
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
