package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/postgres"
)

// race runs n workers that all start at the same signal (no sleeps) and
// returns their errors in worker order.
func race(n int, work func(i int) error) []error {
	start := make(chan struct{})
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = work(i)
		})
	}
	close(start)
	wg.Wait()
	return errs
}

// winners returns the indexes of the nil errors, and requires every other
// error to wrap want.
func winners(t *testing.T, errs []error, want error) []int {
	t.Helper()
	var won []int
	for i, err := range errs {
		if err == nil {
			won = append(won, i)
			continue
		}
		require.ErrorIs(t, err, want, "worker %d", i)
	}
	return won
}

// stores returns n stores on the database of b, each with its own pool: n
// "processes".
func stores(t *testing.T, b bundle, n int) []*postgres.Store {
	out := make([]*postgres.Store, n)
	for i := range out {
		out[i] = open(t, b.url)
	}
	return out
}

func TestRacingFirstPromotionsExactlyOneWins(t *testing.T) {
	// Scenario: eight deploys, in four processes, promote a brand-new
	// environment at once, each believing it does not exist yet. There is
	// no row to lock yet; exactly one must win, at generation 1, and the
	// others must fail with ErrConflictingPlan.
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	procs := stores(t, b, 4)
	errs := race(8, func(i int) error {
		_, err := procs[i%len(procs)].Promote(ctx, state.PromoteParams{
			Environment: "pr_42", ExpectedPlanID: "", PlanID: fmt.Sprintf("plan-%d", i),
			Snapshots: []state.SnapshotRef{ref("a.x", fmt.Sprintf("v%d", i))}, Now: t0,
		})
		return err
	})
	won := winners(t, errs, state.ErrConflictingPlan)
	require.Len(t, won, 1)

	env, err := b.store.GetEnvironment(ctx, "pr_42")
	require.NoError(t, err)
	require.Equal(t, int64(1), env.Generation)
	require.Equal(t, fmt.Sprintf("plan-%d", won[0]), env.PlanID)
	require.Equal(t, []state.SnapshotRef{ref("a.x", fmt.Sprintf("v%d", won[0]))}, env.Snapshots)

	// Scenario: eight more deploys race from the winner's plan: again
	// exactly one wins, and the generation moves by exactly one.
	errs = race(8, func(i int) error {
		_, err := procs[i%len(procs)].Promote(ctx, state.PromoteParams{
			Environment: "pr_42", ExpectedPlanID: env.PlanID, PlanID: fmt.Sprintf("second-%d", i),
			Snapshots: []state.SnapshotRef{ref("a.x", "w")}, Now: t0.Add(time.Hour),
		})
		return err
	})
	won = winners(t, errs, state.ErrConflictingPlan)
	require.Len(t, won, 1)
	env2, err := b.store.GetEnvironment(ctx, "pr_42")
	require.NoError(t, err)
	require.Equal(t, int64(2), env2.Generation)
	require.Equal(t, env.PlanID, env2.PreviousPlanID)
	require.Equal(t, fmt.Sprintf("second-%d", won[0]), env2.PlanID)
}

func TestRacingLeaseAcquisitionsExactlyOneHolds(t *testing.T) {
	// Scenario: eight schedulers in four processes race for one lease; one
	// holds it. When it expires unrenewed, eight more race to take it over:
	// again exactly one wins, and the old holder's token can neither renew,
	// nor release, nor write intervals fenced by it.
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	procs := stores(t, b, 4)
	const ttl = time.Minute
	var mu sync.Mutex
	got := map[int]state.Lease{}
	acquire := func(now time.Time) func(i int) error {
		return func(i int) error {
			l, err := procs[i%len(procs)].AcquireLease(ctx, state.AcquireLeaseParams{
				Key: "run/prod", Owner: fmt.Sprintf("scheduler-%d", i), TTL: ttl, Now: now,
			})
			if err == nil {
				mu.Lock()
				got[i] = l
				mu.Unlock()
			}
			return err
		}
	}
	won := winners(t, race(8, acquire(t0)), state.ErrLeaseHeld)
	require.Len(t, won, 1)
	first := got[won[0]]
	require.Equal(t, fmt.Sprintf("scheduler-%d", won[0]), first.Owner)
	require.Equal(t, t0.Add(ttl), first.ExpiresAt)
	require.Len(t, first.Token, 32)

	// Still held one microsecond before expiry.
	_, err := b.store.AcquireLease(ctx, state.AcquireLeaseParams{Key: "run/prod", Owner: "late", TTL: ttl, Now: first.ExpiresAt.Add(-time.Microsecond)})
	require.ErrorIs(t, err, state.ErrLeaseHeld)

	clear(got)
	won = winners(t, race(8, acquire(first.ExpiresAt)), state.ErrLeaseHeld)
	require.Len(t, won, 1)
	second := got[won[0]]
	require.NotEqual(t, first.Token, second.Token)

	key := state.VersionKey{Name: "a.x", Version: "v1"}
	stale := &state.Fence{LeaseKey: "run/prod", LeaseToken: first.Token}
	_, err = b.store.RenewLease(ctx, state.RenewLeaseParams{Key: "run/prod", Token: first.Token, TTL: ttl, Now: first.ExpiresAt})
	require.ErrorIs(t, err, state.ErrLeaseLost)
	err = b.store.AddIntervals(ctx, state.IntervalsParams{Key: key, Ranges: hours(0, 1), Fence: stale, Now: first.ExpiresAt})
	require.ErrorIs(t, err, state.ErrFenced)
	require.ErrorIs(t, b.store.ReleaseLease(ctx, state.ReleaseLeaseParams{Key: "run/prod", Token: first.Token}), state.ErrLeaseLost)
	n, err := b.store.CountIntervalRows(ctx)
	require.NoError(t, err)
	require.Zero(t, n)

	// The new holder's fenced write goes through.
	fresh := &state.Fence{LeaseKey: "run/prod", LeaseToken: second.Token}
	require.NoError(t, b.store.AddIntervals(ctx, state.IntervalsParams{Key: key, Ranges: hours(0, 1), Fence: fresh, Now: first.ExpiresAt}))
	require.True(t, hours(0, 1).Equal(intervalsOf(t, b.store, key)))
}

func TestConcurrentSameKeyAddsAllSurvive(t *testing.T) {
	// Scenario: 48 workers in four processes each record one hour of the
	// same model version, in shuffled order. No update may be lost, and
	// compaction must still leave a single stored range.
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	procs := stores(t, b, 4)
	const n = 48
	order := rand.Perm(n)
	key := state.VersionKey{Name: "a.hourly", Version: "v1"}
	errs := race(n, func(i int) error {
		h := order[i]
		return procs[i%len(procs)].AddIntervals(ctx, state.IntervalsParams{Key: key, Ranges: hours(h, h+1), Now: t0})
	})
	require.Empty(t, winnersNot(errs))
	require.True(t, hours(0, n).Equal(intervalsOf(t, b.store, key)), intervalsOf(t, b.store, key).String())
	rows, err := b.store.CountIntervalRows(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, rows)

	// Scenario: concurrent restatements (removals of every third hour) and
	// additions elsewhere on the same key interleave; the result is exactly
	// what applying them in any order gives.
	errs = race(n, func(i int) error {
		s := procs[i%len(procs)]
		if i%3 == 0 {
			return s.RemoveIntervals(ctx, state.IntervalsParams{Key: key, Ranges: hours(i, i+1), Now: t0})
		}
		return s.AddIntervals(ctx, state.IntervalsParams{Key: key, Ranges: hours(100+i, 101+i), Now: t0})
	})
	require.Empty(t, winnersNot(errs))
	want := hours(0, n)
	for i := range n {
		if i%3 == 0 {
			want = want.Subtract(hours(i, i+1))
		} else {
			want = want.Union(hours(100+i, 101+i))
		}
	}
	got := intervalsOf(t, b.store, key)
	require.True(t, want.Equal(got), "want %v\ngot  %v", want, got)
	rows, err = b.store.CountIntervalRows(ctx)
	require.NoError(t, err)
	require.Equal(t, want.Len(), rows)
}

// winnersNot returns the non-nil errors.
func winnersNot(errs []error) []error {
	var out []error
	for _, err := range errs {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

func TestConcurrentWritersOfDifferentModelsAllSurvive(t *testing.T) {
	// Scenario: 32 writers for 32 different models, in four processes.
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	procs := stores(t, b, 4)
	keys := make([]state.VersionKey, 32)
	for i := range keys {
		keys[i] = state.VersionKey{Name: fmt.Sprintf("m.model_%02d", i), Version: "v"}
	}
	errs := race(len(keys), func(i int) error {
		return procs[i%len(procs)].AddIntervals(ctx, state.IntervalsParams{Key: keys[i], Ranges: hours(i, i+2), Now: t0})
	})
	require.Empty(t, winnersNot(errs))
	got, err := b.store.GetIntervals(ctx, keys)
	require.NoError(t, err)
	for i, k := range keys {
		require.True(t, hours(i, i+2).Equal(got[k]), k.Name)
	}
}

func TestStaleEnvironmentFenceWritesNothing(t *testing.T) {
	// Scenario: a scheduler read prod at generation 1 and computed an
	// interval; meanwhile a deploy promoted prod to generation 2. The
	// scheduler's fenced add and remove fail with ErrFenced and change
	// nothing; pinned to generation 2 they succeed.
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	key := state.VersionKey{Name: "a.x", Version: "v1"}
	require.NoError(t, b.store.AddIntervals(ctx, state.IntervalsParams{Key: key, Ranges: hours(0, 4), Now: t0}))
	e1, err := b.store.Promote(ctx, state.PromoteParams{Environment: "prod", PlanID: "p1", Snapshots: []state.SnapshotRef{ref("a.x", "v1")}, Now: t0})
	require.NoError(t, err)
	e2, err := b.store.Promote(ctx, state.PromoteParams{Environment: "prod", ExpectedPlanID: "p1", PlanID: "p2", Snapshots: []state.SnapshotRef{ref("a.x", "v1")}, Now: t0})
	require.NoError(t, err)
	require.Equal(t, e1.Generation+1, e2.Generation)

	stale := &state.Fence{Environment: "prod", Generation: e1.Generation}
	err = b.store.AddIntervals(ctx, state.IntervalsParams{Key: key, Ranges: hours(4, 8), Fence: stale, Now: t0})
	require.ErrorIs(t, err, state.ErrFenced)
	err = b.store.RemoveIntervals(ctx, state.IntervalsParams{Key: key, Ranges: hours(0, 1), Fence: stale, Now: t0})
	require.ErrorIs(t, err, state.ErrFenced)
	err = b.store.AddIntervals(ctx, state.IntervalsParams{Key: key, Ranges: hours(4, 8), Fence: &state.Fence{Environment: "nope", Generation: 1}, Now: t0})
	require.ErrorIs(t, err, state.ErrFenced)
	require.True(t, hours(0, 4).Equal(intervalsOf(t, b.store, key)))

	current := &state.Fence{Environment: "prod", Generation: e2.Generation}
	require.NoError(t, b.store.AddIntervals(ctx, state.IntervalsParams{Key: key, Ranges: hours(4, 8), Fence: current, Now: t0}))
	require.True(t, hours(0, 8).Equal(intervalsOf(t, b.store, key)))

	// Scenario: the environment is deleted and re-created. Its generation
	// continues past the old one, so the old fence stays stale.
	_, err = b.store.RemoveEnvironment(ctx, state.RemoveEnvironmentParams{Name: "prod", Generation: e2.Generation, Now: t0})
	require.NoError(t, err)
	err = b.store.AddIntervals(ctx, state.IntervalsParams{Key: key, Ranges: hours(8, 9), Fence: current, Now: t0})
	require.ErrorIs(t, err, state.ErrFenced)
	e3, err := b.store.Promote(ctx, state.PromoteParams{Environment: "prod", PlanID: "p3", Snapshots: []state.SnapshotRef{ref("a.x", "v1")}, Now: t0})
	require.NoError(t, err)
	require.Equal(t, e2.Generation+1, e3.Generation)
	err = b.store.AddIntervals(ctx, state.IntervalsParams{Key: key, Ranges: hours(8, 9), Fence: stale, Now: t0})
	require.ErrorIs(t, err, state.ErrFenced)
}

// isLockTimeout reports whether err is PostgreSQL's lock_not_available: the
// statement had to wait for a lock longer than lock_timeout.
func isLockTimeout(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03"
}

func TestPromotionCheckHoldsWhatItRead(t *testing.T) {
	// Scenario: while a promotion's check runs, a restatement tries to
	// remove intervals the check just read, a scheduler tries a write fenced
	// on the environment's current generation, and a second deploy tries to
	// promote. All three must wait for the promotion (here, an impatient
	// process with lock_timeout=1ms gives up instead of waiting), so what
	// the check approved is what the promotion commits against. Afterwards
	// the restatement goes through and the fenced write is stale.
	//
	// The promotion cannot finish before the impatient calls return (they
	// run inside its check), so "they had to wait" is certain, not timing.
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	impatient := open(t, withParam(t, b.url, "lock_timeout", "1"))
	key := state.VersionKey{Name: "a.x", Version: "v1"}
	require.NoError(t, b.store.AddIntervals(ctx, state.IntervalsParams{Key: key, Ranges: hours(0, 10), Now: t0}))
	e1, err := b.store.Promote(ctx, state.PromoteParams{Environment: "prod", PlanID: "p1", Snapshots: []state.SnapshotRef{ref("a.x", "v1")}, Now: t0})
	require.NoError(t, err)
	fence := &state.Fence{Environment: "prod", Generation: e1.Generation}

	checked := false
	_, err = b.store.Promote(ctx, state.PromoteParams{
		Environment: "prod", ExpectedPlanID: "p1", PlanID: "p2",
		Snapshots: []state.SnapshotRef{ref("a.x", "v1")}, Now: t0.Add(time.Hour),
		Check: func(ctx context.Context, r state.Reader) (state.CheckResult, error) {
			got, err := r.GetIntervals(ctx, []state.VersionKey{key})
			if err != nil {
				return state.CheckResult{}, err
			}
			if !hours(0, 10).Equal(got[key]) {
				return state.CheckResult{}, fmt.Errorf("check read %v", got[key])
			}
			env, err := r.GetEnvironment(ctx, "prod")
			if err != nil {
				return state.CheckResult{}, err
			}
			if env.PlanID != "p1" {
				return state.CheckResult{}, fmt.Errorf("check read plan %q", env.PlanID)
			}
			if err := impatient.RemoveIntervals(ctx, state.IntervalsParams{Key: key, Ranges: hours(0, 1), Now: t0}); !isLockTimeout(err) {
				return state.CheckResult{}, fmt.Errorf("restatement during the check: want a lock timeout, got %w", err)
			}
			if err := impatient.AddIntervals(ctx, state.IntervalsParams{Key: key, Ranges: hours(10, 11), Fence: fence, Now: t0}); !isLockTimeout(err) {
				return state.CheckResult{}, fmt.Errorf("fenced write during the check: want a lock timeout, got %w", err)
			}
			if _, err := impatient.Promote(ctx, state.PromoteParams{Environment: "prod", ExpectedPlanID: "p1", PlanID: "p3", Now: t0}); !isLockTimeout(err) {
				return state.CheckResult{}, fmt.Errorf("second promotion during the check: want a lock timeout, got %w", err)
			}
			checked = true
			return state.CheckResult{}, nil
		},
	})
	require.NoError(t, err)
	require.True(t, checked)

	require.NoError(t, impatient.RemoveIntervals(ctx, state.IntervalsParams{Key: key, Ranges: hours(0, 1), Now: t0}))
	require.True(t, hours(1, 10).Equal(intervalsOf(t, b.store, key)))
	err = impatient.AddIntervals(ctx, state.IntervalsParams{Key: key, Ranges: hours(10, 11), Fence: fence, Now: t0})
	require.ErrorIs(t, err, state.ErrFenced)
	_, err = impatient.Promote(ctx, state.PromoteParams{Environment: "prod", ExpectedPlanID: "p1", PlanID: "p3", Now: t0})
	require.ErrorIs(t, err, state.ErrConflictingPlan)
}

func TestFencedWriteAndTakeoverSerialise(t *testing.T) {
	// Scenario: a scheduler's lease expires while its fenced write, checked
	// at its own earlier Now, is mid-transaction; another scheduler tries to
	// take the lease over. The takeover must wait for the write's
	// transaction (which holds the lease row FOR SHARE): an impatient taker
	// with lock_timeout=1ms gives up instead. Once the write has committed,
	// the takeover succeeds and the old token is fenced.
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	impatient := open(t, withParam(t, b.url, "lock_timeout", "1"))
	l, err := b.store.AcquireLease(ctx, state.AcquireLeaseParams{Key: "k", Owner: "old", TTL: time.Minute, Now: t0})
	require.NoError(t, err)
	key := state.VersionKey{Name: "a.x", Version: "v1"}
	fence := &state.Fence{LeaseKey: "k", LeaseToken: l.Token}

	var takeoverErr error
	postgres.SetAfterFenceHook(b.store, func() {
		_, takeoverErr = impatient.AcquireLease(ctx, state.AcquireLeaseParams{Key: "k", Owner: "new", TTL: time.Minute, Now: l.ExpiresAt})
	})
	require.NoError(t, b.store.AddIntervals(ctx, state.IntervalsParams{Key: key, Ranges: hours(0, 1), Fence: fence, Now: t0}))
	postgres.SetAfterFenceHook(b.store, nil)
	require.True(t, isLockTimeout(takeoverErr), "takeover during the fenced write: %v", takeoverErr)

	_, err = impatient.AcquireLease(ctx, state.AcquireLeaseParams{Key: "k", Owner: "new", TTL: time.Minute, Now: l.ExpiresAt})
	require.NoError(t, err)
	err = b.store.AddIntervals(ctx, state.IntervalsParams{Key: key, Ranges: hours(1, 2), Fence: fence, Now: t0})
	require.ErrorIs(t, err, state.ErrFenced)
	require.True(t, hours(0, 1).Equal(intervalsOf(t, b.store, key)))
}

func TestRepairYieldsToASupersessionThatCommittedFirst(t *testing.T) {
	// Scenario: a scheduler's write has read the open debt of a.x@v1 that
	// its hours complete, and before it stamps the repair a deploy
	// promotes prod to a.x@v2, superseding that debt (and carrying it to
	// v2, which has no intervals), and commits (the write does not lock
	// the debts it only reads). The write still commits its intervals, but
	// it must not stamp the superseded debt repaired nor announce a
	// repair: a debt ends exactly one way.
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	other := open(t, b.url)
	key := state.VersionKey{Name: "a.x", Version: "v1"}
	_, err := b.store.Promote(ctx, state.PromoteParams{
		Environment: "prod", PlanID: "p1", Snapshots: []state.SnapshotRef{ref("a.x", "v1")}, Now: t0,
		Check: func(context.Context, state.Reader) (state.CheckResult, error) {
			return state.CheckResult{Debts: []state.Debt{{Model: "a.x", Version: "v1", Range: hours(0, 2).Span(), Policy: "trailing-gap(2)", Bound: 2, Advances: 2}}}, nil
		},
	})
	require.NoError(t, err)
	l, err := b.store.AcquireLease(ctx, state.AcquireLeaseParams{Key: "run:a.x", Owner: "scheduler", TTL: 3 * time.Hour, Now: t0})
	require.NoError(t, err)

	var promoteErr error
	postgres.SetAfterFenceHook(b.store, func() {
		_, promoteErr = other.Promote(ctx, state.PromoteParams{
			Environment: "prod", ExpectedPlanID: "p1", PlanID: "p2",
			Snapshots: []state.SnapshotRef{ref("a.x", "v2")}, Now: t0.Add(time.Hour),
		})
	})
	err = b.store.AddIntervals(ctx, state.IntervalsParams{
		Key: key, Ranges: hours(0, 2), Fence: &state.Fence{LeaseKey: l.Key, LeaseToken: l.Token}, Now: t0.Add(2 * time.Hour),
	})
	postgres.SetAfterFenceHook(b.store, nil)
	require.NoError(t, err)
	require.NoError(t, promoteErr)
	require.True(t, hours(0, 2).Equal(intervalsOf(t, b.store, key)))

	debts, err := b.store.ListDebts(ctx, state.DebtFilter{})
	require.NoError(t, err)
	require.Len(t, debts, 2) // v1's debt, and the debt it was carried to on v2
	require.True(t, t0.Add(time.Hour).Equal(debts[0].SupersededAt), "superseded at %v", debts[0].SupersededAt)
	require.True(t, debts[0].RepairedAt.IsZero(), "a superseded debt was stamped repaired at %v", debts[0].RepairedAt)
	require.Equal(t, debts[0].ID, debts[1].CarriedFrom)
	require.Equal(t, "v2", debts[1].Version)
	require.True(t, debts[1].Open(), "the debt carried to v2 was closed by a write on v1")
	repaired, err := b.store.ListEvents(ctx, state.EventFilter{Kinds: []string{state.EventGapRepaired}})
	require.NoError(t, err)
	require.Empty(t, repaired)
	superseded, err := b.store.ListEvents(ctx, state.EventFilter{Kinds: []string{state.EventGapSuperseded}})
	require.NoError(t, err)
	require.Len(t, superseded, 1)
}
