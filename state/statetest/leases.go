package statetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/state"
)

func leaseTests() []test {
	return []test{
		{"AcquireRenewRelease", testLeaseLifecycle},
		{"TakeoverAfterExpiryFencesTheOldToken", testLeaseTakeover},
		{"ExpiredLeaseCannotBeRenewed", testLeaseExpiredRenew},
		{"ReleasedTokenIsLost", testLeaseReleased},
		{"TokensAreFresh", testLeaseTokensFresh},
		{"GetMissing", testLeaseGetMissing},
		{"RejectsBadInput", testLeaseBadInput},
	}
}

func testLeaseLifecycle(t *testing.T, b *bundle) {
	// Scenario: scheduler-1 takes the lease for ten minutes; scheduler-2 is
	// refused while it is held; a renewal extends it from the renewal time;
	// a release frees it for scheduler-2.
	l := acquire(t, b, "run:prod", "scheduler-1", hour(0), 10*time.Minute)
	require.NotEmpty(t, l.Token)
	require.Equal(t, "run:prod", l.Key)
	require.Equal(t, "scheduler-1", l.Owner)
	require.True(t, l.AcquiredAt.Equal(hour(0)))
	require.True(t, l.ExpiresAt.Equal(hour(0).Add(10*time.Minute)))
	got, err := b.store.GetLease(b.ctx, "run:prod")
	require.NoError(t, err)
	require.Equal(t, l.Token, got.Token)
	require.True(t, got.ExpiresAt.Equal(l.ExpiresAt))

	_, err = b.store.AcquireLease(b.ctx, state.AcquireLeaseParams{Key: "run:prod", Owner: "scheduler-2", TTL: time.Minute, Now: hour(0).Add(10*time.Minute - time.Microsecond)})
	require.ErrorIs(t, err, state.ErrLeaseHeld)

	renewed, err := b.store.RenewLease(b.ctx, state.RenewLeaseParams{Key: "run:prod", Token: l.Token, TTL: 10 * time.Minute, Now: hour(0).Add(5 * time.Minute)})
	require.NoError(t, err)
	require.Equal(t, l.Token, renewed.Token)
	require.True(t, renewed.ExpiresAt.Equal(hour(0).Add(15*time.Minute)), "ExpiresAt %v", renewed.ExpiresAt)
	_, err = b.store.AcquireLease(b.ctx, state.AcquireLeaseParams{Key: "run:prod", Owner: "scheduler-2", TTL: time.Minute, Now: hour(0).Add(12 * time.Minute)})
	require.ErrorIs(t, err, state.ErrLeaseHeld, "a renewed lease must not expire at its old time")

	require.NoError(t, b.store.ReleaseLease(b.ctx, state.ReleaseLeaseParams{Key: "run:prod", Token: l.Token}))
	_, err = b.store.GetLease(b.ctx, "run:prod")
	require.ErrorIs(t, err, state.ErrNotFound)
	l2 := acquire(t, b, "run:prod", "scheduler-2", hour(0).Add(12*time.Minute), time.Minute)
	require.NotEqual(t, l.Token, l2.Token)
}

func testLeaseTakeover(t *testing.T, b *bundle) {
	// Scenario: scheduler-1's lease expires while it is stalled; at exactly
	// ExpiresAt scheduler-2 takes it over with a new token. scheduler-1's
	// renew and release fail with ErrLeaseLost and its fenced write fails
	// with ErrFenced, writing nothing; scheduler-2's fenced write succeeds.
	k := vkey("m.a", "v1")
	old := acquire(t, b, "run:prod", "scheduler-1", hour(0), time.Hour)
	require.NoError(t, fencedWrite(b, true, k, set(hours(0, 1)), leaseFence(old), hour(0)))

	taker := acquire(t, b, "run:prod", "scheduler-2", hour(1), time.Hour)
	require.NotEqual(t, old.Token, taker.Token)
	require.Equal(t, "scheduler-2", taker.Owner)

	_, err := b.store.RenewLease(b.ctx, state.RenewLeaseParams{Key: "run:prod", Token: old.Token, TTL: time.Hour, Now: hour(1)})
	require.ErrorIs(t, err, state.ErrLeaseLost)
	require.ErrorIs(t, b.store.ReleaseLease(b.ctx, state.ReleaseLeaseParams{Key: "run:prod", Token: old.Token}), state.ErrLeaseLost)
	require.ErrorIs(t, fencedWrite(b, true, k, set(hours(1, 2)), leaseFence(old), hour(1)), state.ErrFenced)
	requireIntervals(t, b, k, set(hours(0, 1)))

	require.NoError(t, fencedWrite(b, true, k, set(hours(1, 2)), leaseFence(taker), hour(1)))
	requireIntervals(t, b, k, set(hours(0, 2)))
	got, err := b.store.GetLease(b.ctx, "run:prod")
	require.NoError(t, err)
	require.Equal(t, taker.Token, got.Token)
}

func testLeaseExpiredRenew(t *testing.T, b *bundle) {
	// Scenario: nobody took the lease over, but it expired: its holder can
	// no longer renew it (expires_at > now is part of the swap), and the
	// row stays as it was.
	l := acquire(t, b, "run:prod", "scheduler-1", hour(0), time.Hour)
	_, err := b.store.RenewLease(b.ctx, state.RenewLeaseParams{Key: "run:prod", Token: l.Token, TTL: time.Hour, Now: hour(1)})
	require.ErrorIs(t, err, state.ErrLeaseLost)
	got, err := b.store.GetLease(b.ctx, "run:prod")
	require.NoError(t, err)
	require.True(t, got.ExpiresAt.Equal(hour(1)), "ExpiresAt %v", got.ExpiresAt)
}

func testLeaseReleased(t *testing.T, b *bundle) {
	// Scenario: after a release, the released token can neither renew nor
	// release again, nor a token for a lease that never existed.
	l := acquire(t, b, "run:prod", "scheduler-1", hour(0), time.Hour)
	require.NoError(t, b.store.ReleaseLease(b.ctx, state.ReleaseLeaseParams{Key: "run:prod", Token: l.Token}))
	_, err := b.store.RenewLease(b.ctx, state.RenewLeaseParams{Key: "run:prod", Token: l.Token, TTL: time.Hour, Now: hour(0)})
	require.ErrorIs(t, err, state.ErrLeaseLost)
	require.ErrorIs(t, b.store.ReleaseLease(b.ctx, state.ReleaseLeaseParams{Key: "run:prod", Token: l.Token}), state.ErrLeaseLost)
	require.ErrorIs(t, b.store.ReleaseLease(b.ctx, state.ReleaseLeaseParams{Key: "run:never", Token: l.Token}), state.ErrLeaseLost)
}

func testLeaseTokensFresh(t *testing.T, b *bundle) {
	// Scenario: 50 acquire/release rounds on one key hand out 50 distinct
	// tokens, so a token from an earlier round can never match a later one.
	seen := map[string]bool{}
	for i := range 50 {
		l := acquire(t, b, "run:prod", "scheduler-1", hour(i), time.Minute)
		require.False(t, seen[l.Token], "token %q handed out twice", l.Token)
		seen[l.Token] = true
		require.NoError(t, b.store.ReleaseLease(b.ctx, state.ReleaseLeaseParams{Key: "run:prod", Token: l.Token}))
	}
}

func testLeaseGetMissing(t *testing.T, b *bundle) {
	// Scenario: a lease never acquired is not found.
	_, err := b.store.GetLease(b.ctx, "run:never")
	require.ErrorIs(t, err, state.ErrNotFound)
}

func testLeaseBadInput(t *testing.T, b *bundle) {
	// Scenario: an acquire without a key, without a positive TTL, or
	// without an injected Now is refused and takes nothing.
	for _, p := range []state.AcquireLeaseParams{
		{Key: "", Owner: "s", TTL: time.Minute, Now: hour(0)},
		{Key: "run:prod", Owner: "s", TTL: 0, Now: hour(0)},
		{Key: "run:prod", Owner: "s", TTL: -time.Minute, Now: hour(0)},
		{Key: "run:prod", Owner: "s", TTL: time.Minute},
	} {
		_, err := b.store.AcquireLease(b.ctx, p)
		require.Errorf(t, err, "%+v", p)
		require.NotErrorIs(t, err, state.ErrLeaseHeld)
	}
	_, err := b.store.GetLease(b.ctx, "run:prod")
	require.ErrorIs(t, err, state.ErrNotFound)
}
