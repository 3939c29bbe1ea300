package lease_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gapless-dev/gapless/lease"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/sqlite"
)

// childEnv, when set, turns this test binary into a process that prints
// its lease.Self() as JSON and waits until its stdin closes: the "other
// process" of the liveness tests.
const childEnv = "GAPLESS_LEASE_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		b, err := json.Marshal(lease.Self())
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(string(b))
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until stdin closes
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

func open(t *testing.T) state.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "state.db"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	return st
}

var epoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// Scenario: a deploy asks for three keys, one of which a scheduler holds.
// AcquireAll takes the keys in sorted order, waits on the held one, and
// gets it as soon as the scheduler releases it; it then holds all three.
func TestAcquireAllWaitsForAHeldKey(t *testing.T) {
	t.Parallel()
	st := open(t)
	clk := clockwork.NewFakeClockAt(epoch)
	sched, err := lease.TryAcquire(t.Context(), st, "b", lease.Options{Owner: "scheduler", Clock: clk})
	require.NoError(t, err)

	got := make(chan *lease.Set, 1)
	errs := make(chan error, 1)
	go func() {
		s, err := lease.AcquireAll(t.Context(), st, []string{"c", "b", "a", "b"}, lease.Options{Owner: "deploy", Clock: clk, Poll: time.Second})
		got <- s
		errs <- err
	}()
	require.NoError(t, clk.BlockUntilContext(t.Context(), 1), "the deploy waits for b")
	a, err := st.GetLease(t.Context(), "a")
	require.NoError(t, err)
	require.Equal(t, "deploy", a.Owner, "a, before b in the order, is already taken")
	_, err = st.GetLease(t.Context(), "c")
	require.ErrorIs(t, err, state.ErrNotFound, "c, after b, is not taken while waiting")

	require.NoError(t, sched.Release(t.Context()))
	clk.Advance(time.Second)
	s := <-got
	require.NoError(t, <-errs)
	require.Equal(t, []string{"a", "b", "c"}, s.Keys())
	for _, k := range s.Keys() {
		l, err := st.GetLease(t.Context(), k)
		require.NoError(t, err)
		require.Equal(t, "deploy", l.Owner)
		require.Equal(t, s.Fence(k).LeaseToken, l.Token)
	}
	require.NoError(t, s.Release(t.Context()))
	require.NoError(t, s.Release(t.Context()), "releasing twice is harmless")
	_, err = lease.TryAcquire(t.Context(), st, "b", lease.Options{Owner: "scheduler", Clock: clk})
	require.NoError(t, err, "released")
}

// Scenario: the held key stays held past the wait bound. AcquireAll fails
// naming the key and its holder, and releases what it had taken.
func TestAcquireAllGivesUpAfterTheBoundAndReleases(t *testing.T) {
	t.Parallel()
	st := open(t)
	clk := clockwork.NewFakeClockAt(epoch)
	_, err := lease.TryAcquire(t.Context(), st, "b", lease.Options{Owner: "scheduler 1", Clock: clk, TTL: time.Hour})
	require.NoError(t, err)
	errs := make(chan error, 1)
	go func() {
		_, err := lease.AcquireAll(t.Context(), st, []string{"a", "b"}, lease.Options{Owner: "deploy", Clock: clk, Wait: 3 * time.Second, Poll: time.Second})
		errs <- err
	}()
	for range 3 {
		require.NoError(t, clk.BlockUntilContext(t.Context(), 1))
		clk.Advance(time.Second)
	}
	err = <-errs
	require.ErrorIs(t, err, lease.ErrWaitExceeded)
	require.Contains(t, err.Error(), "lease b: held by scheduler 1")
	_, err = lease.TryAcquire(t.Context(), st, "a", lease.Options{Owner: "other", Clock: clk})
	require.NoError(t, err, "a was released")
}

// Scenario: Keep renews the leases every TTL/3, so they outlive their
// first TTL and nobody can take them; once renewals stop (a crashed
// holder), the lease expires and is taken over, and the old holder's next
// renewal reports it lost.
func TestKeepRenewsAndALostLeaseIsReported(t *testing.T) {
	t.Parallel()
	st := open(t)
	clk := clockwork.NewFakeClockAt(epoch)
	renewed := make(chan error)
	s, err := lease.AcquireAll(t.Context(), st, []string{"k"}, lease.Options{Owner: "deploy", Clock: clk, TTL: 30 * time.Second,
		OnRenew: func(err error) { renewed <- err }})
	require.NoError(t, err)
	s.Keep(t.Context())
	for range 6 { // one minute: twice the TTL
		require.NoError(t, clk.BlockUntilContext(t.Context(), 1))
		clk.Advance(10 * time.Second)
		require.NoError(t, <-renewed)
	}
	_, err = lease.TryAcquire(t.Context(), st, "k", lease.Options{Owner: "thief", Clock: clk})
	require.ErrorIs(t, err, state.ErrLeaseHeld, "renewed past its first TTL")
	require.NoError(t, s.Release(t.Context()))

	crashed, err := lease.AcquireAll(t.Context(), st, []string{"k"}, lease.Options{Owner: "crashed", Clock: clk, TTL: 30 * time.Second})
	require.NoError(t, err)
	clk.Advance(31 * time.Second)
	_, err = lease.TryAcquire(t.Context(), st, "k", lease.Options{Owner: "taker", Clock: clk})
	require.NoError(t, err, "expired and taken over")
	err = crashed.Renew(t.Context())
	require.ErrorIs(t, err, state.ErrLeaseLost)
	select {
	case <-crashed.Lost():
	default:
		t.Fatal("Lost is not closed")
	}
	require.ErrorIs(t, crashed.Err(), state.ErrLeaseLost)
	require.NoError(t, crashed.Release(t.Context()), "releasing a lost lease is not an error")
}

// Scenario (deadlock freedom): eight deploys take random overlapping sets
// of five keys, many times, all at once. Every acquisition succeeds (no
// deadlock: the test would hang or the waits would time out), and no key
// is ever held by two of them at once.
func TestAcquireAllNeverDeadlocksAndNeverShares(t *testing.T) {
	t.Parallel()
	st := open(t)
	keys := []string{"a", "b", "c", "d", "e"}
	var (
		mu     sync.Mutex
		holder = map[string]int{}
	)
	var wg sync.WaitGroup
	errs := make(chan error, 8*10)
	for w := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for range 10 {
				var want []string
				for _, k := range keys {
					if r.IntN(2) == 0 {
						want = append(want, k)
					}
				}
				r.Shuffle(len(want), func(i, j int) { want[i], want[j] = want[j], want[i] })
				s, err := lease.AcquireAll(context.Background(), st, want, lease.Options{Owner: fmt.Sprint("deploy ", w),
					Wait: time.Minute, Poll: time.Millisecond})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				for _, k := range want {
					if h, ok := holder[k]; ok {
						errs <- fmt.Errorf("key %s held by %d and %d at once", k, h, w)
					}
					holder[k] = w
				}
				mu.Unlock()
				mu.Lock()
				for _, k := range want {
					delete(holder, k)
				}
				mu.Unlock()
				if err := s.Release(context.Background()); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}
