package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/backend"
	"github.com/gapless-dev/gapless/config"
	"github.com/gapless-dev/gapless/internal/pgtest"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/state"
)

// gateNow is the clock of the merge gate tests (run's too).
var gateNow = time.Date(2024, 3, 1, 10, 30, 0, 0, time.UTC)

const gateRepo = "acme/analytics"

// gateProject writes a one-model project (an hourly model from the
// start of the day) with a DuckDB warehouse and, as state, the store
// named by backendName: "sqlite" (a file in the folder) or "postgres" (a
// fresh database; skipped without a server). With gated, its
// gapless.yaml has a github: block whose merge gate covers prod (the
// default of github.merge_gate.environments).
func gateProject(t *testing.T, backendName string, gated bool) string {
	t.Helper()
	stateURL := "sqlite://.gapless/state.db"
	if backendName == "postgres" {
		stateURL = pgtest.NewDatabase(t)
	}
	dir := t.TempDir()
	yaml := "warehouse: duckdb://warehouse.duckdb\nstate: " + stateURL + "\nmodel_defaults:\n  dialect: duckdb\n  start: '2024-03-01'\n"
	if gated {
		yaml += "github:\n  repositories: [" + gateRepo + "]\n"
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gapless.yaml"), []byte(yaml), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "models"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "models", "events.sql"), []byte(`MODEL (name demo.events, kind INCREMENTAL_BY_TIME_RANGE (time_column ts), cron '@hourly');

SELECT g.ts AS ts, 1.0 AS amount FROM generate_series(@start_ts, @end_ts, INTERVAL 1 HOUR) AS g(ts)
`), 0o644))
	return dir
}

// openState opens dir's state store as the command line does; it is
// closed when the test ends.
func openState(t *testing.T, dir string) state.Store {
	t.Helper()
	cfg, err := config.Load(dir)
	require.NoError(t, err)
	st, err := backend.OpenStore(t.Context(), cfg.State)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	return st
}

// runWithClock is run with clk as the command's clock.
func runWithClock(ctx context.Context, wd string, clk clockwork.Clock, args ...string) result {
	var out, errb bytes.Buffer
	code := Run(ctx, args, Env{
		Stdout: &out, Stderr: &errb, Clock: clk,
		Getwd: func() (string, error) { return wd, nil },
	})
	return result{code, out.String(), errb.String()}
}

// openPR records PR n of gateRepo as open with a verdict on prod, as
// `gapless serve` does once it planned it.
func openPR(t *testing.T, st state.Store, n int, head string) {
	t.Helper()
	_, err := st.PutPRCheck(t.Context(), state.PutPRCheckParams{Repo: gateRepo, Number: n, Env: plan.Prod, HeadSHA: head,
		Verdict: state.VerdictSuccess, Now: gateNow})
	require.NoError(t, err)
}

// savedPlan writes prod's plan to p.json in dir and returns it.
func savedPlan(t *testing.T, dir string) *plan.Plan {
	t.Helper()
	mustRun(t, dir, "plan", "--out", "p.json")
	data, err := os.ReadFile(filepath.Join(dir, "p.json"))
	require.NoError(t, err)
	pl, err := plan.Decode(data)
	require.NoError(t, err)
	require.NotEmpty(t, pl.Backfills)
	return pl
}

// onlyAttempt returns prod's one deploy attempt and its holds.
func onlyAttempt(t *testing.T, st state.Store) (state.DeployAttempt, []state.Hold) {
	t.Helper()
	as, err := st.ListDeploys(t.Context(), state.ListDeploysParams{Env: plan.Prod})
	require.NoError(t, err)
	require.Len(t, as, 1)
	holds, err := st.ListHolds(t.Context(), state.ListHoldsParams{AttemptID: as[0].ID})
	require.NoError(t, err)
	return as[0], holds
}

var gateStores = []string{"sqlite", "postgres"}

func TestGateCLIApplyFailsClosedWhenHoldsAreNotRendered(t *testing.T) {
	t.Parallel()
	for _, name := range gateStores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// Scenario: prod is merge-gated by gapless.yaml and PR 7 has a
			// verdict on it; no `gapless serve` runs, so nothing renders
			// the hold. `gapless apply` in rendered mode (the default)
			// waits --merge-gate-wait on the clock and fails closed: exit
			// 1, naming PR 7 and saying nothing was backfilled; prod does
			// not exist and no interval was written; the attempt is
			// failed and settled, its hold released.
			dir := gateProject(t, name, true)
			pl := savedPlan(t, dir)
			st := openState(t, dir)
			openPR(t, st, 7, "abc123")

			clk := clockwork.NewFakeClockAt(gateNow)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			done := make(chan result, 1)
			go func() { done <- runWithClock(ctx, dir, clk, "apply", "p.json", "--merge-gate-wait", "5s") }()
			// The gate's poll timer is the one waiter on the clock.
			require.NoError(t, clk.BlockUntilContext(ctx, 1))
			clk.Advance(5 * time.Second)
			var r result
			select {
			case r = <-done:
			case <-ctx.Done():
				t.Fatal("apply did not return")
			}

			require.Equal(t, ExitFailure, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
			require.Contains(t, r.stderr, "prod is merge-gated: holds recorded on 1 pull request(s)")
			require.Contains(t, r.stderr, "waiting for them to show on GitHub (up to 5s)")
			require.Contains(t, r.stderr, gateRepo+"#7 (not rendered yet)")
			require.Contains(t, r.stderr, "nothing was backfilled")
			require.Contains(t, r.stderr, "--merge-gate=recorded")
			require.NotContains(t, r.stdout, "Applied plan")

			_, err := st.GetEnvironment(t.Context(), plan.Prod)
			require.ErrorIs(t, err, state.ErrNotFound, "prod was not promoted")
			var keys []state.VersionKey
			for _, bf := range pl.Backfills {
				keys = append(keys, state.VersionKey{Name: bf.Name, Version: bf.Version})
			}
			ivs, err := st.GetIntervals(t.Context(), keys)
			require.NoError(t, err)
			for k, s := range ivs {
				require.True(t, s.IsEmpty(), "%v has intervals %s", k, s)
			}

			a, holds := onlyAttempt(t, st)
			require.Equal(t, state.DeployFailed, a.State)
			require.Equal(t, state.TriggerCLI, a.Trigger)
			require.Equal(t, state.GateRendered, a.Mode)
			require.Contains(t, a.Error, "merge gate")
			require.False(t, a.SettledAt.IsZero(), "the attempt is settled")
			require.Len(t, holds, 1)
			require.Equal(t, 7, holds[0].Number)
			require.False(t, holds[0].Active(), "the hold is released")

			tgt, err := st.GetGateTarget(t.Context(), plan.Prod)
			require.NoError(t, err, "gapless.yaml's gate was registered in the state store")
			require.Equal(t, gateRepo, tgt.Repo)
			require.Equal(t, state.GateRendered, tgt.Mode)
		})
	}
}

func TestGateCLIApplyInRecordedModeProceeds(t *testing.T) {
	t.Parallel()
	for _, name := range gateStores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// Scenario: the same gated prod and open PR 7, applied with
			// `plan --auto-apply --merge-gate=recorded` (GitHub is down):
			// it starts once the hold is recorded and says so; prod is
			// promoted under the attempt's fence; the attempt ends
			// promoted and settled (its hold released), and the history
			// has a gate_opened event with reason recorded.
			dir := gateProject(t, name, true)
			st := openState(t, dir)
			openPR(t, st, 7, "abc123")

			r := run(t, dir, "plan", "--auto-apply", "--merge-gate=recorded")
			require.Equal(t, ExitOK, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
			require.Contains(t, r.stderr, "prod is merge-gated: holds recorded on 1 pull request(s)")
			require.Contains(t, r.stderr, "starting now; the holds render while the deploy runs (--merge-gate=recorded)")
			require.Contains(t, r.stdout, "Applied plan ")

			env, err := st.GetEnvironment(t.Context(), plan.Prod)
			require.NoError(t, err)
			a, holds := onlyAttempt(t, st)
			require.Equal(t, state.DeployPromoted, a.State)
			require.Equal(t, state.GateRecorded, a.Mode)
			require.Equal(t, env.PlanID, a.PlanID)
			require.Equal(t, env.Generation, a.ResultGeneration)
			require.Equal(t, "cli:"+actorName(), a.Origin)
			require.False(t, a.SettledAt.IsZero(), "the attempt is settled")
			require.Len(t, holds, 1)
			require.False(t, holds[0].Active(), "the hold is released")

			evs, err := st.ListEvents(t.Context(), state.EventFilter{Kinds: []string{state.EventGateOpened}, Environment: plan.Prod})
			require.NoError(t, err)
			require.Len(t, evs, 1)
			require.Equal(t, state.GateRecorded, evs[0].Reason)
		})
	}
}

// Scenario: a gated prod with no open pull request, in rendered mode:
// there is nothing to hold, so the gate opens at once and the apply runs
// under an attempt that ends promoted. An ungated environment (dev, not in
// github.merge_gate.environments) is applied as before, with no attempt.
func TestGateCLINothingToHoldAndUngatedEnvironments(t *testing.T) {
	t.Parallel()
	dir := gateProject(t, "sqlite", true)
	r := run(t, dir, "plan", "--auto-apply")
	require.Equal(t, ExitOK, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	require.Contains(t, r.stderr, "prod is merge-gated: no open pull request to hold; starting now")
	st := openState(t, dir)
	a, holds := onlyAttempt(t, st)
	require.Equal(t, state.DeployPromoted, a.State)
	require.Empty(t, holds)

	r = run(t, dir, "plan", "dev", "--auto-apply")
	require.Equal(t, ExitOK, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	require.NotContains(t, r.stderr, "merge-gated")
	dev, err := st.ListDeploys(t.Context(), state.ListDeploysParams{Env: "dev"})
	require.NoError(t, err)
	require.Empty(t, dev)
}

// Scenario: a project with no github: block and no gate target in its
// state: `plan --auto-apply` and `apply` record no deploy attempt and
// register no gate (what every other test of the command line does).
func TestGateCLIUngatedProjectRecordsNoAttempt(t *testing.T) {
	t.Parallel()
	dir := gateProject(t, "sqlite", false)
	savedPlan(t, dir)
	out := mustRun(t, dir, "apply", "p.json")
	require.Contains(t, out, "Applied plan ")
	st := openState(t, dir)
	as, err := st.ListDeploys(t.Context(), state.ListDeploysParams{})
	require.NoError(t, err)
	require.Empty(t, as)
	ts, err := st.ListGateTargets(t.Context())
	require.NoError(t, err)
	require.Empty(t, ts)
}

func TestGateCLIStatusAndSettle(t *testing.T) {
	t.Parallel()
	for _, name := range gateStores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// Scenario: a deploy attempt of `gapless serve` recorded holds
			// on PRs 7 and 8 and its process died: PR 8's hold rendered,
			// PR 7's render failed. `gate status` (text and --json) shows
			// the attempt, both holds, PR 7's render error and render lag.
			// A CLI apply meanwhile is refused, naming the attempt. `gate
			// settle` releases both holds, records the override (a
			// gate_settled event with reason operator) and the attempt
			// then shows as ended; settling an unknown attempt is exit 1
			// naming it.
			dir := gateProject(t, name, false)
			st := openState(t, dir)
			ctx := t.Context()
			_, err := st.SetGateTarget(ctx, state.GateTarget{Env: plan.Prod, Repo: gateRepo, Mode: state.GateRendered, UpdatedAt: gateNow})
			require.NoError(t, err)
			openPR(t, st, 7, "abc123")
			openPR(t, st, 8, "def456")
			const id = "0b7d7a52-7d1c-4f3e-9a55-3c1f00000001"
			started := gateNow.Add(-3 * time.Minute)
			a, holds, err := st.BeginDeploy(ctx, state.BeginDeployParams{ID: id,
				Request: &state.RequestDeployParams{ID: id, Env: plan.Prod, Origin: "pr:acme/analytics#9@9999", Trigger: state.TriggerDeployCommand,
					RequestedBy: "alice", Repo: gateRepo, Number: 9, HeadSHA: "9999", Now: started},
				Owner: "serve@host", TTL: time.Hour, Now: started})
			require.NoError(t, err)
			require.Equal(t, state.DeployHeld, a.State)
			require.Len(t, holds, 2)
			_, err = st.MarkHoldRendered(ctx, state.MarkHoldRenderedParams{AttemptID: id, Repo: gateRepo, Number: 7,
				Error: "GitHub answered 500 to the check run update", Now: started.Add(time.Minute)})
			require.NoError(t, err)
			_, err = st.MarkHoldRendered(ctx, state.MarkHoldRenderedParams{AttemptID: id, Repo: gateRepo, Number: 8, Now: started.Add(time.Minute)})
			require.NoError(t, err)

			out := mustRun(t, dir, "gate", "status")
			require.Contains(t, out, "prod: merge-gated, mode rendered, pull requests of "+gateRepo)
			require.Regexp(t, `(?m)^    `+id+` +held +pr:acme/analytics#9@9999 +deploy_command +rendered +2024-03-01T10:27:00Z`, out)
			require.Regexp(t, `(?m)^    acme/analytics#7 +abc123 +2024-03-01T10:27:00Z +no +3m0s +GitHub answered 500 to the check run update$`, out)
			require.Regexp(t, `(?m)^    acme/analytics#8 +def456 +2024-03-01T10:27:00Z +2024-03-01T10:28:00Z +- +-$`, out)

			var rep gateStatusReport
			require.NoError(t, json.Unmarshal([]byte(mustRun(t, dir, "gate", "status", "--json")), &rep))
			require.Len(t, rep.Targets, 1)
			tg := rep.Targets[0]
			require.Equal(t, plan.Prod, tg.Env)
			require.True(t, tg.Gated)
			require.Len(t, tg.Active, 1)
			require.Empty(t, tg.Recent)
			at := tg.Active[0]
			require.Equal(t, id, at.ID)
			require.Equal(t, state.DeployHeld, at.State)
			require.Equal(t, started.Add(time.Hour), at.LeaseExpiresAt)
			require.Len(t, at.Holds, 2)
			require.Equal(t, 7, at.Holds[0].Number)
			require.False(t, at.Holds[0].Rendered)
			require.Equal(t, "GitHub answered 500 to the check run update", at.Holds[0].RenderError)
			require.Equal(t, int64(180), at.Holds[0].RenderLagSeconds)
			require.True(t, at.Holds[1].Rendered)
			require.Zero(t, at.Holds[1].RenderLagSeconds)

			// A CLI apply while the attempt holds prod: refused, naming it.
			r := run(t, dir, "plan", "--auto-apply")
			require.Equal(t, ExitFailure, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
			require.Contains(t, r.stderr, "deploy attempt "+id)
			require.Contains(t, r.stderr, "gapless gate settle "+id)
			_, err = st.GetEnvironment(ctx, plan.Prod)
			require.ErrorIs(t, err, state.ErrNotFound)

			out = mustRun(t, dir, "gate", "settle", id, "--reason", "serve's host is gone")
			require.Contains(t, out, "Settled deploy attempt "+id+" (prod, held -> abandoned) by operator override; released 2 hold(s): acme/analytics#7, acme/analytics#8.")
			settled, err := st.GetDeploy(ctx, id)
			require.NoError(t, err)
			require.Equal(t, state.DeployAbandoned, settled.State)
			require.Equal(t, state.SettledByOperator, settled.SettledBy)
			require.Equal(t, "serve's host is gone", settled.Error)
			active, err := st.ListHolds(ctx, state.ListHoldsParams{Env: plan.Prod, ActiveOnly: true})
			require.NoError(t, err)
			require.Empty(t, active)
			evs, err := st.ListEvents(ctx, state.EventFilter{Kinds: []string{state.EventGateSettled}, Environment: plan.Prod})
			require.NoError(t, err)
			require.Len(t, evs, 1)
			require.Equal(t, state.SettledByOperator, evs[0].Reason)

			out = mustRun(t, dir, "gate", "settle", id)
			require.Contains(t, out, "was already settled")

			require.NoError(t, json.Unmarshal([]byte(mustRun(t, dir, "gate", "status", "--json")), &rep))
			require.Empty(t, rep.Targets[0].Active)
			require.Len(t, rep.Targets[0].Recent, 1)
			require.Equal(t, state.DeployAbandoned, rep.Targets[0].Recent[0].State)
			out = mustRun(t, dir, "gate", "status")
			require.Contains(t, out, "No deploy attempt in flight or unsettled.")
			require.Regexp(t, `(?m)^    `+id+` +abandoned +pr:acme/analytics#9@9999 +- +2024-03-01T10:30:00Z +operator +serve's host is gone$`, out)

			r = run(t, dir, "gate", "settle", "no-such-attempt")
			require.Equal(t, ExitFailure, r.code)
			require.Contains(t, r.stderr, "no deploy attempt no-such-attempt")
		})
	}
}

// Scenario: gate status on a state with no merge-gated environment says
// so, and its JSON has an empty list of targets.
func TestGateCLIStatusWithNoGate(t *testing.T) {
	t.Parallel()
	dir := gateProject(t, "sqlite", false)
	require.Contains(t, mustRun(t, dir, "gate", "status"), "No environment is merge-gated")
	var rep gateStatusReport
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, dir, "gate", "status", "--json")), &rep))
	require.NotNil(t, rep.Targets)
	require.Empty(t, rep.Targets)
}

// Scenario: a bad --merge-gate or --merge-gate-wait, on apply or plan, is
// a usage error (exit 2) naming the flag, before anything is read; so is
// gate settle without its attempt.
func TestGateCLIBadFlagsExitTwo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"apply", "p.json", "--merge-gate", "sometimes"}, "--merge-gate"},
		{[]string{"plan", "--auto-apply", "--merge-gate=eventually"}, "--merge-gate"},
		{[]string{"apply", "p.json", "--merge-gate-wait", "soon"}, "--merge-gate-wait"},
		{[]string{"plan", "--merge-gate-wait=-1s"}, "--merge-gate-wait"},
		{[]string{"plan", "--merge-gate-wait=0s"}, "--merge-gate-wait"},
		{[]string{"gate", "settle"}, "gapless gate settle takes 1 argument(s)"},
		{[]string{"gate", "status", "extra"}, "gapless gate status takes 0 argument(s)"},
	} {
		r := run(t, quickstart, tc.args...)
		require.Equal(t, ExitUsage, r.code, "%v: %s", tc.args, r.stderr)
		require.Contains(t, r.stderr, tc.want, "%v", tc.args)
	}
}
