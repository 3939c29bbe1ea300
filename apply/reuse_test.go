package apply_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/state"
)

// Scenario: dev adds a FULL model and builds it; prod's plan reuses dev's
// table and has no backfill for it. Before prod's plan is applied, the
// version's intervals are gone (the janitor dropped it). Applying the plan
// refuses, naming the version and what is missing, instead of promoting a
// view of a table nobody built; prod still serves what it served.
func TestApplyRefusesAReuseStateNoLongerHolds(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, true, nil)
	firstApply(t, b)
	exec := at(2024, 1, 3, 0)
	executetest.WriteFiles(t, b.Dir, map[string]string{"models/extra.sql": "MODEL (name demo.extra, kind FULL, start '2024-01-01');\nSELECT count(*) AS n FROM demo.customers"})
	_, err := doApply(b, b.Plan(t, "d1", "dev", exec, plan.Options{AllowGaps: true}), exec, apply.Hooks{}, nil)
	require.NoError(t, err)

	p := b.Plan(t, "p2", plan.Prod, exec, plan.Options{})
	_, ok := p.BackfillFor("demo.extra")
	require.False(t, ok, "dev built it")
	require.Len(t, p.Reuses, 1)
	r := p.Reuses[0]
	require.Equal(t, []string{"dev"}, r.BuiltBy)
	require.NoError(t, b.Store.DeleteIntervals(b.Ctx, []state.VersionKey{{Name: r.Name, Version: r.Version}}))

	_, err = doApply(b, p, exec, apply.Hooks{}, nil)
	require.ErrorIs(t, err, apply.ErrReuseLost)
	require.ErrorContains(t, err, "plan p2 reuses demo.extra version "+r.Version+", which dev built, but state no longer holds {[2024-01-01T00:00:00Z, 2024-01-03T00:00:00Z)} of it; build a new plan")
	_, prod := b.Served(t, plan.Prod)
	require.Equal(t, "p1", prod.PlanID)
}
