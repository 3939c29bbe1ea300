package multiproc

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/state"
)

// Scenario: under each of the five promotion policies, a deploy races two
// live scheduler daemons (real processes, PostgreSQL state and warehouse).
// prod is deployed an hour behind the clock, then a breaking change to
// shop.events is planned against it (`plan --out`); both daemons start
// (before the deploy, or in the middle of its backfill) and advance the
// incumbent by the hour now due while `apply --on-incumbent-advance POLICY`
// builds the new version and promotes it. Whether the daemons' advance
// lands before or after the promotion is up to the race; the invariants
// hold either way:
//   - no interval is run twice at once: every batch every process ran
//     (from its "batch started" and "batch committed" log records, with
//     times) is disjoint in time from every other batch of an overlapping
//     interval of the same model version;
//   - no interval of a version is recorded twice, and the committed
//     batches are exactly what state records;
//   - no gap is served beyond the policy: sampled all along the race, and
//     once more at the end, every part of the incumbent's span the served
//     version lacks, in state and in the served view, is open freshness
//     debt; only trailing-gap has any debt, bounded by one advance;
//   - in the end the daemons caught prod up, the debts are repaired, and
//     every view holds each row exactly once.
//
// catch-up, replan and lock always promote; trailing-gap(1) does unless the
// clock crossed an hour (two advances); strict may refuse.
func TestDeployRacesTwoDaemons(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		policy string
		args   []string
	}{
		{"strict", nil},
		{"trailing-gap", []string{"--max-trailing-gap-intervals", "1"}},
		{"catch-up", nil},
		{"replan", nil},
		{"lock", nil},
	} {
		for _, late := range []bool{false, true} {
			name := tc.policy + "/daemons-first"
			if late {
				name = tc.policy + "/daemons-mid-backfill"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				raceDeploy(t, func(t *testing.T, start time.Time) *project { return newProject(t, "race", start) }, tc.policy, tc.args, late)
			})
		}
	}
}

// Scenario: TestDeployRacesTwoDaemons's race on a Trino warehouse (an empty
// test catalog of the coordinator-and-worker cluster, the race fixture's
// models in Trino's dialect) with PostgreSQL state, for three policies
// with the daemons started before the deploy: strict (which may refuse),
// lock and catch-up (which promote). The same invariants hold: no interval
// run twice at once nor recorded twice, no gap served beyond the policy
// (sampled in state and in the Trino views all along), and in the end the
// daemons caught prod up with every row once. Trino promotes one view at
// a time, which the served-gap check samples too.
func TestDeployRacesTwoDaemonsOnTrino(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{"strict", "lock", "catch-up"} {
		t.Run(policy+"/daemons-first", func(t *testing.T) {
			t.Parallel()
			raceDeploy(t, func(t *testing.T, start time.Time) *project { return newTrinoProject(t, "race-trino", start) }, policy, nil, false)
		})
	}
}

// raceDeploy is one run of TestDeployRacesTwoDaemons, on the race fixture
// newRace copies (with every model starting at start). The daemons start
// before the deploy, or (late) once the deploy has started its last batch of
// shop.events: then the daemons' first batch of the incumbent and the
// deploy's promotion land at about the same time, either way round.
func raceDeploy(t *testing.T, newRace func(t *testing.T, start time.Time) *project, policy string, extra []string, late bool) {
	ctx := t.Context()
	hour := time.Now().UTC().Truncate(time.Hour)
	start, planned := hour.Add(-3*time.Hour), hour.Add(-time.Hour)
	p := newRace(t, start)
	procs := []*proc{p.run(t, "first-deploy", "plan", "--auto-apply", "--execution-time", planned.Format(time.RFC3339))}
	st := p.openStore(t)
	wh := p.warehouse(t)
	before, err := st.GetEnvironment(ctx, "prod")
	require.NoError(t, err)
	incumbents := map[string]state.SnapshotRef{}
	for _, r := range before.Snapshots {
		incumbents[r.Name] = r
	}

	p.edit(t, "models/events.sql", "1.5 AS amount", "2.5 AS amount")
	procs = append(procs, p.run(t, "plan", "plan", "prod", "--out", "p.json", "--execution-time", planned.Format(time.RFC3339)))

	check := &gapCheck{st: st, wh: wh, incumbents: incumbents}
	stopMonitor := check.monitor(ctx)
	daemons := func() (*proc, *proc) {
		return p.start(t, "daemon-a", "scheduler", "prod", "--tick", "200ms", "--lease-ttl", "2s", "--grace", "20s"),
			p.start(t, "daemon-b", "scheduler", "prod", "--tick", "200ms", "--lease-ttl", "2s", "--grace", "20s")
	}
	var a, b *proc
	if !late {
		a, b = daemons()
	}
	args := append([]string{"apply", "p.json", "--on-incumbent-advance", policy, "--lease-ttl", "3s", "--lease-wait", "30s"}, extra...)
	deploy := p.start(t, "deploy", args...)
	if late {
		last := interval.NewRange(planned.Add(-time.Hour), planned).String()
		deploy.waitLog(t, "its last batch of shop.events", func(r record) bool {
			return r.msg == execute.MsgBatchStarted && r.str("model") == "shop.events" && r.str("interval") == last
		})
		a, b = daemons()
	}
	procs = append(procs, a, b, deploy)
	code := deploy.wait(t)
	t.Logf("apply under %s exited %d:\n%s", policy, code, deploy.Stdout())
	crossedHour := !time.Now().UTC().Truncate(time.Hour).Equal(hour)
	switch {
	case policy == "strict":
		if code != 0 {
			require.Contains(t, deploy.stderrText(), "was not promoted")
		}
	case policy == "trailing-gap" && crossedHour:
	default:
		require.Equal(t, 0, code, "apply under %s must promote:\n%s", policy, deploy.stderrText())
	}

	// The daemons catch prod up (whatever it serves now) and repair any
	// accepted gap.
	require.Eventually(t, func() bool { return caughtUp(ctx, t, st, start) }, waitSignal, pollTick,
		"the daemons did not catch prod up:\n%s\n%s", a.stderrText(), b.stderrText())
	violations, samples, withGap, err := stopMonitor()
	require.NoError(t, err)
	require.Empty(t, violations, "a gap was served beyond the policy")
	a.stop(t)
	b.stop(t)

	execs := executions(t, procs...)
	t.Logf("%s; the served-gap check took %d samples, %d of them with an accepted gap", summary(execs), samples, withGap)
	requireNoConcurrentExecutions(t, execs)
	requireRecordedOnce(ctx, t, st, execs, true)

	violations, _, err = check.sample(ctx)
	require.NoError(t, err)
	require.Empty(t, violations)
	debts, err := st.ListDebts(ctx, state.DebtFilter{})
	require.NoError(t, err)
	if policy != "trailing-gap" {
		require.Empty(t, debts, "only trailing-gap accepts a gap")
	}
	for _, d := range debts {
		require.Equal(t, 1, d.Bound)
		require.LessOrEqual(t, d.Advances, 1)
		require.False(t, d.Open(), "debt %+v is still open after the daemons caught up", d)
	}

	after, err := st.GetEnvironment(ctx, "prod")
	require.NoError(t, err)
	if code == 0 {
		require.Greater(t, after.Generation, before.Generation)
		require.NotEqual(t, incumbents["shop.events"].Version, servedVersion(after, "shop.events"))
	} else {
		require.Equal(t, before.Generation, after.Generation, "a refused deploy promotes nothing")
	}
	requireRowsOnce(ctx, t, st, wh, after)
}

// caughtUp reports whether every model prod serves covers [start, the last
// hour boundary) and no debt is open.
func caughtUp(ctx context.Context, t *testing.T, st state.Store, start time.Time) bool {
	env, err := st.GetEnvironment(ctx, "prod")
	require.NoError(t, err)
	var keys []state.VersionKey
	for _, r := range env.Snapshots {
		keys = append(keys, r.VersionKey())
	}
	got, err := st.GetIntervals(ctx, keys)
	require.NoError(t, err)
	want := interval.NewRange(start, time.Now().UTC().Truncate(time.Hour))
	for _, k := range keys {
		if !got[k].Covers(want) {
			return false
		}
	}
	debts, err := st.ListDebts(ctx, state.DebtFilter{Environment: "prod", OpenOnly: true})
	require.NoError(t, err)
	return len(debts) == 0
}

func servedVersion(env *state.Environment, name string) string {
	for _, r := range env.Snapshots {
		if r.Name == name {
			return r.Version
		}
	}
	return ""
}

// requireRowsOnce: every view env serves holds exactly the rows of the
// hours its version covers in state, each once: four distinct rows an hour
// for the row-generating models, one row of four events an hour for
// shop.hourly.
func requireRowsOnce(ctx context.Context, t *testing.T, st state.Store, wh *servedDB, env *state.Environment) {
	t.Helper()
	var keys []state.VersionKey
	for _, r := range env.Snapshots {
		keys = append(keys, r.VersionKey())
	}
	got, err := st.GetIntervals(ctx, keys)
	require.NoError(t, err)
	for _, r := range env.Snapshots {
		hours := int64(got[r.VersionKey()].Buckets("hour"))
		require.Positive(t, hours)
		col := timeColumns[r.Name]
		var n, distinct int64
		require.NoError(t, wh.db.QueryRowContext(ctx, "SELECT count(*), count(DISTINCT "+col+") FROM "+wh.name(r.Name)).Scan(&n, &distinct))
		require.Equal(t, n, distinct, "%s holds a row twice", r.Name)
		if r.Name == "shop.hourly" {
			var bad int64
			require.NoError(t, wh.db.QueryRowContext(ctx, "SELECT count(*) FROM "+wh.name("shop.hourly")+" WHERE events <> 4").Scan(&bad))
			require.Zero(t, bad, "an hour of shop.hourly did not count its four events exactly once")
			require.Equal(t, hours, n, "%s: one row per covered hour", r.Name)
			continue
		}
		require.Equal(t, 4*hours, n, "%s: four rows per covered hour", r.Name)
	}
}
