package apply_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/promotion"
	"github.com/gapless-dev/gapless/state"
)

// actorApply applies p at now as actor, counting its batches; a model's
// backfill starting fails the apply when noBackfill is set.
func actorApply(b *executetest.Bundle, p *plan.Plan, now time.Time, actor string, noBackfill bool) (*batchCounter, error) {
	var c batchCounter
	hooks := apply.Hooks{}
	if noBackfill {
		hooks.BeforeModel = func(_ context.Context, m string) error { return errors.New("backfill of " + m + " started") }
	}
	_, err := apply.Apply(b.Ctx, apply.Params{Plan: p, Store: b.Store, Engine: b.Engine, Parser: b.Parser, ProjectDir: b.Dir,
		Clock: clockwork.NewFakeClockAt(now), Logger: quiet, OnEvent: c.onEvent, Hooks: hooks, Actor: actor})
	return &c, err
}

// lastApplication is the last record of plan id's application history.
func lastApplication(t *testing.T, b *executetest.Bundle, id string) state.Application {
	t.Helper()
	apps, err := b.Store.ListApplications(b.Ctx, id)
	require.NoError(t, err)
	require.NotEmpty(t, apps)
	return apps[len(apps)-1]
}

// Scenario: two changes are planned against prod at p1 (pa and pb, both
// at 10:00). alice applies pb at 10:05: prod is at pb. pa, applied at
// 10:20, is stale: it is refused at its check stage, before it creates a
// table or starts a batch, with a message that names the plan that won,
// when and by whom, and what to do; the refusal is recorded as a
// conflicting_plan rejection and the application as ended, and prod still
// serves pb.
func TestStalePlanIsRefusedBeforeItsBackfill(t *testing.T) {
	t.Parallel()
	onBoth(t, seedFiles(""), func(t *testing.T, b *executetest.Bundle) {
		p1 := b.Plan(t, "p1", plan.Prod, at(2024, 1, 1, 10), plan.Options{})
		_, err := actorApply(b, p1, at(2024, 1, 1, 10), "alice@laptop", false)
		require.NoError(t, err)
		executetest.WriteFiles(t, b.Dir, map[string]string{"models/parent.sql": raceModel("demo.parent", "", hourExpr+" + 100")})
		pa := b.Plan(t, "pa", plan.Prod, at(2024, 1, 1, 10), plan.Options{})
		executetest.WriteFiles(t, b.Dir, map[string]string{"models/parent.sql": raceModel("demo.parent", "", hourExpr+" + 200")})
		pb := b.Plan(t, "pb", plan.Prod, at(2024, 1, 1, 10), plan.Options{})
		_, err = actorApply(b, pb, at(2024, 1, 1, 10).Add(5*time.Minute), "alice@laptop", false)
		require.NoError(t, err)

		c, err := actorApply(b, pa, at(2024, 1, 1, 10).Add(20*time.Minute), "bob@ci", true)
		require.ErrorIs(t, err, state.ErrConflictingPlan)
		var serr *apply.StaleError
		require.ErrorAs(t, err, &serr)
		require.Equal(t, "pb", serr.Current)
		require.Contains(t, err.Error(), "stage check: prod was changed by plan pb (promoted 15m ago by alice@laptop) "+
			"after this plan was built against plan p1; re-run `gapless plan prod`")
		require.Zero(t, c.batches, "no batch ran")
		require.Zero(t, c.models, "no backfill started")
		for _, s := range pa.Snapshots {
			if s.Name == "demo.parent" {
				ok, err := b.Engine.TableExists(b.Ctx, execute.PhysicalTable(s))
				require.NoError(t, err)
				require.False(t, ok, "no table was created")
			}
		}

		last := lastApplication(t, b, "pa")
		require.Equal(t, string(apply.StageCheck), last.Stage)
		require.Equal(t, apply.StatusEnded, last.Status)
		require.JSONEq(t, `{"reason":"conflicting_plan","error":`+jsonString(t, serr.Error())+`}`, string(last.Detail))
		rej := events(t, b, state.EventPromotionRejected)
		require.Len(t, rej, 1)
		require.Equal(t, "pa", rej[0].PlanID)
		require.Equal(t, string(promotion.ConflictingPlan), rej[0].Reason)
		_, env := b.Served(t, plan.Prod)
		require.Equal(t, "pb", env.PlanID)
	})
}

// Scenario: a plan whose incumbent only advanced (a scheduler run after it
// was built, which changes neither prod's plan id nor its generation) is
// not stale: it passes the check stage and backfills; the strict promotion
// then refuses it for the advance, and its application is recorded as
// ended with that reason. Applying it again under trailing-gap starts a
// new application, which promotes.
func TestAdvancedIncumbentIsNotStaleAndARefusalEndsTheApplication(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, false, seedFiles(""))
	p2 := seedRace(t, b, promotion.Default)
	runAt(t, b.Ctx, b, at(2024, 1, 1, 11))
	c, err := actorApply(b, p2, at(2024, 1, 1, 11), "", false)
	perr := rejection(t, err)
	require.Equal(t, promotion.IncumbentAdvanced, perr.Verdicts[0].Reason)
	require.Positive(t, c.batches, "it passed the check stage and backfilled")
	last := lastApplication(t, b, "p2")
	require.Equal(t, string(apply.StagePromote), last.Stage)
	require.Equal(t, apply.StatusEnded, last.Status)
	require.Contains(t, string(last.Detail), `"reason":"incumbent_advanced"`)

	_, err = policyApply(b, p2, at(2024, 1, 1, 11), &promotion.Policy{Name: promotion.TrailingGap, MaxTrailingGapIntervals: 1}, apply.Hooks{})
	require.NoError(t, err)
	last = lastApplication(t, b, "p2")
	require.Equal(t, string(apply.StageFinalize), last.Stage)
	require.Equal(t, apply.StatusFinished, last.Status)
}

// Scenario: StaleError says what happened in each case: another plan
// promoted, an environment created or removed since the plan was built, or
// the same plan promoted again; without an actor it omits "by".
func TestStaleErrorMessages(t *testing.T) {
	t.Parallel()
	now := at(2024, 1, 3, 0)
	for _, tc := range []struct {
		err  apply.StaleError
		want string
	}{
		{apply.StaleError{Environment: "prod", Expected: plan.Expected{PlanID: "p1", Generation: 1}, Current: "p2", Generation: 2,
			PromotedAt: now.Add(-3 * time.Hour), By: "alice@laptop", Now: now},
			"prod was changed by plan p2 (promoted 3h ago by alice@laptop) after this plan was built against plan p1; re-run `gapless plan prod`"},
		{apply.StaleError{Environment: "dev", Current: "d1", Generation: 1, PromotedAt: now.Add(-40 * time.Second), Now: now},
			"dev was created by plan d1 (promoted 40s ago) after this plan was built against no dev (it did not exist); re-run `gapless plan dev`"},
		{apply.StaleError{Environment: "dev", Expected: plan.Expected{PlanID: "d1", Generation: 1}, Now: now},
			"dev was removed or invalidated after this plan was built against plan d1; re-run `gapless plan dev`"},
		{apply.StaleError{Environment: "prod", Expected: plan.Expected{PlanID: "p1", Generation: 1}, Current: "p1", Generation: 3,
			PromotedAt: now.Add(-50 * time.Hour), Now: now},
			"prod was promoted again (plan p1, generation 3, promoted 2d ago) after this plan was built against its generation 1; re-run `gapless plan prod`"},
	} {
		require.Equal(t, tc.want, tc.err.Error())
		require.ErrorIs(t, &tc.err, state.ErrConflictingPlan)
	}
}

// jsonString is s as a JSON string literal.
func jsonString(t *testing.T, s string) string {
	t.Helper()
	b, err := json.Marshal(s)
	require.NoError(t, err)
	return string(b)
}
