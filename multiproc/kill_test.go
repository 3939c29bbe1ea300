package multiproc

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/lease"
	"github.com/gapless-dev/gapless/state"
)

// Scenario: a daemon is killed with SIGKILL in the middle of a batch and
// nothing is lost or doubled. prod serves shop.slow, whose hourly batch
// inserts its four rows one by one over about two seconds, deployed an hour
// behind the clock. Daemon A starts and logs "batch started" for the hour
// now due; it is SIGKILLed at once. Right after the kill, state does not
// record the hour and the served view shows none of its rows. A's lease on
// the version stays until it expires: daemon B, started after the kill,
// defers the model while A's lease is unexpired (when it ticks before the
// expiry), then takes it over and completes the hour. All along, the view
// shows the hour either not at all or whole; at the end it holds each row
// exactly once, and the interval was recorded once, by B, after A's lease
// expired.
func TestDaemonKilledMidBatch(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	hour := time.Now().UTC().Truncate(time.Hour)
	start, deployed := hour.Add(-2*time.Hour), hour.Add(-time.Hour)
	p := newProject(t, "slow", start)
	first := p.run(t, "first-deploy", "plan", "--auto-apply", "--execution-time", deployed.Format(time.RFC3339))
	st := p.openStore(t)
	wh := p.warehouse(t)
	env, err := st.GetEnvironment(ctx, "prod")
	require.NoError(t, err)
	slow := refOf(t, env, "shop.slow").VersionKey()
	slowLease := lease.VersionKey(slow)

	a := p.start(t, "daemon-a", "scheduler", "prod", "--tick", "200ms", "--lease-ttl", "3s")
	began := a.waitLog(t, "batch started for shop.slow", func(r record) bool {
		return r.msg == "batch started" && r.str("model") == "shop.slow"
	})
	a.kill(t)
	killed := parseRange(t, began.str("interval"))
	require.Equal(t, interval.NewRange(deployed, deployed.Add(time.Hour)), killed)

	got, err := st.GetIntervals(ctx, []state.VersionKey{slow})
	require.NoError(t, err)
	require.True(t, got[slow].IntersectRange(killed).IsEmpty(), "the killed batch's interval is recorded: %s", got[slow])
	require.Zero(t, rowsIn(ctx, t, wh, killed), "the killed batch's rows are visible")
	held, err := st.GetLease(ctx, slowLease)
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(held.Owner, fmt.Sprintf("/%d", a.pid)), "the lease is held by %s, not by daemon A (pid %d)", held.Owner, a.pid)
	expiry := held.ExpiresAt

	b := p.start(t, "daemon-b", "scheduler", "prod", "--tick", "200ms", "--lease-ttl", "3s")
	require.Eventually(t, func() bool {
		// The hour is never visible in part: all four rows, or none.
		n := rowsIn(ctx, t, wh, killed)
		require.True(t, n == 0 || n == 4, "the view shows %d rows of the killed hour", n)
		return caughtUp(ctx, t, st, start)
	}, waitSignal, pollTick, "daemon B did not complete the killed batch:\n%s", b.stderrText())
	b.stop(t)

	execs := executions(t, first, a, b)
	t.Logf("%s; A's lease expired at %s", summary(execs), expiry.Format("15:04:05.000"))
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
	require.False(t, redone[1].start.Before(expiry), "B started the batch at %s, before A's lease expired at %s", redone[1].start, expiry)
	requireDeferredWhileLeased(t, b, expiry, held.Owner, "shop.slow")

	requireRowsOnce(ctx, t, st, wh, env)
	require.Equal(t, int64(4), rowsIn(ctx, t, wh, killed))
}

// Scenario: a deploy under the lock policy is SIGKILLed while it holds its
// version leases, and scheduling resumes once they expire. prod serves
// shop.slow (about two seconds a batch) and its downstream shop.hourly,
// deployed three hours behind the clock; a breaking change to shop.slow is
// planned (`plan --out`), then `run` advances the incumbent by one hour, so
// the deploy has a catch-up to do after it takes its leases. The deploy
// (`apply --on-incumbent-advance lock --lease-ttl 4s`) logs that it took its
// leases; state shows them owned by "deploy <plan id>" (the served and the
// planned version of both models); it is killed during its slow catch-up,
// before promoting. Two daemons then find the served versions leased by
// the dead deploy: they defer them while the leases are unexpired and
// record nothing for them; once the leases expire they run the two hours
// due, and prod, still at its old generation, catches up.
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

	deploy := p.start(t, "deploy", "apply", "p.json", "--on-incumbent-advance", "lock", "--lease-ttl", "4s", "--lease-wait", "20s")
	locked := deploy.waitLog(t, "lock policy: leases taken", func(r record) bool { return r.msg == "lock policy: leases taken" })
	owner := "deploy " + locked.str("plan_id")
	for _, k := range served {
		l, err := st.GetLease(ctx, lease.VersionKey(k))
		require.NoError(t, err)
		require.Equal(t, owner, l.Owner, "%s", lease.VersionKey(k))
		require.LessOrEqual(t, time.Until(l.ExpiresAt), 4*time.Second, "the deploy's leases live --lease-ttl")
	}
	deploy.kill(t)
	// The leases as the dead deploy left them: their expiry is final.
	expiry := map[state.VersionKey]time.Time{}
	for _, k := range served {
		l, err := st.GetLease(ctx, lease.VersionKey(k))
		require.NoError(t, err)
		require.Equal(t, owner, l.Owner)
		expiry[k] = l.ExpiresAt
	}
	frozen, err := st.GetIntervals(ctx, served)
	require.NoError(t, err)
	require.True(t, frozen[served[0]].Equal(interval.NewSet(interval.NewRange(start, deployed.Add(time.Hour)))), "%s", frozen[served[0]])

	a := p.start(t, "daemon-a", "scheduler", "prod", "--tick", "200ms", "--lease-ttl", "2s")
	b := p.start(t, "daemon-b", "scheduler", "prod", "--tick", "200ms", "--lease-ttl", "2s")
	procs = append(procs, deploy, a, b)
	require.Eventually(t, func() bool { return caughtUp(ctx, t, st, start) }, waitSignal, pollTick,
		"scheduling did not resume after the deploy's leases expired:\n%s\n%s", a.stderrText(), b.stderrText())
	a.stop(t)
	b.stop(t)

	after, err := st.GetEnvironment(ctx, "prod")
	require.NoError(t, err)
	require.Equal(t, before.Generation, after.Generation, "the killed deploy promoted nothing")
	execs := executions(t, procs...)
	t.Logf("%s; the deploy's leases expired at %v", summary(execs), expiry)
	requireNoConcurrentExecutions(t, execs)
	// The deploy was killed: it may have recorded a batch it did not log.
	requireRecordedOnce(ctx, t, st, execs, false)
	resumed := 0
	for _, e := range execs {
		if e.proc != "daemon-a" && e.proc != "daemon-b" {
			continue
		}
		exp, leased := expiry[e.key]
		require.True(t, leased, "a daemon ran %s, which prod does not serve", e)
		require.False(t, e.start.Before(exp), "%s started before the deploy's lease expired at %s", e, exp)
		resumed++
	}
	require.Positive(t, resumed)
	for _, d := range []*proc{a, b} {
		requireDeferredWhileLeased(t, d, expiry[served[0]], owner, "shop.slow")
	}
	requireRowsOnce(ctx, t, st, wh, after)
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
func rowsIn(ctx context.Context, t *testing.T, wh *pgxpool.Pool, r interval.Range) int64 {
	t.Helper()
	var n int64
	require.NoError(t, wh.QueryRow(ctx, "SELECT count(*) FROM shop.slow WHERE event_ts >= $1 AND event_ts < $2", r.Start, r.End).Scan(&n))
	return n
}

// requireDeferredWhileLeased: if daemon d finished a tick before expiry,
// it deferred model, naming holder as the lease's owner (a daemon that
// first ticked after the expiry had nothing to defer).
func requireDeferredWhileLeased(t *testing.T, d *proc, expiry time.Time, holder, model string) {
	t.Helper()
	var tickedBefore bool
	for _, r := range d.Records() {
		if r.msg == "scheduler tick" && r.time.Before(expiry) {
			tickedBefore = true
		}
	}
	if !tickedBefore {
		t.Logf("%s first ticked after the lease expired: no deferral to check", d.name)
		return
	}
	for _, r := range d.Records() {
		if r.msg == "deferred: the version is leased" && r.str("model") == model && r.str("holder") == holder {
			require.True(t, r.time.Before(expiry.Add(time.Second)), "%s deferred %s at %s, after the lease expired at %s", d.name, model, r.time, expiry)
			return
		}
	}
	require.Fail(t, "no deferral", "%s ticked while %s held %s's lease and did not defer it:\n%s", d.name, holder, model, d.stderrText())
}
