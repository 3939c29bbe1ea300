package statetest

import (
	"fmt"
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
		{"HolderIsKept", testLeaseHolderKept},
		{"TakeOverFencesTheDisplacedToken", testLeaseTakeOver},
		{"StaleTokenCannotTakeOver", testLeaseTakeOverStale},
		{"TakeOverRejectsBadInput", testLeaseTakeOverBadInput},
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

// holderOf is a LeaseHolder for tests.
func holderOf(host string, pid int) state.LeaseHolder {
	return state.LeaseHolder{Host: host, PID: pid, Start: fmt.Sprintf("start-%s-%d", host, pid)}
}

func testLeaseHolderKept(t *testing.T, b *bundle) {
	// Scenario: a process takes a lease naming itself (host, PID, start
	// identity); GetLease, a renewal and a takeover after expiry return the
	// holder each acquisition named, and a lease acquired without one has
	// an unknown (zero) holder.
	h := holderOf("ci-1", 4242)
	l, err := b.store.AcquireLease(b.ctx, state.AcquireLeaseParams{Key: "run:prod", Owner: "run", Holder: h, TTL: time.Hour, Now: hour(0)})
	require.NoError(t, err)
	require.Equal(t, h, l.Holder)
	got, err := b.store.GetLease(b.ctx, "run:prod")
	require.NoError(t, err)
	require.Equal(t, h, got.Holder)
	renewed, err := b.store.RenewLease(b.ctx, state.RenewLeaseParams{Key: "run:prod", Token: l.Token, TTL: time.Hour, Now: hour(0).Add(time.Minute)})
	require.NoError(t, err)
	require.Equal(t, h, renewed.Holder)

	h2 := holderOf("ci-2", 7)
	next, err := b.store.AcquireLease(b.ctx, state.AcquireLeaseParams{Key: "run:prod", Owner: "scheduler", Holder: h2, TTL: time.Hour, Now: hour(2)})
	require.NoError(t, err)
	require.Equal(t, h2, next.Holder)
	got, err = b.store.GetLease(b.ctx, "run:prod")
	require.NoError(t, err)
	require.Equal(t, h2, got.Holder)

	anon := acquire(t, b, "run:dev", "scheduler-1", hour(0), time.Hour)
	require.True(t, anon.Holder.IsZero(), "%+v", anon.Holder)
}

// takeOver takes over l for owner and holder at now.
func takeOver(b *bundle, l state.Lease, owner string, holder state.LeaseHolder, now time.Time) (state.Lease, error) {
	return b.store.TakeOverLease(b.ctx, state.TakeOverLeaseParams{Key: l.Key, Token: l.Token, ExpiresAt: l.ExpiresAt,
		Owner: owner, Holder: holder, TTL: time.Hour, Now: now})
}

func testLeaseTakeOver(t *testing.T, b *bundle) {
	// Scenario: run A (pid 100) holds a version's lease for an hour and is
	// killed ten minutes in. Run B, finding A gone, takes the lease over at
	// once, well before it expires: a fresh token, B's owner and holder,
	// an hour from now. A's token can no longer renew, release or write
	// intervals (ErrFenced, nothing written); B's fenced write succeeds.
	k := vkey("m.a", "v1")
	a, err := b.store.AcquireLease(b.ctx, state.AcquireLeaseParams{Key: "version/m.a@v1", Owner: "run", Holder: holderOf("ci-1", 100), TTL: time.Hour, Now: hour(0)})
	require.NoError(t, err)
	require.NoError(t, fencedWrite(b, true, k, set(hours(0, 1)), leaseFence(a), hour(0)))

	at := hour(0).Add(10 * time.Minute)
	taker, err := takeOver(b, a, "run", holderOf("ci-1", 200), at)
	require.NoError(t, err)
	require.NotEqual(t, a.Token, taker.Token)
	require.Equal(t, "version/m.a@v1", taker.Key)
	require.Equal(t, holderOf("ci-1", 200), taker.Holder)
	require.True(t, taker.AcquiredAt.Equal(at), "AcquiredAt %v", taker.AcquiredAt)
	require.True(t, taker.ExpiresAt.Equal(at.Add(time.Hour)), "ExpiresAt %v", taker.ExpiresAt)
	got, err := b.store.GetLease(b.ctx, "version/m.a@v1")
	require.NoError(t, err)
	require.Equal(t, taker, got)

	_, err = b.store.RenewLease(b.ctx, state.RenewLeaseParams{Key: a.Key, Token: a.Token, TTL: time.Hour, Now: at})
	require.ErrorIs(t, err, state.ErrLeaseLost)
	require.ErrorIs(t, b.store.ReleaseLease(b.ctx, state.ReleaseLeaseParams{Key: a.Key, Token: a.Token}), state.ErrLeaseLost)
	require.ErrorIs(t, fencedWrite(b, true, k, set(hours(1, 2)), leaseFence(a), at), state.ErrFenced)
	requireIntervals(t, b, k, set(hours(0, 1)))
	require.NoError(t, fencedWrite(b, true, k, set(hours(1, 2)), leaseFence(taker), at))
	requireIntervals(t, b, k, set(hours(0, 2)))
}

func testLeaseTakeOverStale(t *testing.T, b *bundle) {
	// Scenario: the takeover is a compare-and-swap on the lease as read,
	// never a blind overwrite. B and C both read A's lease and find A gone;
	// B takes it over first, so C's takeover with A's stale token fails
	// with ErrLeaseLost and B keeps it. A lease renewed after it was read
	// (its holder is alive) is not taken over either, nor one released
	// since (no row is created), and of 8 takers racing on one read exactly
	// one wins.
	a, err := b.store.AcquireLease(b.ctx, state.AcquireLeaseParams{Key: "k", Owner: "A", Holder: holderOf("h", 1), TTL: time.Hour, Now: hour(0)})
	require.NoError(t, err)
	taker, err := takeOver(b, a, "B", holderOf("h", 2), hour(0).Add(time.Minute))
	require.NoError(t, err)
	_, err = takeOver(b, a, "C", holderOf("h", 3), hour(0).Add(2*time.Minute))
	require.ErrorIs(t, err, state.ErrLeaseLost)
	got, err := b.store.GetLease(b.ctx, "k")
	require.NoError(t, err)
	require.Equal(t, taker, got)

	// Renewed since the read: the holder is alive.
	read := got
	_, err = b.store.RenewLease(b.ctx, state.RenewLeaseParams{Key: "k", Token: taker.Token, TTL: time.Hour, Now: hour(0).Add(3 * time.Minute)})
	require.NoError(t, err)
	_, err = takeOver(b, read, "C", holderOf("h", 3), hour(0).Add(4*time.Minute))
	require.ErrorIs(t, err, state.ErrLeaseLost)
	got, err = b.store.GetLease(b.ctx, "k")
	require.NoError(t, err)
	require.Equal(t, taker.Token, got.Token)
	require.Equal(t, "B", got.Owner)

	// Released since the read.
	require.NoError(t, b.store.ReleaseLease(b.ctx, state.ReleaseLeaseParams{Key: "k", Token: taker.Token}))
	_, err = takeOver(b, got, "C", holderOf("h", 3), hour(0).Add(5*time.Minute))
	require.ErrorIs(t, err, state.ErrLeaseLost)
	_, err = b.store.GetLease(b.ctx, "k")
	require.ErrorIs(t, err, state.ErrNotFound)

	// Racing takers.
	d, err := b.store.AcquireLease(b.ctx, state.AcquireLeaseParams{Key: "k", Owner: "D", Holder: holderOf("h", 4), TTL: time.Hour, Now: hour(1)})
	require.NoError(t, err)
	leases := make([]state.Lease, racers)
	errs := make([]error, racers)
	race(racers, func(i int) {
		leases[i], errs[i] = takeOver(b, d, fmt.Sprintf("taker-%d", i), holderOf("h", 10+i), hour(1).Add(time.Minute))
	})
	winner := -1
	for i, err := range errs {
		if err == nil {
			require.Equal(t, -1, winner, "two takeovers won")
			winner = i
			continue
		}
		require.ErrorIs(t, err, state.ErrLeaseLost)
	}
	require.NotEqual(t, -1, winner, "no takeover won")
	got, err = b.store.GetLease(b.ctx, "k")
	require.NoError(t, err)
	require.Equal(t, leases[winner], got)
}

func testLeaseTakeOverBadInput(t *testing.T, b *bundle) {
	// Scenario: a takeover without a key, the token it displaces, a
	// positive TTL or a Now is refused (not as ErrLeaseLost) and changes
	// nothing.
	l := acquire(t, b, "k", "A", hour(0), time.Hour)
	for _, p := range []state.TakeOverLeaseParams{
		{Key: "", Token: l.Token, ExpiresAt: l.ExpiresAt, Owner: "B", TTL: time.Hour, Now: hour(0)},
		{Key: "k", Token: "", ExpiresAt: l.ExpiresAt, Owner: "B", TTL: time.Hour, Now: hour(0)},
		{Key: "k", Token: l.Token, ExpiresAt: l.ExpiresAt, Owner: "B", TTL: 0, Now: hour(0)},
		{Key: "k", Token: l.Token, ExpiresAt: l.ExpiresAt, Owner: "B", TTL: time.Hour},
	} {
		_, err := b.store.TakeOverLease(b.ctx, p)
		require.Errorf(t, err, "%+v", p)
		require.NotErrorIs(t, err, state.ErrLeaseLost)
	}
	got, err := b.store.GetLease(b.ctx, "k")
	require.NoError(t, err)
	require.Equal(t, l, got)
}
