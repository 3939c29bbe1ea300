package deploygate_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/deploygate"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/sqlite"
)

var t0 = time.Date(2024, 1, 3, 0, 0, 0, 0, time.UTC)

// world is a gated prod with PR 7 open and planned, on real SQLite state.
func world(t *testing.T) (state.Store, *clockwork.FakeClock) {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "state.db"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	clock := clockwork.NewFakeClockAt(t0)
	_, err = st.SetGateTarget(t.Context(), state.GateTarget{Env: "prod", Repo: "acme/a", Mode: state.GateRendered, UpdatedAt: t0})
	require.NoError(t, err)
	_, err = st.PutPRCheck(t.Context(), state.PutPRCheckParams{Repo: "acme/a", Number: 7, Env: "prod", HeadSHA: "aaa",
		Verdict: state.VerdictSuccess, Now: t0})
	require.NoError(t, err)
	return st, clock
}

func begin(t *testing.T, p deploygate.Params, id, mode string) *deploygate.Attempt {
	t.Helper()
	now := p.Clock.Now()
	g, err := deploygate.Begin(t.Context(), p, state.BeginDeployParams{ID: id, Mode: mode, Now: now,
		Request: &state.RequestDeployParams{ID: id, Env: "prod", Origin: "cli:ops@h", Trigger: state.TriggerCLI, RequestedBy: "ops", Now: now}})
	require.NoError(t, err)
	return g
}

// Scenario: the holds are never rendered. Open waits its whole wait on
// the clock, re-reading the store each poll, then ends the attempt failed,
// naming PR 7 and its render error, and settles it: the hold is released.
func TestOpenTimesOutNamingThePRsAndSettles(t *testing.T) {
	t.Parallel()
	st, clock := world(t)
	waits := 0
	p := deploygate.Params{Store: st, Clock: clock, Owner: "ops@h", Wait: 2 * time.Minute, Poll: 30 * time.Second,
		OnWait: func(context.Context, state.DeployAttempt) { waits++; clock.Advance(30 * time.Second) }}
	g := begin(t, p, "att-1", state.GateRendered)
	require.Len(t, g.Holds(), 1)
	_, err := st.MarkHoldRendered(t.Context(), state.MarkHoldRenderedParams{AttemptID: "att-1", Repo: "acme/a", Number: 7, Error: "PATCH check-runs: 502", Now: clock.Now()})
	require.NoError(t, err)

	err = g.Open(t.Context())
	var nerr *deploygate.NotOpenError
	require.ErrorAs(t, err, &nerr)
	require.Equal(t, 4, waits, "waited at 0, 30s, 1m and 1m30s; at 2m it gave up")
	require.Contains(t, err.Error(), "acme/a#7 (PATCH check-runs: 502)")
	require.Contains(t, err.Error(), "nothing was backfilled")
	require.Contains(t, err.Error(), "--merge-gate=recorded")
	a, err := st.GetDeploy(t.Context(), "att-1")
	require.NoError(t, err)
	require.Equal(t, state.DeployFailed, a.State)
	require.Contains(t, a.Error, "merge gate")
	require.False(t, a.SettledAt.IsZero())
	hs, err := st.ListHolds(t.Context(), state.ListHoldsParams{AttemptID: "att-1"})
	require.NoError(t, err)
	require.False(t, hs[0].Active(), "released")
}

// Scenario: a render in the same process marks the hold rendered and
// kicks the waiting gate, which opens at once, without its poll coming
// due; the fence then names the attempt and its lease.
func TestOpenWakesOnAKick(t *testing.T) {
	t.Parallel()
	st, clock := world(t)
	kick := deploygate.NewNotifier()
	p := deploygate.Params{Store: st, Clock: clock, Owner: "ops@h", Kick: kick, Poll: time.Hour, Wait: 2 * time.Hour,
		OnWait: func(ctx context.Context, a state.DeployAttempt) {
			go func() {
				_, err := st.MarkHoldRendered(ctx, state.MarkHoldRenderedParams{AttemptID: a.ID, Repo: "acme/a", Number: 7, Now: clock.Now()})
				if err == nil {
					kick.Notify()
				}
			}()
		}}
	g := begin(t, p, "att-2", "")
	require.Equal(t, state.GateRendered, g.Attempt().Mode, "the target's mode")
	require.NoError(t, g.Open(t.Context()))
	require.Equal(t, state.DeployRunning, g.Attempt().State)
	require.Equal(t, t0, clock.Now(), "no poll came due")
	require.Equal(t, &state.GateFence{AttemptID: "att-2", Token: g.Attempt().LeaseToken}, g.Fence())
}

// Scenario: in mode recorded the gate opens at once, holds unrendered.
// Finish records the outcome and hands the settle to Params.Settle when
// set.
func TestRecordedOpensAtOnceAndFinishHandsOverTheSettle(t *testing.T) {
	t.Parallel()
	st, clock := world(t)
	var settled []string
	p := deploygate.Params{Store: st, Clock: clock, Owner: "ops@h",
		OnWait: func(context.Context, state.DeployAttempt) { t.Error("mode recorded never waits") },
		Settle: func(_ context.Context, a state.DeployAttempt) error {
			settled = append(settled, a.ID+"/"+a.State)
			return nil
		}}
	g := begin(t, p, "att-3", state.GateRecorded)
	require.NoError(t, g.Open(t.Context()))
	require.NoError(t, g.Finish(t.Context(), state.FinishDeployParams{State: state.DeployCancelled}))
	require.Equal(t, []string{"att-3/cancelled"}, settled)
	a, err := st.GetDeploy(t.Context(), "att-3")
	require.NoError(t, err)
	require.True(t, a.SettledAt.IsZero(), "settling is Params.Settle's job")
}

// Scenario: while the apply runs, Keep renews the lease at a third of its
// TTL; when an operator force-settles the attempt (its lease is gone),
// the next renewal fails and the apply's context is cancelled with
// state.ErrLeaseLost.
func TestKeepCancelsOnALostLease(t *testing.T) {
	t.Parallel()
	st, clock := world(t)
	p := deploygate.Params{Store: st, Clock: clock, Owner: "ops@h", TTL: 90 * time.Second}
	g := begin(t, p, "att-4", state.GateRecorded)
	require.NoError(t, g.Open(t.Context()))
	ctx, stop := g.Keep(t.Context())
	defer stop()

	_, _, err := st.SettleDeploy(t.Context(), state.SettleDeployParams{ID: "att-4", By: state.SettledByOperator, Force: true, Now: clock.Now()})
	require.NoError(t, err)
	require.NoError(t, clock.BlockUntilContext(t.Context(), 1))
	clock.Advance(30 * time.Second)
	<-ctx.Done()
	require.True(t, errors.Is(context.Cause(ctx), state.ErrLeaseLost), "%v", context.Cause(ctx))
}
