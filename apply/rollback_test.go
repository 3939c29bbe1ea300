package apply_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/promotion"
	"github.com/gapless-dev/gapless/state"
)

// batchCounter counts the batches an apply commits (its OnEvent).
type batchCounter struct {
	mu      sync.Mutex
	batches int
	models  int
}

func (c *batchCounter) onEvent(e apply.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch e.(type) {
	case apply.BatchCommitted:
		c.batches++
	case apply.ModelStarted:
		c.models++
	}
}

// rollback builds the rollback plan id of prod at now and applies it,
// counting its batches.
func rollback(t *testing.T, b *executetest.Bundle, id string, now time.Time) (*apply.Rollback, *batchCounter, error) {
	t.Helper()
	rb, err := apply.RollbackPlan(b.Ctx, apply.RollbackParams{Store: b.Store, Engine: b.Engine, Environment: plan.Prod,
		ID: id, ExecutionTime: now, Now: now})
	require.NoError(t, err)
	var c batchCounter
	_, err = doApply(b, rb.Plan, now, apply.Hooks{}, c.onEvent)
	return rb, &c, apply.RollbackRefusal(rb, err)
}

// versions is what prod serves, by model.
func versions(t *testing.T, b *executetest.Bundle) map[string]string {
	t.Helper()
	served, _ := b.Served(t, plan.Prod)
	out := map[string]string{}
	for n, s := range served {
		out[n] = s.Version
	}
	return out
}

// Scenario: p1 serves the parent and its child through 10:00; a breaking
// change of the parent (p2) is promoted at 10:00, nothing runs after.
// `rollback` promotes p1's snapshots again as plan r1: a view swap (no
// batch, no model backfilled), through the strict check, which passes; prod
// serves p1's versions and rows, and its previous plan is p2. Rolling back
// again (r2) returns to p2's versions: rollback twice is back where it was.
// Plan p1's own tables and intervals were never touched.
func TestRollbackIsAViewSwap(t *testing.T) {
	t.Parallel()
	onBoth(t, seedFiles(""), func(t *testing.T, b *executetest.Bundle) {
		p1 := b.Plan(t, "p1", plan.Prod, at(2024, 1, 1, 10), plan.Options{})
		_, err := policyApply(b, p1, at(2024, 1, 1, 10), nil, apply.Hooks{})
		require.NoError(t, err)
		v1 := versions(t, b)
		rows1 := b.Rows(t, "SELECT CAST(sum(v) AS BIGINT) FROM demo.parent")
		executetest.WriteFiles(t, b.Dir, map[string]string{"models/parent.sql": raceModel("demo.parent", "", hourExpr+" + 100")})
		p2 := b.Plan(t, "p2", plan.Prod, at(2024, 1, 1, 10), plan.Options{})
		_, err = policyApply(b, p2, at(2024, 1, 1, 10), nil, apply.Hooks{})
		require.NoError(t, err)
		v2 := versions(t, b)
		require.NotEqual(t, v1["demo.parent"], v2["demo.parent"])
		require.NotEqual(t, v1["demo.child"], v2["demo.child"])
		rows2 := b.Rows(t, "SELECT CAST(sum(v) AS BIGINT) FROM demo.parent")
		require.NotEqual(t, rows1, rows2)

		rb, c, err := rollback(t, b, "r1", at(2024, 1, 1, 10).Add(30*time.Minute))
		require.NoError(t, err)
		require.Equal(t, "p2", rb.From)
		require.Equal(t, "p1", rb.To)
		require.Equal(t, []apply.Swap{
			{Model: "demo.parent", From: v2["demo.parent"], To: v1["demo.parent"]},
			{Model: "demo.child", From: v2["demo.child"], To: v1["demo.child"]},
		}, rb.Swaps)
		require.Zero(t, c.batches, "a rollback computes nothing")
		require.Zero(t, c.models)
		require.Equal(t, v1, versions(t, b))
		require.Equal(t, rows1, b.Rows(t, "SELECT CAST(sum(v) AS BIGINT) FROM demo.parent"))
		_, env := b.Served(t, plan.Prod)
		require.Equal(t, "r1", env.PlanID)
		require.Equal(t, "p2", env.PreviousPlanID)
		require.False(t, env.FinalizedAt.IsZero(), "finalised: its views are in place")
		for _, name := range []string{"demo.parent", "demo.child"} {
			require.Equal(t, "{[2024-01-01T00:00:00Z, 2024-01-01T10:00:00Z)}", b.Intervals(t, name, v1[name]))
		}

		_, c, err = rollback(t, b, "r2", at(2024, 1, 1, 10).Add(40*time.Minute))
		require.NoError(t, err)
		require.Zero(t, c.batches)
		require.Equal(t, v2, versions(t, b), "rolling back twice returns to p2's versions")
		require.Equal(t, rows2, b.Rows(t, "SELECT CAST(sum(v) AS BIGINT) FROM demo.parent"))
		_, env = b.Served(t, plan.Prod)
		require.Equal(t, "r2", env.PlanID)
		require.Equal(t, "r1", env.PreviousPlanID)
	})
}

// Scenario: after p2 was promoted at 10:00, the scheduler ran at 12:00 and
// advanced p2's versions through 12:00, while p1's stayed at 10:00. The
// rollback to p1 is refused by the strict check, naming each model's gap
// [10:00, 12:00); prod still serves p2, nothing was computed, and the
// rollback plan's application is recorded as ended.
func TestRollbackRefusedNamesTheGap(t *testing.T) {
	t.Parallel()
	onBoth(t, seedFiles(""), func(t *testing.T, b *executetest.Bundle) {
		p1 := b.Plan(t, "p1", plan.Prod, at(2024, 1, 1, 10), plan.Options{})
		_, err := policyApply(b, p1, at(2024, 1, 1, 10), nil, apply.Hooks{})
		require.NoError(t, err)
		executetest.WriteFiles(t, b.Dir, map[string]string{"models/parent.sql": raceModel("demo.parent", "", hourExpr+" + 100")})
		p2 := b.Plan(t, "p2", plan.Prod, at(2024, 1, 1, 10), plan.Options{})
		_, err = policyApply(b, p2, at(2024, 1, 1, 10), nil, apply.Hooks{})
		require.NoError(t, err)
		runAt(t, b.Ctx, b, at(2024, 1, 1, 12))
		v2 := versions(t, b)

		_, c, err := rollback(t, b, "r1", at(2024, 1, 1, 12))
		var rerr *apply.RollbackRefusedError
		require.ErrorAs(t, err, &rerr)
		var perr *promotion.Error
		require.ErrorAs(t, err, &perr)
		gap := "{[2024-01-01T10:00:00Z, 2024-01-01T12:00:00Z)}"
		require.Len(t, rerr.Verdicts, 2)
		for i, name := range []string{"demo.parent", "demo.child"} {
			require.Equal(t, name, rerr.Verdicts[i].Model)
			require.Equal(t, gap, rerr.Verdicts[i].Missing.String())
		}
		require.Contains(t, err.Error(), "prod: rollback to plan p1 refused (plan r1, strict promotion); prod still serves plan p2.")
		require.Contains(t, err.Error(), "demo.parent [historical_gap] is missing [2024-01-01T10:00:00Z, 2024-01-01T12:00:00Z) (prod serves it through 2024-01-01T12:00:00Z)")
		require.Zero(t, c.batches)
		require.Equal(t, v2, versions(t, b))
		_, env := b.Served(t, plan.Prod)
		require.Equal(t, "p2", env.PlanID)

		apps, err := b.Store.ListApplications(b.Ctx, "r1")
		require.NoError(t, err)
		last := apps[len(apps)-1]
		require.Equal(t, string(apply.StagePromote), last.Stage)
		require.Equal(t, apply.StatusEnded, last.Status)
	})
}

// Scenario: prod has served one plan only, and dev does not exist: there
// is nothing to roll back to, and nothing is written.
func TestRollbackWithoutAPreviousPlan(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, false, seedFiles(""))
	_, err := apply.RollbackPlan(b.Ctx, apply.RollbackParams{Store: b.Store, Engine: b.Engine, Environment: plan.Prod,
		ID: "r0", ExecutionTime: at(2024, 1, 1, 10), Now: at(2024, 1, 1, 10)})
	require.ErrorIs(t, err, apply.ErrNoRollback)
	p1 := b.Plan(t, "p1", plan.Prod, at(2024, 1, 1, 10), plan.Options{})
	_, err = policyApply(b, p1, at(2024, 1, 1, 10), nil, apply.Hooks{})
	require.NoError(t, err)
	_, err = apply.RollbackPlan(b.Ctx, apply.RollbackParams{Store: b.Store, Engine: b.Engine, Environment: plan.Prod,
		ID: "r1", ExecutionTime: at(2024, 1, 1, 10), Now: at(2024, 1, 1, 10)})
	require.ErrorIs(t, err, apply.ErrNoRollback)
	require.EqualError(t, err, "nothing to roll back to: prod has served plan p1 only")
	_, err = b.Store.GetPlan(b.Ctx, "r1")
	require.ErrorIs(t, err, state.ErrNotFound)
}

// Scenario: prod served p1, then p2 (a breaking change of the parent),
// and p1's snapshot of the parent has since gone from the state store (a
// damaged store: the janitor never deletes what a kept plan names). The
// rollback, which reads p1 from the store, refuses before writing
// anything, naming the plan and the missing snapshot.
func TestRollbackNamesAMissingSnapshotOfThePreviousPlan(t *testing.T) {
	t.Parallel()
	onBoth(t, seedFiles(""), func(t *testing.T, b *executetest.Bundle) {
		p1 := b.Plan(t, "p1", plan.Prod, at(2024, 1, 1, 10), plan.Options{})
		_, err := policyApply(b, p1, at(2024, 1, 1, 10), nil, apply.Hooks{})
		require.NoError(t, err)
		served, _ := b.Served(t, plan.Prod)
		gone := state.KeyOf(served["demo.parent"])
		executetest.WriteFiles(t, b.Dir, map[string]string{"models/parent.sql": raceModel("demo.parent", "", hourExpr+" + 100")})
		p2 := b.Plan(t, "p2", plan.Prod, at(2024, 1, 1, 10), plan.Options{})
		_, err = policyApply(b, p2, at(2024, 1, 1, 10), nil, apply.Hooks{})
		require.NoError(t, err)
		require.NoError(t, b.Store.DeleteSnapshots(b.Ctx, []state.SnapshotKey{gone}))

		_, err = apply.RollbackPlan(b.Ctx, apply.RollbackParams{Store: b.Store, Engine: b.Engine, Environment: plan.Prod,
			ID: "r1", ExecutionTime: at(2024, 1, 1, 11), Now: at(2024, 1, 1, 11)})
		require.ErrorIs(t, err, state.ErrNotFound)
		var missing *plan.MissingSnapshotsError
		require.ErrorAs(t, err, &missing)
		require.ErrorContains(t, err, "prod's previous plan p1: plan p1 names 1 snapshot(s) the state store does not hold: demo.parent at "+gone.Fingerprint)
		_, err = b.Store.GetPlan(b.Ctx, "r1")
		require.ErrorIs(t, err, state.ErrNotFound, "nothing is written")
	})
}
