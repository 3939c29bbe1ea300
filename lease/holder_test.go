package lease_test

import (
	"bytes"
	"log/slog"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/lease"
	"github.com/gapless-dev/gapless/state"
)

// holder is a lease holder for tests that inject HolderGone.
func holder(host string, pid int) state.LeaseHolder {
	return state.LeaseHolder{Host: host, PID: pid, Start: "test"}
}

// Scenario: run A (pid 100) holds a version's lease for an hour, then is
// killed. Run B finds the lease held; HolderGone says A no longer runs, so
// B takes the lease over at once, long before it expires, with a fresh
// token, and says so in a warning naming A. A's token is lost: its
// renewal fails and its fence no longer passes.
func TestTryAcquireTakesOverAGoneHolder(t *testing.T) {
	t.Parallel()
	st := open(t)
	clk := clockwork.NewFakeClockAt(epoch)
	a, err := lease.TryAcquire(t.Context(), st, "k", lease.Options{Owner: "run", Holder: holder("ci-1", 100), Clock: clk, TTL: time.Hour})
	require.NoError(t, err)
	clk.Advance(time.Minute)

	var logs bytes.Buffer
	var asked []state.LeaseHolder
	b, err := lease.TryAcquire(t.Context(), st, "k", lease.Options{Owner: "run", Holder: holder("ci-1", 200), Clock: clk, TTL: time.Hour,
		Logger:     slog.New(slog.NewJSONHandler(&logs, nil)),
		HolderGone: func(h state.LeaseHolder) bool { asked = append(asked, h); return h.PID == 100 }})
	require.NoError(t, err)
	require.Equal(t, []state.LeaseHolder{holder("ci-1", 100)}, asked)
	l, err := st.GetLease(t.Context(), "k")
	require.NoError(t, err)
	require.Equal(t, holder("ci-1", 200), l.Holder)
	require.Equal(t, b.Fence("k").LeaseToken, l.Token)
	require.NotEqual(t, a.Fence("k").LeaseToken, l.Token)
	require.True(t, l.ExpiresAt.Equal(epoch.Add(time.Minute+time.Hour)))
	require.Contains(t, logs.String(), `"msg":"took over a lease whose holder no longer runs"`)
	require.Contains(t, logs.String(), `"holder":"run (pid 100 on ci-1)"`)

	require.ErrorIs(t, a.Renew(t.Context()), state.ErrLeaseLost)
	require.ErrorIs(t, st.CheckFence(t.Context(), *a.Fence("k"), clk.Now()), state.ErrFenced)
	require.NoError(t, st.CheckFence(t.Context(), *b.Fence("k"), clk.Now()))
}

// Scenario: a lease held by a live process, or by one on another host, is
// never taken before it expires. TryAcquire fails with a *HeldError
// (state.ErrLeaseHeld) whose message names the owner, the PID, the host and
// the expiry; AcquireAll's wait bound names them too. The holder keeps its
// token.
func TestALiveHoldersLeaseIsNotTakenOver(t *testing.T) {
	t.Parallel()
	st := open(t)
	clk := clockwork.NewFakeClockAt(epoch)
	a, err := lease.TryAcquire(t.Context(), st, "k", lease.Options{Owner: "scheduler", Holder: holder("ci-7", 4242), Clock: clk, TTL: time.Hour})
	require.NoError(t, err)
	never := func(state.LeaseHolder) bool { return false }

	_, err = lease.TryAcquire(t.Context(), st, "k", lease.Options{Owner: "run", Clock: clk, HolderGone: never})
	require.ErrorIs(t, err, state.ErrLeaseHeld)
	var he *lease.HeldError
	require.ErrorAs(t, err, &he)
	require.Equal(t, holder("ci-7", 4242), he.Lease.Holder)
	require.Equal(t, "lease k is held by scheduler (pid 4242 on ci-7) until 2024-01-01T01:00:00Z", err.Error())

	// The default check: another host's process is never known gone.
	_, err = lease.TryAcquire(t.Context(), st, "k", lease.Options{Owner: "run", Clock: clk})
	require.ErrorAs(t, err, &he)

	_, err = lease.AcquireAll(t.Context(), st, []string{"k"}, lease.Options{Owner: "deploy", Clock: clk, Wait: -1, HolderGone: never})
	require.ErrorIs(t, err, lease.ErrWaitExceeded)
	require.Contains(t, err.Error(), "held by scheduler (pid 4242 on ci-7) until 2024-01-01T01:00:00Z")
	require.NoError(t, a.Renew(t.Context()), "the holder still holds its lease")
}

// Scenario: the takeover is a compare-and-swap on the lease as read. While
// B decides that A is gone, A renews its lease (so it is alive after all):
// B's takeover fails, B reads the lease again, and this time HolderGone
// says A is alive, so B defers. A keeps its lease and its token.
func TestTakeOverLosesToARenewalInBetween(t *testing.T) {
	t.Parallel()
	st := open(t)
	clk := clockwork.NewFakeClockAt(epoch)
	a, err := lease.TryAcquire(t.Context(), st, "k", lease.Options{Owner: "A", Holder: holder("h", 1), Clock: clk, TTL: time.Hour})
	require.NoError(t, err)
	token := a.Fence("k").LeaseToken
	calls := 0
	_, err = lease.TryAcquire(t.Context(), st, "k", lease.Options{Owner: "B", Holder: holder("h", 2), Clock: clk, TTL: time.Hour,
		HolderGone: func(state.LeaseHolder) bool {
			calls++
			if calls == 1 {
				clk.Advance(time.Second)
				require.NoError(t, a.Renew(t.Context()))
				return true
			}
			return false
		}})
	var he *lease.HeldError
	require.ErrorAs(t, err, &he)
	require.Equal(t, 2, calls)
	l, err := st.GetLease(t.Context(), "k")
	require.NoError(t, err)
	require.Equal(t, token, l.Token)
	require.Equal(t, "A", l.Owner)
}

// Scenario: a deploy under the lock policy waits for a key whose holder
// was killed on this host; it does not wait out the TTL, it takes the
// lease over at once.
func TestAcquireAllTakesOverAGoneHolder(t *testing.T) {
	t.Parallel()
	st := open(t)
	clk := clockwork.NewFakeClockAt(epoch)
	_, err := lease.TryAcquire(t.Context(), st, "b", lease.Options{Owner: "run", Holder: holder("h", 1), Clock: clk, TTL: time.Hour})
	require.NoError(t, err)
	s, err := lease.AcquireAll(t.Context(), st, []string{"a", "b"}, lease.Options{Owner: "deploy", Holder: holder("h", 2), Clock: clk,
		Wait: -1, HolderGone: func(h state.LeaseHolder) bool { return h.PID == 1 }})
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, s.Keys())
	require.NoError(t, s.Release(t.Context()))
}
