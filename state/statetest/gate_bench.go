package statetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/gapless-dev/gapless/state"
)

// benchGate measures one merge-gate cycle with prs open pull requests on
// prod: BeginDeploy (the attempt and one hold per PR, in one
// transaction), FinishDeploy and SettleDeploy (every hold released, every
// verdict back to pending). It is the state-store cost the gate adds to a
// deploy.
func benchGate(b *testing.B, st state.Store, prs int) {
	ctx := b.Context()
	if _, err := st.SetGateTarget(ctx, state.GateTarget{Env: "prod", Repo: "acme/analytics", Mode: state.GateRecorded, UpdatedAt: at(0)}); err != nil {
		b.Fatal(err)
	}
	for n := 1; n <= prs; n++ {
		if _, err := st.PutPRCheck(ctx, state.PutPRCheckParams{Repo: "acme/analytics", Number: n, Env: "prod", HeadSHA: fmt.Sprintf("head%d", n),
			Verdict: state.VerdictSuccess, Now: at(0)}); err != nil {
			b.Fatal(err)
		}
	}
	i := 0
	for b.Loop() {
		i++
		now := at(i)
		id := fmt.Sprintf("bench-%d", i)
		a, holds, err := st.BeginDeploy(ctx, state.BeginDeployParams{ID: id, Owner: "bench", TTL: time.Minute, Now: now,
			Request: &state.RequestDeployParams{ID: id, Env: "prod", Origin: "cli:bench", Trigger: state.TriggerCLI, Now: now}})
		if err != nil || len(holds) != prs {
			b.Fatalf("begin %d: %d holds, err %v", i, len(holds), err)
		}
		if _, err := st.FinishDeploy(ctx, state.FinishDeployParams{ID: id, Token: a.LeaseToken, State: state.DeployCancelled, Now: now}); err != nil {
			b.Fatal(err)
		}
		if _, released, err := st.SettleDeploy(ctx, state.SettleDeployParams{ID: id, By: state.SettledBySettle, Now: now}); err != nil || len(released) != prs {
			b.Fatalf("settle %d: %d released, err %v", i, len(released), err)
		}
	}
}
