package apply_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/lease"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/promotion"
	"github.com/gapless-dev/gapless/run"
	"github.com/gapless-dev/gapless/state"
)

// leasedRun is a scheduler run that takes version leases, as the daemon
// and `gapless run` do. Leases and state writes read one clock, clk.
func leasedRun(ctx context.Context, b *executetest.Bundle, exec time.Time, clk clockwork.Clock) (*run.Result, error) {
	return run.Once(ctx, run.Params{Env: plan.Prod, ExecutionTime: exec, Store: b.Store, Engine: b.Engine, Parser: b.Parser,
		ProjectDir: b.Dir, Clock: clk, Logger: quiet,
		Leases: &lease.Options{Owner: "scheduler", Clock: clk}})
}

// ownedBy is how a run names a lease owner of this test process.
func ownedBy(owner string) string {
	self := lease.Self()
	return fmt.Sprintf("%s (pid %d on %s)", owner, self.PID, self.Host)
}

func lockApply(b *executetest.Bundle, p *plan.Plan, now time.Time, opts lease.Options, hooks apply.Hooks) (*apply.Result, error) {
	return apply.Apply(b.Ctx, apply.Params{
		Plan: p, Store: b.Store, Engine: b.Engine, Parser: b.Parser, ProjectDir: b.Dir,
		Clock: clockwork.NewFakeClockAt(now), Logger: quiet, Hooks: hooks, Lease: opts,
	})
}

// Scenario (seed 000, lock): the scheduler advanced the incumbent through
// 11:00 after the backfill. The deploy takes the leases of both models'
// served and new versions, and while it holds them a scheduler run at
// 12:00 defers both models, naming the deploy. The final catch-up fills
// 10:00-11:00 and the strict check passes: no gap, no debt. After the
// release, the scheduler runs the promoted versions again.
func TestPolicyLockDefersTheSchedulerAndPromotesWithNoGap(t *testing.T) {
	t.Parallel()
	onBoth(t, seedFiles(""), func(t *testing.T, b *executetest.Bundle) {
		p2 := seedRace(t, b, promotion.Policy{Name: promotion.Lock})
		clk := clockwork.NewFakeClockAt(at(2024, 1, 1, 11))
		hooks := advanceOnce(t, b, at(2024, 1, 1, 11))
		var deferred []string
		hooks.Locked = func(ctx context.Context) error {
			res, err := leasedRun(ctx, b, at(2024, 1, 1, 12), clk)
			if err != nil {
				return err
			}
			for _, m := range res.Models {
				if m.DeferredBy != "" {
					deferred = append(deferred, m.Model+" by "+m.DeferredBy)
				}
			}
			return nil
		}
		res, err := lockApply(b, p2, at(2024, 1, 1, 11), lease.Options{Clock: clk}, hooks)
		require.NoError(t, err)
		require.Equal(t, []string{"demo.parent by " + ownedBy("deploy p2")}, deferred, "the child waits for its parent")
		require.Equal(t, "lock", res.Policy)
		require.Empty(t, res.Debts)
		require.Equal(t, throughEleven, servedIntervals(t, b, "demo.parent"))
		require.Equal(t, throughEleven, servedIntervals(t, b, "demo.child"))

		_, err = leasedRun(b.Ctx, b, at(2024, 1, 1, 12), clk)
		require.NoError(t, err)
		require.Equal(t, "{[2024-01-01T00:00:00Z, 2024-01-01T12:00:00Z)}", servedIntervals(t, b, "demo.child"), "released")
		require.Equal(t, []string{"12 2532"}, b.Rows(t, "SELECT CAST(count(*) AS BIGINT), CAST(sum(w) AS BIGINT) FROM demo.child"))
	})
}

// Scenario: a scheduler is computing the parent (it holds the incumbent's
// lease) when the deploy wants its leases. The deploy waits for it, with a
// bound; the scheduler outlasts the bound, so the apply fails naming the
// lease and its holder, nothing is promoted, and the leases the deploy had
// already taken are released.
func TestPolicyLockWaitsForRunningWorkWithABound(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, false, seedFiles(""))
	p2 := seedRace(t, b, promotion.Policy{Name: promotion.Lock})
	served, _ := b.Served(t, plan.Prod)
	incParent := lease.VersionKey(state.VersionKey{Name: "demo.parent", Version: served["demo.parent"].Version})
	clk := clockwork.NewFakeClockAt(at(2024, 1, 1, 11))
	sched, err := lease.TryAcquire(b.Ctx, b.Store, incParent, lease.Options{Owner: "scheduler A", Clock: clk, TTL: time.Hour})
	require.NoError(t, err)

	errs := make(chan error, 1)
	go func() {
		_, err := lockApply(b, p2, at(2024, 1, 1, 11), lease.Options{Clock: clk, Wait: 2 * time.Second, Poll: time.Second}, apply.Hooks{})
		errs <- err
	}()
	for range 2 {
		require.NoError(t, clk.BlockUntilContext(b.Ctx, 1))
		clk.Advance(time.Second)
	}
	err = <-errs
	require.ErrorIs(t, err, lease.ErrWaitExceeded)
	require.Contains(t, err.Error(), "held by scheduler A")
	env, err := b.Store.GetEnvironment(b.Ctx, plan.Prod)
	require.NoError(t, err)
	require.Equal(t, "p1", env.PlanID)

	// Everything but the scheduler's lease is free again.
	keys := []string{lease.VersionKey(state.VersionKey{Name: "demo.child", Version: served["demo.child"].Version})}
	for _, s := range p2.Snapshots {
		keys = append(keys, lease.VersionKey(state.VersionKey{Name: s.Name, Version: s.Version}))
	}
	other, err := lease.AcquireAll(b.Ctx, b.Store, keys, lease.Options{Owner: "probe", Clock: clk, Wait: -1})
	require.NoError(t, err)
	require.NoError(t, other.Release(b.Ctx))
	require.NoError(t, sched.Release(b.Ctx))
}

// Scenario: a deploy crashed while holding its leases (they are never
// released). Scheduling of those versions is deferred until the leases
// expire; then the scheduler takes them over and resumes.
func TestCrashedDeploysLeasesExpireAndSchedulingResumes(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, false, seedFiles(""))
	p1 := b.Plan(t, "p1", plan.Prod, at(2024, 1, 1, 10), plan.Options{})
	_, err := policyApply(b, p1, at(2024, 1, 1, 10), nil, apply.Hooks{})
	require.NoError(t, err)
	served, _ := b.Served(t, plan.Prod)
	clk := clockwork.NewFakeClockAt(at(2024, 1, 1, 11))
	var keys []string
	for _, n := range []string{"demo.parent", "demo.child"} {
		keys = append(keys, lease.VersionKey(state.VersionKey{Name: n, Version: served[n].Version}))
	}
	_, err = lease.AcquireAll(b.Ctx, b.Store, keys, lease.Options{Owner: "deploy crashed", Clock: clk, TTL: 30 * time.Second})
	require.NoError(t, err)

	res, err := leasedRun(b.Ctx, b, at(2024, 1, 1, 11), clk)
	require.NoError(t, err)
	require.Equal(t, ownedBy("deploy crashed"), res.Models[0].DeferredBy)
	require.Equal(t, throughTen, servedIntervals(t, b, "demo.parent"))

	clk.Advance(31 * time.Second)
	_, err = leasedRun(b.Ctx, b, at(2024, 1, 1, 11), clk)
	require.NoError(t, err)
	require.Equal(t, throughEleven, servedIntervals(t, b, "demo.parent"))
	require.Equal(t, throughEleven, servedIntervals(t, b, "demo.child"))
}

// diamondFiles is a parent a with children b and c, hourly; k varies a's
// values and m varies b's.
func diamondFiles(k, m int) map[string]string {
	child := func(name string, mult int) string {
		return fmt.Sprintf(`MODEL (
  name %s,
  kind INCREMENTAL_BY_TIME_RANGE (time_column ts),
  cron '@hourly',
  start '2024-01-01'
);
SELECT a.ts AS ts, a.v * %d AS w FROM demo.a AS a WHERE a.ts BETWEEN @start_ts AND @end_ts`, name, mult)
	}
	return map[string]string{
		"models/a.sql": raceModel("demo.a", "", fmt.Sprintf("%s + %d", hourExpr, k)),
		"models/b.sql": child("demo.b", m),
		"models/c.sql": child("demo.c", 3),
	}
}

// Scenario (deadlock freedom): round after round, two deploys under the
// lock policy race for prod with overlapping DAGs: one changes the parent
// a (it locks a, b and c), the other changes the child b (it locks b). They
// start in a random order, and the scheduler has advanced the incumbents
// before they promote. Every round ends with no lease wait exceeded (no
// deadlock), exactly one promotion (the generation moves by one), the
// other deploy refused as a conflicting plan, no debt, and every lease
// released.
func TestPolicyLockTwoDeploysNeverDeadlock(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, false, diamondFiles(0, 2))
	p0 := b.Plan(t, "p0", plan.Prod, at(2024, 1, 1, 4), plan.Options{})
	_, err := policyApply(b, p0, at(2024, 1, 1, 4), nil, apply.Hooks{})
	require.NoError(t, err)
	r := rand.New(rand.NewPCG(1, 2))
	lock := promotion.Policy{Name: promotion.Lock}
	for round := 1; round <= 6; round++ {
		exec := at(2024, 1, 1, 4+round)
		env, err := b.Store.GetEnvironment(b.Ctx, plan.Prod)
		require.NoError(t, err)
		executetest.WriteFiles(t, b.Dir, diamondFiles(100*round, 2))
		pa := b.Plan(t, fmt.Sprintf("a%d", round), plan.Prod, exec.Add(-time.Hour), plan.Options{Policy: lock})
		executetest.WriteFiles(t, b.Dir, diamondFiles(100*(round-1), 2+round))
		pb := b.Plan(t, fmt.Sprintf("b%d", round), plan.Prod, exec.Add(-time.Hour), plan.Options{Policy: lock})
		runAt(t, b.Ctx, b, exec)

		plans := []*plan.Plan{pa, pb}
		r.Shuffle(2, func(i, j int) { plans[i], plans[j] = plans[j], plans[i] })
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, p := range plans {
			wg.Go(func() {
				_, errs[i] = lockApply(b, p, exec, lease.Options{Wait: time.Minute, Poll: time.Millisecond}, apply.Hooks{})
			})
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			require.NotErrorIs(t, err, lease.ErrWaitExceeded, "round %d", round)
			if err == nil {
				won++
			} else {
				require.ErrorIs(t, err, state.ErrConflictingPlan, "round %d", round)
			}
		}
		require.Equal(t, 1, won, "round %d", round)
		after, err := b.Store.GetEnvironment(b.Ctx, plan.Prod)
		require.NoError(t, err)
		require.Equal(t, env.Generation+1, after.Generation, "round %d", round)
		// The winner's files are the project now: the loser is replanned
		// next round against it.
		if after.PlanID == pa.ID {
			executetest.WriteFiles(t, b.Dir, diamondFiles(100*round, 2))
		}
		debts, err := b.Store.ListDebts(b.Ctx, state.DebtFilter{OpenOnly: true})
		require.NoError(t, err)
		require.Empty(t, debts, "round %d", round)
		for _, s := range append(pa.Snapshots, pb.Snapshots...) {
			probe, err := lease.TryAcquire(b.Ctx, b.Store, lease.VersionKey(state.VersionKey{Name: s.Name, Version: s.Version}), lease.Options{Owner: "probe"})
			require.NoError(t, err, "round %d: %s released", round, s.Name)
			require.NoError(t, probe.Release(b.Ctx))
		}
	}
}

// Scenario: a lock-policy deploy is cancelled (SIGINT cancels the CLI's
// context) while it holds its leases. The apply fails with the
// cancellation, nothing is promoted, and every lease it held is released at
// once: a scheduler can take each of them without waiting for expiry.
func TestPolicyLockReleasesItsLeasesOnCancellation(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, false, seedFiles(""))
	p2 := seedRace(t, b, promotion.Policy{Name: promotion.Lock})
	clk := clockwork.NewFakeClockAt(at(2024, 1, 1, 11))
	ctx, cancel := context.WithCancel(b.Ctx)
	var held []string
	_, err := apply.Apply(ctx, apply.Params{
		Plan: p2, Store: b.Store, Engine: b.Engine, Parser: b.Parser, ProjectDir: b.Dir,
		Clock: clockwork.NewFakeClockAt(at(2024, 1, 1, 11)), Logger: quiet, Lease: lease.Options{Clock: clk, TTL: time.Hour},
		Hooks: apply.Hooks{Locked: func(ctx context.Context) error {
			for _, s := range p2.Snapshots {
				k := lease.VersionKey(state.VersionKey{Name: s.Name, Version: s.Version})
				l, err := b.Store.GetLease(ctx, k)
				if err != nil {
					return err
				}
				held = append(held, l.Owner)
			}
			cancel()
			return ctx.Err()
		}},
	})
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, []string{"deploy p2", "deploy p2"}, held, "held while locked")
	env, err := b.Store.GetEnvironment(b.Ctx, plan.Prod)
	require.NoError(t, err)
	require.Equal(t, "p1", env.PlanID)
	for _, s := range p2.Snapshots {
		probe, err := lease.TryAcquire(b.Ctx, b.Store, lease.VersionKey(state.VersionKey{Name: s.Name, Version: s.Version}),
			lease.Options{Owner: "scheduler", Clock: clk})
		require.NoError(t, err, "%s released on cancellation", s.Name)
		require.NoError(t, probe.Release(b.Ctx))
	}
}
