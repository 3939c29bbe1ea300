package apply_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/project"
	"github.com/gapless-dev/gapless/promotion"
	"github.com/gapless-dev/gapless/run"
)

// buildPlain builds a plan for env with plan.Build and the options as
// given: no helper or flag default in between.
func buildPlain(t *testing.T, b *executetest.Bundle, id, env string, opts plan.Options) (*plan.Plan, error) {
	t.Helper()
	pr, _, err := project.Load(b.Ctx, b.Dir, b.Parser)
	require.NoError(t, err)
	cur, base, err := plan.Against(b.Ctx, b.Store, env)
	require.NoError(t, err)
	return plan.Build(b.Ctx, plan.BuildParams{
		ID: id, Environment: env, Current: cur, Base: base, Next: pr.Snapshots, Graph: pr.Graph, Intervals: b.Store,
		Additive: project.Additive(b.Ctx, b.Parser), ExecutionTime: at(2024, 1, 3, 0), Now: at(2024, 1, 3, 0), Options: opts,
	})
}

// Scenario: the safe path is the zero value. A prod plan built with zero
// Options runs the no-gap check: when the scheduler advances the incumbent
// during its backfill, promotion refuses it (incumbent_advanced) instead
// of serving a gap. Allowing gaps in prod is refused when the plan is
// built, and a hand-made prod plan that allows them is refused by Apply
// before anything runs.
func TestZeroOptionsRunTheNoGapCheck(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, true, nil)
	firstApply(t, b)
	editEvents(t, b, "((epoch(g.ts)::BIGINT / 300) % 7) * 3.0")
	p, err := buildPlain(t, b, "p2", plan.Prod, plan.Options{})
	require.NoError(t, err)
	hooks := apply.Hooks{AfterBackfill: func(ctx context.Context) error {
		_, err := runOnce(ctx, b, plan.Prod, at(2024, 1, 3, 2), run.Hooks{})
		return err
	}}
	_, err = doApply(b, p, at(2024, 1, 3, 2), hooks, nil)
	var perr *promotion.Error
	require.ErrorAs(t, err, &perr, "the zero value checks")
	require.Equal(t, promotion.IncumbentAdvanced, perr.Verdicts[0].Reason)
	env, err := b.Store.GetEnvironment(b.Ctx, plan.Prod)
	require.NoError(t, err)
	require.Equal(t, "p1", env.PlanID, "prod still serves the incumbent")

	_, err = buildPlain(t, b, "p3", plan.Prod, plan.Options{AllowGaps: true})
	require.ErrorIs(t, err, plan.ErrGapsInProd)
	require.EqualError(t, err, "plan for prod allows gaps: prod always runs the no-gap check at promotion")

	p.ID, p.Options.AllowGaps = "p4", true
	_, err = doApply(b, p, at(2024, 1, 3, 2), apply.Hooks{}, nil)
	require.ErrorIs(t, err, plan.ErrGapsInProd)
	env, err = b.Store.GetEnvironment(b.Ctx, plan.Prod)
	require.NoError(t, err)
	require.Equal(t, "p1", env.PlanID)
}

// Scenario: the replan policy without a replanner (Params.Replan nil) is
// an error before anything is written, not a silent strict.
func TestReplanWithoutReplannerIsAnError(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, true, nil)
	p := b.Plan(t, "p1", plan.Prod, at(2024, 1, 3, 0), plan.Options{})
	_, err := apply.Apply(b.Ctx, apply.Params{
		Plan: p, Store: b.Store, Engine: b.Engine, Parser: b.Parser, ProjectDir: b.Dir, Logger: quiet,
		Policy: &promotion.Policy{Name: promotion.Replan, MaxAttempts: 2},
	})
	require.ErrorIs(t, err, apply.ErrNoReplanner)
	require.EqualError(t, err, "apply p1: the replan policy needs a replanner (Params.Replan), and none was given")
	requireNothingWritten(t, b, p)
}
