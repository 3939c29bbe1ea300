package statetest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/state"
)

func raceTests() []test {
	return []test{
		{"PromotersExpectingOnePlan", testRacePromote},
		{"AcquirersOfOneLease", testRaceLeaseAcquire},
		{"LeaseIsMutuallyExclusive", testRaceLeaseExclusive},
		{"IntervalWritersOnDifferentModels", testRaceIntervalsModels},
		{"IntervalWritersOnOneKey", testRaceIntervalsSameKey},
		{"EventAppenders", testRaceEvents},
	}
}

// racers is the number of goroutines each race starts.
const racers = 8

// race runs fn(i) for i in [0, n) on n goroutines released together by a
// closed channel (the starting gun), and waits for all of them.
func race(n int, fn func(i int)) {
	gun := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-gun
			fn(i)
		})
	}
	close(gun)
	wg.Wait()
}

func testRacePromote(t *testing.T, b *bundle) {
	// Scenario: 8 deploys built against plan-0 promote prod at the same
	// instant. Exactly one wins; the 7 others get ErrConflictingPlan; the
	// generation moved by exactly one, to the winner's plan.
	before := promote(t, b, "prod", "", "plan-0", hour(0))
	errs := make([]error, racers)
	race(racers, func(i int) {
		_, errs[i] = b.store.Promote(b.ctx, state.PromoteParams{
			Environment: "prod", ExpectedPlanID: "plan-0", PlanID: fmt.Sprintf("plan-%d", i+1),
			Snapshots: refs(3, fmt.Sprint(i)), Now: hour(1),
		})
	})
	winner := -1
	for i, err := range errs {
		if err == nil {
			require.Equal(t, -1, winner, "two promotions won")
			winner = i
			continue
		}
		require.ErrorIs(t, err, state.ErrConflictingPlan)
	}
	require.NotEqual(t, -1, winner, "no promotion won")
	after := getEnv(t, b, "prod")
	require.Equal(t, before.Generation+1, after.Generation)
	require.Equal(t, fmt.Sprintf("plan-%d", winner+1), after.PlanID)
	require.Equal(t, "plan-0", after.PreviousPlanID)
}

// raceAcquire has racers goroutines acquire key at now and returns the
// leases won; every loser must get ErrLeaseHeld.
func raceAcquire(t *testing.T, b *bundle, key string, now time.Time) []state.Lease {
	t.Helper()
	leases := make([]state.Lease, racers)
	errs := make([]error, racers)
	race(racers, func(i int) {
		leases[i], errs[i] = b.store.AcquireLease(b.ctx, state.AcquireLeaseParams{
			Key: key, Owner: fmt.Sprintf("worker-%d", i), TTL: time.Hour, Now: now,
		})
	})
	var won []state.Lease
	for i, err := range errs {
		if err == nil {
			won = append(won, leases[i])
			continue
		}
		require.ErrorIs(t, err, state.ErrLeaseHeld)
	}
	return won
}

func testRaceLeaseAcquire(t *testing.T, b *bundle) {
	// Scenario: 8 workers acquire one lease at the same instant: exactly
	// one holds it. With the injected clock past its expiry, 8 workers race
	// to take it over: exactly one wins, with a new token. The first
	// holder's renew then fails with ErrLeaseLost and its fenced write with
	// ErrFenced, writing nothing.
	won := raceAcquire(t, b, "run:prod", hour(0))
	require.Len(t, won, 1)
	first := won[0]

	won = raceAcquire(t, b, "run:prod", hour(2))
	require.Len(t, won, 1)
	second := won[0]
	require.NotEqual(t, first.Token, second.Token)

	_, err := b.store.RenewLease(b.ctx, state.RenewLeaseParams{Key: "run:prod", Token: first.Token, TTL: time.Hour, Now: hour(2)})
	require.ErrorIs(t, err, state.ErrLeaseLost)
	k := vkey("m.a", "v1")
	require.ErrorIs(t, fencedWrite(b, true, k, set(hours(0, 1)), leaseFence(first), hour(2)), state.ErrFenced)
	requireIntervals(t, b, k, interval.Set{})
	require.NoError(t, fencedWrite(b, true, k, set(hours(0, 1)), leaseFence(second), hour(2)))
	got, err := b.store.GetLease(b.ctx, "run:prod")
	require.NoError(t, err)
	require.Equal(t, second.Token, got.Token)
}

func testRaceLeaseExclusive(t *testing.T, b *bundle) {
	// Scenario: 8 workers each try 20 times to take a lease, and while one
	// holds it, it reads the key's frontier and records the next hour under
	// its lease fence, then releases. If two ever held the lease at once,
	// two would record the same hour and the history would be shorter than
	// the number of acquisitions; it never is, and holders never overlap.
	k := vkey("m.exclusive", "v1")
	var holders, overlaps, acquired atomic.Int64
	errs := make([]error, racers)
	race(racers, func(i int) {
		for range 20 {
			l, err := b.store.AcquireLease(b.ctx, state.AcquireLeaseParams{Key: "run:exclusive", Owner: fmt.Sprint(i), TTL: time.Hour, Now: hour(0)})
			if errors.Is(err, state.ErrLeaseHeld) {
				continue
			}
			if err != nil {
				errs[i] = err
				return
			}
			if holders.Add(1) != 1 {
				overlaps.Add(1)
			}
			acquired.Add(1)
			errs[i] = recordNextHour(b, k, l)
			holders.Add(-1)
			if err := b.store.ReleaseLease(b.ctx, state.ReleaseLeaseParams{Key: l.Key, Token: l.Token}); err != nil {
				errs[i] = errors.Join(errs[i], err)
			}
			if errs[i] != nil {
				return
			}
		}
	})
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.Zero(t, overlaps.Load(), "two workers held the lease at once")
	n := int(acquired.Load())
	require.Positive(t, n)
	requireIntervals(t, b, k, set(hours(0, n)))
}

// recordNextHour reads k's frontier and adds the hour after it, fenced by l.
func recordNextHour(b *bundle, k state.VersionKey, l state.Lease) error {
	got, err := b.store.GetIntervals(b.ctx, []state.VersionKey{k})
	if err != nil {
		return err
	}
	next := hour(0)
	if !got[k].IsEmpty() {
		next = got[k].Frontier()
	}
	return fencedWrite(b, true, k, set(interval.NewRange(next, next.Add(time.Hour))), leaseFence(l), hour(0))
}

func testRaceIntervalsModels(t *testing.T, b *bundle) {
	// Scenario: 8 writers, one per model, each record 50 separate hours at
	// the same time. Every hour of every model survives.
	const adds = 50
	errs := make([]error, racers)
	race(racers, func(i int) {
		k := vkey(fmt.Sprintf("m.model%d", i), "v1")
		for j := range adds {
			if err := b.store.AddIntervals(b.ctx, state.IntervalsParams{Key: k, Ranges: set(hours(2*j, 2*j+1)), Now: hour(0)}); err != nil {
				errs[i] = err
				return
			}
		}
	})
	var keys []state.VersionKey
	for i, err := range errs {
		require.NoError(t, err)
		keys = append(keys, vkey(fmt.Sprintf("m.model%d", i), "v1"))
	}
	want := interval.Set{}
	for j := range adds {
		want = want.Add(hours(2*j, 2*j+1))
	}
	got, err := b.store.GetIntervals(b.ctx, keys)
	require.NoError(t, err)
	for _, k := range keys {
		require.Truef(t, want.Equal(got[k]), "%+v: want %v, got %v", k, want, got[k])
	}
	require.Equal(t, racers*adds, rowCount(t, b))
}

func testRaceIntervalsSameKey(t *testing.T, b *bundle) {
	// Scenario: 8 writers record interleaved hours of one key at the same
	// time (writer i records hours i, i+8, i+16, ...): each add merges with
	// its neighbours' adds. A lost read-merge-write would leave a hole; the
	// key ends as one range of 200 hours in one row.
	const perWriter = 25
	errs := make([]error, racers)
	k := vkey("m.shared", "v1")
	race(racers, func(i int) {
		for j := range perWriter {
			h := i + racers*j
			if err := b.store.AddIntervals(b.ctx, state.IntervalsParams{Key: k, Ranges: set(hours(h, h+1)), Now: hour(0)}); err != nil {
				errs[i] = err
				return
			}
		}
	})
	for _, err := range errs {
		require.NoError(t, err)
	}
	requireIntervals(t, b, k, set(hours(0, racers*perWriter)))
	require.Equal(t, 1, rowCount(t, b))
}

func testRaceEvents(t *testing.T, b *bundle) {
	// Scenario: 8 writers append 25 events each at the same time. All 200
	// are recorded, ids are unique, and the history lists them in id order.
	const perWriter = 25
	ids := make([][]int64, racers)
	errs := make([]error, racers)
	race(racers, func(i int) {
		for range perWriter {
			ev, err := b.store.AppendEvents(b.ctx, state.Event{At: hour(0), Kind: state.EventPlanApplied, Model: fmt.Sprint(i)})
			if err != nil {
				errs[i] = err
				return
			}
			ids[i] = append(ids[i], ev[0].ID)
		}
	})
	seen := map[int64]bool{}
	for i, err := range errs {
		require.NoError(t, err)
		for j, id := range ids[i] {
			require.False(t, seen[id], "id %d handed out twice", id)
			seen[id] = true
			if j > 0 {
				require.Greater(t, id, ids[i][j-1], "one writer's ids must increase")
			}
		}
	}
	all, err := b.store.ListEvents(b.ctx, state.EventFilter{})
	require.NoError(t, err)
	require.Len(t, all, racers*perWriter)
	for i := 1; i < len(all); i++ {
		require.Greater(t, all[i].ID, all[i-1].ID)
	}
}
