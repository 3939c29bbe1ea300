package multiproc

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/lease"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/postgres"
)

// Scenario: a daemon is killed with SIGKILL in the middle of a batch and
// nothing is lost or doubled. prod serves shop.slow, whose hourly batch
// inserts its four rows one by one over about two seconds, deployed an hour
// behind the clock. Daemon A starts and logs "batch started" for the hour
// now due; it is SIGKILLed at once. Right after the kill, state does not
// record the hour, the served view shows none of its rows, and the
// version's lease still names A (owner, host, PID) with half a minute to
// run. Daemon B, started after the kill on the same host, finds A gone
// and takes the lease over at once (a compare-and-swap on A's token),
// saying so, and completes the hour long before A's lease would have
// expired. All along, the view shows the hour either not at all or whole;
// at the end it holds each row exactly once, and the interval was
// recorded once, by B.
func TestDaemonKilledMidBatch(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := deploySlowBehind(t)
	p, st, wh, env, first, start, deployed, slow, slowLease := d.p, d.st, d.wh, d.env, d.first, d.start, d.deployed, d.slow, d.slowLease

	a := p.start(t, "daemon-a", "scheduler", "prod", "--tick", "200ms", "--lease-ttl", "30s")
	began := a.waitLog(t, "batch started for shop.slow", func(r record) bool {
		return r.msg == execute.MsgBatchStarted && r.str("model") == "shop.slow"
	})
	a.kill(t)
	killed := parseRange(t, began.str("interval"))
	require.Equal(t, interval.NewRange(deployed, deployed.Add(time.Hour)), killed)

	got, err := st.GetIntervals(ctx, []state.VersionKey{slow})
	require.NoError(t, err)
	require.True(t, got[slow].IntersectRange(killed).IsEmpty(), "the killed batch's interval is recorded: %s", got[slow])
	require.Zero(t, rowsIn(ctx, t, wh, killed), "the killed batch's rows are visible")
	held := requireHeldBy(ctx, t, st, slowLease, "scheduler", a)
	expiry := held.ExpiresAt

	b := p.start(t, "daemon-b", "scheduler", "prod", "--tick", "200ms", "--lease-ttl", "30s")
	require.Eventually(t, func() bool {
		// The hour is never visible in part: all four rows, or none.
		n := rowsIn(ctx, t, wh, killed)
		require.True(t, n == 0 || n == 4, "the view shows %d rows of the killed hour", n)
		return caughtUp(ctx, t, st, start)
	}, waitSignal, pollTick, "daemon B did not complete the killed batch:\n%s", b.stderrText())
	b.stop(t)
	requireTookOver(t, b, slowLease, held, a)

	execs := executions(t, first, a, b)
	t.Logf("%s; A's lease would have expired at %s", summary(execs), expiry.Format("15:04:05.000"))
	requireNoConcurrentExecutions(t, execs)
	requireRecordedOnce(ctx, t, st, execs, true)
	var redone []execution
	for _, e := range execs {
		if e.key == slow && e.rng == killed {
			redone = append(redone, e)
		}
	}
	require.Len(t, redone, 2, "the killed batch and its completion: %v", redone)
	require.Equal(t, "daemon-a", redone[0].proc)
	require.True(t, redone[0].open && !redone[0].committed)
	require.Equal(t, "daemon-b", redone[1].proc)
	require.True(t, redone[1].committed)
	require.True(t, redone[1].end.Before(expiry), "B completed the batch at %s, not before A's lease expired at %s", redone[1].end, expiry)

	requireRowsOnce(ctx, t, st, wh, env)
	require.Equal(t, int64(4), rowsIn(ctx, t, wh, killed))
}

// Scenario: `gapless run` is SIGKILLed in the middle of a batch, and the
// next `gapless run` does the work at once instead of deferring it for the
// lease's TTL. prod serves shop.slow (about two seconds a batch) and its
// downstream shop.hourly, deployed an hour behind the clock. Run A logs
// "batch started" for shop.slow's due hour and is killed; the version's
// lease still names run A (host, PID) for half a minute more, and state
// records nothing of the hour. Run B, on the same host, takes the lease
// over at once, saying whose it was, computes the hour of both models and
// exits 0 without deferring anything, all before A's lease would have
// expired; every row is there once.
func TestRunKilledMidBatchNextRunTakesOver(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := deploySlowBehind(t)
	p, st, wh, env, first, hour, start, deployed, slow, slowLease := d.p, d.st, d.wh, d.env, d.first, d.hour, d.start, d.deployed, d.slow, d.slowLease
	exec := hour.Format(time.RFC3339)

	a := p.start(t, "run-a", "run", "--execution-time", exec)
	began := a.waitLog(t, "batch started for shop.slow", func(r record) bool {
		return r.msg == execute.MsgBatchStarted && r.str("model") == "shop.slow"
	})
	a.kill(t)
	killed := parseRange(t, began.str("interval"))
	require.Equal(t, interval.NewRange(deployed, hour), killed)
	got, err := st.GetIntervals(ctx, []state.VersionKey{slow})
	require.NoError(t, err)
	require.True(t, got[slow].IntersectRange(killed).IsEmpty(), "the killed batch's interval is recorded: %s", got[slow])
	held := requireHeldBy(ctx, t, st, slowLease, "run", a)

	b := p.run(t, "run-b", "run", "--execution-time", exec)
	out := b.Stdout()
	require.NotContains(t, out, "deferred", "run B deferred work whose lease a killed run held")
	requireTookOver(t, b, slowLease, held, a)
	require.True(t, b.ended.Before(held.ExpiresAt), "run B ended at %s, not before A's lease expired at %s", b.ended, held.ExpiresAt)
	require.True(t, caughtUp(ctx, t, st, start), "run B did not compute the killed hour:\n%s", b.stderrText())

	execs := executions(t, first, a, b)
	requireNoConcurrentExecutions(t, execs)
	requireRecordedOnce(ctx, t, st, execs, true)
	requireRowsOnce(ctx, t, st, wh, env)
	require.Equal(t, int64(4), rowsIn(ctx, t, wh, killed))
	_, err = st.GetLease(ctx, slowLease)
	require.ErrorIs(t, err, state.ErrNotFound, "run B released the lease it took over")
}

// Scenario: a deploy under the lock policy is SIGKILLed while it holds its
// version leases, and scheduling resumes at once. prod serves shop.slow
// (about two seconds a batch) and its downstream shop.hourly, deployed
// three hours behind the clock; a breaking change to shop.slow is planned
// (`plan --out`), then `run` advances the incumbent by one hour, so the
// deploy has a catch-up to do after it takes its leases. The deploy
// (`apply --on-incumbent-advance lock --lease-ttl 30s`) logs that it took
// its leases; state shows them owned by "deploy <plan id>" and its process
// (the served and the planned version of both models); it is killed during
// its slow catch-up, before promoting. Two daemons on the same host then
// find the served versions leased by a process that no longer runs: they
// take the leases over (each key exactly once, by one of them) instead of
// waiting half a minute for them to expire, run the two hours due, and
// prod, still at its old generation, catches up before the deploy's leases
// would have expired.
func TestDeployKilledHoldingLocks(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	hour := time.Now().UTC().Truncate(time.Hour)
	start, deployed := hour.Add(-4*time.Hour), hour.Add(-3*time.Hour)
	p := newProject(t, "slow", start)
	procs := []*proc{p.run(t, "first-deploy", "plan", "--auto-apply", "--execution-time", deployed.Format(time.RFC3339))}
	p.edit(t, "models/slow.sql", "1.5 AS amount", "2.5 AS amount")
	procs = append(procs,
		p.run(t, "plan", "plan", "prod", "--out", "p.json", "--execution-time", deployed.Format(time.RFC3339)),
		p.run(t, "run", "run", "--execution-time", deployed.Add(time.Hour).Format(time.RFC3339)))
	st := p.openStore(t)
	wh := p.warehouse(t)
	before, err := st.GetEnvironment(ctx, "prod")
	require.NoError(t, err)
	served := []state.VersionKey{refOf(t, before, "shop.slow").VersionKey(), refOf(t, before, "shop.hourly").VersionKey()}

	deploy := p.start(t, "deploy", "apply", "p.json", "--on-incumbent-advance", "lock", "--lease-ttl", "30s", "--lease-wait", "20s")
	locked := deploy.waitLog(t, "lock policy: leases taken", func(r record) bool { return r.msg == "lock policy: leases taken" })
	owner := "deploy " + locked.str(logkey.Plan)
	for _, k := range served {
		l := requireHeldBy(ctx, t, st, lease.VersionKey(k), owner, deploy)
		require.LessOrEqual(t, time.Until(l.ExpiresAt), 30*time.Second, "the deploy's leases live --lease-ttl")
	}
	deploy.kill(t)
	// The leases as the dead deploy left them: their expiry is final.
	held := map[state.VersionKey]state.Lease{}
	for _, k := range served {
		held[k] = requireHeldBy(ctx, t, st, lease.VersionKey(k), owner, deploy)
	}
	frozen, err := st.GetIntervals(ctx, served)
	require.NoError(t, err)
	require.True(t, frozen[served[0]].Equal(interval.NewSet(interval.NewRange(start, deployed.Add(time.Hour)))), "%s", frozen[served[0]])

	a := p.start(t, "daemon-a", "scheduler", "prod", "--tick", "200ms", "--lease-ttl", "2s")
	b := p.start(t, "daemon-b", "scheduler", "prod", "--tick", "200ms", "--lease-ttl", "2s")
	procs = append(procs, deploy, a, b)
	require.Eventually(t, func() bool { return caughtUp(ctx, t, st, start) }, waitSignal, pollTick,
		"scheduling did not resume after the deploy was killed:\n%s\n%s", a.stderrText(), b.stderrText())
	a.stop(t)
	b.stop(t)

	after, err := st.GetEnvironment(ctx, "prod")
	require.NoError(t, err)
	require.Equal(t, before.Generation, after.Generation, "the killed deploy promoted nothing")
	for _, k := range served {
		var takers []string
		for _, d := range []*proc{a, b} {
			for _, r := range d.Records() {
				if r.msg == "took over a lease whose holder no longer runs" && r.str("lease") == lease.VersionKey(k) {
					require.Equal(t, float64(deploy.pid), r.attrs["holder_pid"])
					takers = append(takers, d.name)
				}
			}
		}
		require.Len(t, takers, 1, "%s was taken over from the dead deploy %d times: %v", lease.VersionKey(k), len(takers), takers)
	}
	execs := executions(t, procs...)
	t.Logf("%s; the deploy's leases would have expired at %s", summary(execs), held[served[0]].ExpiresAt.Format("15:04:05.000"))
	requireNoConcurrentExecutions(t, execs)
	// The deploy was killed: it may have recorded a batch it did not log.
	requireRecordedOnce(ctx, t, st, execs, false)
	resumed := 0
	for _, e := range execs {
		if e.proc != "daemon-a" && e.proc != "daemon-b" {
			continue
		}
		l, leased := held[e.key]
		require.True(t, leased, "a daemon ran %s, which prod does not serve", e)
		require.True(t, e.end.Before(l.ExpiresAt), "%s ended after the deploy's lease expired at %s: it waited instead of taking over", e, l.ExpiresAt)
		resumed++
	}
	require.Positive(t, resumed)
	requireRowsOnce(ctx, t, st, wh, after)
}

// requireHeldBy reads key's lease and requires it held by owner from pr's
// process on this host, unexpired.
func requireHeldBy(ctx context.Context, t *testing.T, st state.Store, key, owner string, pr *proc) state.Lease {
	t.Helper()
	l, err := st.GetLease(ctx, key)
	require.NoError(t, err)
	require.Equal(t, owner, l.Owner, "%s", key)
	require.Equal(t, lease.Self().Host, l.Holder.Host, "%s", key)
	require.Equal(t, pr.pid, l.Holder.PID, "%s is held by pid %d, not by %s (pid %d)", key, l.Holder.PID, pr.name, pr.pid)
	require.True(t, time.Now().Before(l.ExpiresAt), "%s already expired at %s", key, l.ExpiresAt)
	return l
}

// requireTookOver requires that pr logged taking over key from the dead
// process dead, whose lease was held.
func requireTookOver(t *testing.T, pr *proc, key string, held state.Lease, dead *proc) {
	t.Helper()
	for _, r := range pr.Records() {
		if r.msg != "took over a lease whose holder no longer runs" || r.str("lease") != key {
			continue
		}
		require.Equal(t, "WARN", r.level)
		require.Equal(t, float64(dead.pid), r.attrs["holder_pid"])
		require.Equal(t, held.Holder.Host, r.str("holder_host"))
		require.Equal(t, lease.Describe(held), r.str("holder"))
		return
	}
	require.Fail(t, "no takeover", "%s did not take over %s from %s (pid %d):\n%s", pr.name, key, dead.name, dead.pid, pr.stderrText())
}

// refOf is the snapshot env serves for name.
func refOf(t *testing.T, env *state.Environment, name string) state.SnapshotRef {
	t.Helper()
	for _, r := range env.Snapshots {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("prod serves no %s", name)
	return state.SnapshotRef{}
}

// rowsIn counts the rows shop.slow's served view shows in r.
func rowsIn(ctx context.Context, t *testing.T, wh *servedDB, r interval.Range) int64 {
	t.Helper()
	var n int64
	require.NoError(t, wh.db.QueryRowContext(ctx, "SELECT count(*) FROM "+wh.name("shop.slow")+" WHERE event_ts >= "+wh.param(1)+" AND event_ts < "+wh.param(2), r.Start, r.End).Scan(&n))
	return n
}

// slowDeployment is prod of the "slow" fixture deployed an hour behind the
// clock: what the kill scenarios start from.
type slowDeployment struct {
	p           *project
	st          *postgres.Store
	wh          *servedDB
	env         *state.Environment
	first       *proc
	hour, start time.Time
	deployed    time.Time
	slow        state.VersionKey
	slowLease   string
}

// deploySlowBehind deploys the "slow" fixture's prod through the hour before
// the current one (two hours of history), and names shop.slow's version and
// its lease.
func deploySlowBehind(t *testing.T) slowDeployment {
	t.Helper()
	d := slowDeployment{hour: time.Now().UTC().Truncate(time.Hour)}
	d.start = d.hour.Add(-2 * time.Hour)
	d.deployed = d.hour.Add(-time.Hour)
	d.p = newProject(t, "slow", d.start)
	d.first = d.p.run(t, "first-deploy", "plan", "--auto-apply", "--execution-time", d.deployed.Format(time.RFC3339))
	d.st = d.p.openStore(t)
	d.wh = d.p.warehouse(t)
	var err error
	d.env, err = d.st.GetEnvironment(t.Context(), "prod")
	require.NoError(t, err)
	d.slow = refOf(t, d.env, "shop.slow").VersionKey()
	d.slowLease = lease.VersionKey(d.slow)
	return d
}
