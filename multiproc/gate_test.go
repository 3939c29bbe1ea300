package multiproc

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/state"
)

// Scenario: prod is merge-gated (github.merge_gate in gapless.yaml) and
// PR 7's verdict on it is recorded. An operator runs `gapless plan prod
// --auto-apply --merge-gate recorded`; the process records its attempt and
// PR 7's hold, opens the gate, starts backfilling shop.slow, and is killed
// with SIGKILL in the middle of a batch. Nothing settles it: PR 7 stays
// held and prod was never promoted. While its lease (plus the grace) has
// not expired, the sweep's resolution leaves it alone; after, it is
// resolved abandoned (its promotion never committed), and its settle
// releases PR 7's hold and sends its verdict back to planning. Running the
// command again deploys through a new attempt behind a new gate, promoted
// and settled.
func TestGatedApplyKilledMidBackfill(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	hour := time.Now().UTC().Truncate(time.Hour)
	p := newProject(t, "slow", hour.Add(-2*time.Hour))
	f, err := os.OpenFile(filepath.Join(p.dir, "gapless.yaml"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString("github:\n  repositories: [acme/analytics]\n  merge_gate:\n    environments: [prod]\n    wait_for: recorded\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	p.run(t, "migrate", "migrate")
	st := p.openStore(t)
	_, err = st.PutPRCheck(ctx, state.PutPRCheckParams{Repo: "acme/analytics", Number: 7, Env: "prod", HeadSHA: "7a7a7a7a",
		Verdict: state.VerdictSuccess, Now: time.Now()})
	require.NoError(t, err)

	a := p.start(t, "deploy-a", "plan", "--auto-apply", "--merge-gate", "recorded")
	a.waitLog(t, "batch started for shop.slow", func(r record) bool {
		return r.msg == execute.MsgBatchStarted && r.str("model") == "shop.slow"
	})
	a.kill(t)

	ds, err := st.ListDeploys(ctx, state.ListDeploysParams{Env: "prod"})
	require.NoError(t, err)
	require.Len(t, ds, 1)
	killed := ds[0]
	require.Equal(t, state.TriggerCLI, killed.Trigger)
	require.Equal(t, state.DeployRunning, killed.State, "the gate opened (mode recorded) and the apply ran")
	require.Equal(t, state.GateRecorded, killed.Mode)
	holds, err := st.ListHolds(ctx, state.ListHoldsParams{Repo: "acme/analytics", Number: 7, ActiveOnly: true})
	require.NoError(t, err)
	require.Len(t, holds, 1, "PR 7 is held by the killed deploy")
	_, err = st.GetEnvironment(ctx, "prod")
	require.ErrorIs(t, err, state.ErrNotFound, "prod was never promoted")

	const grace = 30 * time.Second
	_, resolved, err := st.ResolveDeploy(ctx, state.ResolveDeployParams{ID: killed.ID, Grace: grace, Now: killed.LeaseExpiresAt.Add(grace / 2)})
	require.NoError(t, err)
	require.False(t, resolved, "within its lease and grace it is left alone")
	after := killed.LeaseExpiresAt.Add(grace)
	r, resolved, err := st.ResolveDeploy(ctx, state.ResolveDeployParams{ID: killed.ID, Grace: grace, Now: after})
	require.NoError(t, err)
	require.True(t, resolved)
	require.Equal(t, state.DeployAbandoned, r.State, "its promotion never committed")
	_, released, err := st.SettleDeploy(ctx, state.SettleDeployParams{ID: killed.ID, By: state.SettledBySweep, Now: after})
	require.NoError(t, err)
	require.Len(t, released, 1)
	pc, err := st.GetPRCheck(ctx, "acme/analytics", 7, "prod")
	require.NoError(t, err)
	require.Equal(t, state.VerdictPending, pc.Verdict, "PR 7 re-plans against prod as it is")

	p.run(t, "deploy-b", "plan", "--auto-apply", "--merge-gate", "recorded")
	ds, err = st.ListDeploys(ctx, state.ListDeploysParams{Env: "prod"})
	require.NoError(t, err)
	require.Len(t, ds, 2)
	again := ds[0]
	require.NotEqual(t, killed.ID, again.ID, "a new attempt behind a new gate")
	require.Equal(t, state.DeployPromoted, again.State)
	require.False(t, again.SettledAt.IsZero())
	env, err := st.GetEnvironment(ctx, "prod")
	require.NoError(t, err)
	require.Equal(t, again.ResultGeneration, env.Generation)
}
