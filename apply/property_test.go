package apply_test

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/promotion"
	"github.com/gapless-dev/gapless/run"
	"github.com/gapless-dev/gapless/state"
)

// rapidChecks is how many random histories the property test tries unless
// -rapid.checks says otherwise: each history opens a warehouse and a store
// and applies several plans, so the default of 100 would take minutes.
const rapidChecks = 20

func limitRapidChecks() {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if !set {
		_ = flag.Set("rapid.checks", strconv.Itoa(rapidChecks))
	}
}

// world is the property test's model of what prod must serve.
type world struct {
	tt    *testing.T
	t     *rapid.T
	b     *executetest.Bundle
	clock time.Time
	// variant is the parent's expression variant prod serves: v = hour +
	// 100 * variant; the child serves w = 2 * v.
	variant int
	// highWater is, per model, the furthest frontier prod has served: prod
	// may fall behind it only by recorded, open debt.
	highWater map[string]time.Time
	plans     int
}

func variantFiles(k int) map[string]string {
	return map[string]string{
		"models/parent.sql": raceModel("demo.parent", "", fmt.Sprintf("%s + %d", hourExpr, 100*k)),
		"models/child.sql":  childModel(""),
	}
}

// Scenario (property): random interleavings of scheduler runs and deploys
// under every policy, where the scheduler also runs between a deploy's
// backfill and its promotion (0-2 advances), over a parent and child. After
// every step:
//   - prod never serves less than it once served, except for open debt
//     (design invariant 2);
//   - every debt is within its bound;
//   - a run repairs every debt it can (every open debt is repaired once a
//     run has passed its range);
//   - the served tables hold exactly one row per covered hour, with the
//     values a from-scratch computation of the served variant gives
//     (invariant 3: nothing duplicated, nothing lost, nothing stale);
//   - each policy's verdict is the one its rules predict.
func TestPolicyProperty(t *testing.T) {
	t.Parallel()
	limitRapidChecks()
	rapid.Check(t, func(rt *rapid.T) {
		w := &world{tt: t, t: rt, b: executetest.Setup(t, false, variantFiles(0)), clock: at(2024, 1, 1, 6), highWater: map[string]time.Time{}}
		p1 := w.b.Plan(t, "p0", plan.Prod, w.clock, plan.Options{})
		_, err := policyApply(w.b, p1, w.clock, nil, apply.Hooks{})
		require.NoError(rt, err)
		w.check()
		for range rapid.IntRange(1, 6).Draw(rt, "steps") {
			if rapid.Bool().Draw(rt, "deploy") {
				w.deploy(t)
			} else {
				w.run(rapid.IntRange(0, 2).Draw(rt, "hours"))
			}
			w.check()
		}
	})
}

func (w *world) run(hours int) {
	w.clock = w.clock.Add(time.Duration(hours) * time.Hour)
	_, err := runOnce(w.b.Ctx, w.b, plan.Prod, w.clock, run.Hooks{})
	require.NoError(w.t, err)
	// Every debt the run could repair is repaired.
	debts, err := w.b.Store.ListDebts(w.b.Ctx, state.DebtFilter{Environment: plan.Prod, OpenOnly: true})
	require.NoError(w.t, err)
	for _, d := range debts {
		require.True(w.t, d.Range.End.After(w.clock), "debt %d on %s %s is due at %s and still open after a run", d.ID, d.Model, d.Range, w.clock)
	}
}

func (w *world) deploy(t *testing.T) {
	rt := w.t
	next := w.variant + rapid.IntRange(1, 3).Draw(rt, "variant")
	pols := []promotion.Policy{
		promotion.Default,
		{Name: promotion.TrailingGap, MaxTrailingGapIntervals: rapid.IntRange(0, 2).Draw(rt, "bound")},
		{Name: promotion.CatchUp, MaxAttempts: 1},
		{Name: promotion.Replan, MaxAttempts: 1},
	}
	pol := pols[rapid.IntRange(0, len(pols)-1).Draw(rt, "policy")]
	advances := rapid.IntRange(0, 2).Draw(rt, "advances")

	executetest.WriteFiles(t, w.b.Dir, variantFiles(next))
	w.plans++
	id := fmt.Sprintf("p%d", w.plans)
	p := w.b.Plan(t, id, plan.Prod, w.clock, plan.Options{Policy: pol})
	frontier0 := w.frontier()
	before := w.clock
	var hooks apply.Hooks
	if advances > 0 {
		var execs []time.Time
		for i := 1; i <= advances; i++ {
			execs = append(execs, before.Add(time.Duration(i)*time.Hour))
		}
		done := false
		hooks.AfterBackfill = func(ctx context.Context) error {
			if done { // a replan's later attempts do not run it again
				return nil
			}
			done = true
			for _, e := range execs {
				if _, err := runOnce(ctx, w.b, plan.Prod, e, run.Hooks{}); err != nil {
					return err
				}
				w.observe() // prod served the incumbent's advance
			}
			return nil
		}
		w.clock = execs[len(execs)-1]
	}
	res, err := policyApply(w.b, p, w.clock, nil, hooks)

	// What each policy must do. The parent and child are hourly, so the
	// advances trailing-gap counts are the hours between the incumbents'
	// frontier when the plan was built (behind the clock when debt is
	// still open or no run came since the clock moved) and the last run.
	count := 0
	if advances > 0 {
		count = int(w.clock.Sub(frontier0) / time.Hour)
	}
	wantOK := advances == 0 || pol.Name == promotion.CatchUp || pol.Name == promotion.Replan ||
		pol.Name == promotion.TrailingGap && count <= pol.MaxTrailingGapIntervals
	if !wantOK {
		var perr *promotion.Error
		require.ErrorAs(rt, err, &perr, "policy %s with %d advances", pol, advances)
		want := promotion.IncumbentAdvanced
		if pol.Name == promotion.TrailingGap {
			want = promotion.OverBound
		}
		require.Equal(rt, want, perr.Verdicts[0].Reason)
		if pol.Name == promotion.TrailingGap {
			require.Equal(rt, count, perr.Verdicts[0].Advances)
		}
		executetest.WriteFiles(t, w.b.Dir, variantFiles(w.variant)) // the deploy is abandoned
		return
	}
	require.NoError(rt, err, "policy %s with %d advances", pol, advances)
	var own []state.Debt
	for _, d := range res.Debts {
		if d.CarriedFrom == 0 {
			own = append(own, d)
		}
	}
	if pol.Name == promotion.TrailingGap && advances > 0 {
		require.Len(rt, own, 2, "one debt per model")
	} else {
		require.Empty(rt, own)
	}
	w.variant = next
}

// frontier is the parent's served frontier (the child's is the same: both
// are hourly and run together).
func (w *world) frontier() time.Time {
	served, _ := w.b.Served(w.tt, plan.Prod)
	key := state.VersionKey{Name: "demo.parent", Version: served["demo.parent"].Version}
	cov, err := w.b.Store.GetIntervals(w.b.Ctx, []state.VersionKey{key})
	require.NoError(w.t, err)
	return cov[key].Frontier()
}

// observe raises the high-water marks to what prod serves now.
func (w *world) observe() {
	served, _ := w.b.Served(w.tt, plan.Prod)
	for _, name := range []string{"demo.parent", "demo.child"} {
		key := state.VersionKey{Name: name, Version: served[name].Version}
		cov, err := w.b.Store.GetIntervals(w.b.Ctx, []state.VersionKey{key})
		require.NoError(w.t, err)
		if f := cov[key].Frontier(); f.After(w.highWater[name]) {
			w.highWater[name] = f
		}
	}
}

// check asserts the invariants against state and the served views.
func (w *world) check() {
	rt, b := w.t, w.b
	served, env := b.Served(w.tt, plan.Prod)
	debts, err := b.Store.ListDebts(b.Ctx, state.DebtFilter{Environment: plan.Prod, OpenOnly: true})
	require.NoError(rt, err)
	for _, name := range []string{"demo.parent", "demo.child"} {
		s := served[name]
		cov, err := b.Store.GetIntervals(b.Ctx, []state.VersionKey{{Name: name, Version: s.Version}})
		require.NoError(rt, err)
		have := cov[state.VersionKey{Name: name, Version: s.Version}]
		var owed interval.Set
		for _, d := range debts {
			require.LessOrEqual(rt, d.Advances, d.Bound, "debt %d exceeds its bound", d.ID)
			if d.Model == name {
				require.Equal(rt, s.Version, d.Version, "open debt is on the served version")
				owed = owed.Add(d.Range)
			}
		}
		hw := w.highWater[name]
		lost := have.Union(owed).Missing(interval.NewRange(at(2024, 1, 1, 0), hw))
		require.True(rt, lost.IsEmpty(), "generation %d serves %s without %s, which no debt covers", env.Generation, name, lost)
		if f := have.Frontier(); f.After(hw) {
			w.highWater[name] = f
		}

		// One row per covered hour, with the served variant's values.
		col, expr := "v", fmt.Sprintf("CAST(EXTRACT(HOUR FROM ts) AS INTEGER) + %d", 100*w.variant)
		if name == "demo.child" {
			col, expr = "w", "2 * ("+expr+")"
		}
		rows := b.Rows(w.tt, fmt.Sprintf(`SELECT CAST(count(*) AS BIGINT), CAST(count(DISTINCT ts) AS BIGINT),
			CAST(sum(CASE WHEN %s = %s THEN 0 ELSE 1 END) AS BIGINT) FROM %s`, col, expr, name))
		hours := have.Buckets(interval.Hour)
		wantRows := fmt.Sprintf("%d %d 0", hours, hours)
		if hours == 0 {
			wantRows = "0 0 <nil>"
		}
		require.Equal(rt, []string{wantRows}, rows, "%s: rows, distinct hours, stale rows (covered %s)", name, have)
	}
}
