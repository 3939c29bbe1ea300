package apply_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/promotion"
	"github.com/gapless-dev/gapless/run"
	"github.com/gapless-dev/gapless/state"
)

// raceModel is an hourly model both DuckDB and PostgreSQL run; header
// holds extra MODEL properties, valueExpr computes v from the hour.
func raceModel(name, header, valueExpr string) string {
	return fmt.Sprintf(`MODEL (
  name %s,
  kind INCREMENTAL_BY_TIME_RANGE (time_column ts),
  cron '@hourly',
  start '2024-01-01'%s
);
SELECT g.ts AS ts, %s AS v
FROM generate_series(@start_ts, @end_ts, INTERVAL '1 hour') AS g(ts)`, name, header, valueExpr)
}

// childModel is an hourly child of demo.parent; kindExtra adds kind
// properties.
func childModel(kindExtra string) string {
	return `MODEL (
  name demo.child,
  kind INCREMENTAL_BY_TIME_RANGE (time_column ts` + kindExtra + `),
  cron '@hourly',
  start '2024-01-01'
);
SELECT p.ts AS ts, p.v * 2 AS w FROM demo.parent AS p WHERE p.ts BETWEEN @start_ts AND @end_ts`
}

const hourExpr = "CAST(EXTRACT(HOUR FROM g.ts) AS INTEGER)"

// seedFiles is seed 000's DAG: an hourly parent and its hourly child.
func seedFiles(childKind string) map[string]string {
	return map[string]string{
		"models/parent.sql": raceModel("demo.parent", "", hourExpr),
		"models/child.sql":  childModel(childKind),
	}
}

// onBoth runs a scenario on DuckDB+SQLite and on PostgreSQL+PostgreSQL.
func onBoth(t *testing.T, files map[string]string, scenario func(t *testing.T, b *executetest.Bundle)) {
	t.Helper()
	t.Run("duckdb+sqlite", func(t *testing.T) {
		t.Parallel()
		scenario(t, executetest.Setup(t, false, files))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		scenario(t, executetest.SetupPostgres(t, false, files))
	})
}

// policyApply applies p under pol (nil: what p recorded) at the clock now,
// with a replanner that rebuilds from the plan's own snapshots.
func policyApply(b *executetest.Bundle, p *plan.Plan, now time.Time, pol *promotion.Policy, hooks apply.Hooks) (*apply.Result, error) {
	return policyApplyEvents(b, p, now, pol, hooks, nil)
}

// policyApplyEvents is policyApply with every apply event passed to onEvent.
func policyApplyEvents(b *executetest.Bundle, p *plan.Plan, now time.Time, pol *promotion.Policy, hooks apply.Hooks, onEvent func(apply.Event)) (*apply.Result, error) {
	return apply.Apply(b.Ctx, apply.Params{
		Plan: p, Store: b.Store, Engine: b.Engine, Parser: b.Parser, ProjectDir: b.Dir,
		Clock: clockwork.NewFakeClockAt(now), Logger: quiet, Hooks: hooks, Policy: pol, OnEvent: onEvent,
		Replan: b.Replanner(p.ID + "-r"),
	})
}

// runAt runs the scheduler for prod at exec.
func runAt(t *testing.T, ctx context.Context, b *executetest.Bundle, exec time.Time) *run.Result {
	t.Helper()
	res, err := runOnce(ctx, b, plan.Prod, exec, run.Hooks{})
	require.NoError(t, err)
	return res
}

// advanceOnce is an AfterBackfill hook that runs the scheduler at each of
// execs, once (a replan's second apply does not run it again).
func advanceOnce(t *testing.T, b *executetest.Bundle, execs ...time.Time) apply.Hooks {
	var once sync.Once
	return apply.Hooks{AfterBackfill: func(ctx context.Context) error {
		once.Do(func() {
			for _, e := range execs {
				runAt(t, ctx, b, e)
			}
		})
		return nil
	}}
}

// seedRace sets up seed 000's race: p1 serves parent and child through
// 10:00; a breaking change to the parent is planned at 10:00 as p2 (so the
// child changes indirectly), under pol.
func seedRace(t *testing.T, b *executetest.Bundle, pol promotion.Policy) *plan.Plan {
	t.Helper()
	p1 := b.Plan(t, "p1", plan.Prod, at(2024, 1, 1, 10), plan.Options{})
	_, err := policyApply(b, p1, at(2024, 1, 1, 10), nil, apply.Hooks{})
	require.NoError(t, err)
	executetest.WriteFiles(t, b.Dir, map[string]string{"models/parent.sql": raceModel("demo.parent", "", hourExpr+" + 100")})
	p2 := b.Plan(t, "p2", plan.Prod, at(2024, 1, 1, 10), plan.Options{Policy: pol})
	require.NotEmpty(t, p2.Incumbents)
	return p2
}

func servedIntervals(t *testing.T, b *executetest.Bundle, name string) string {
	t.Helper()
	served, _ := b.Served(t, plan.Prod)
	return b.Intervals(t, name, served[name].Version)
}

func events(t *testing.T, b *executetest.Bundle, kind string) []state.Event {
	t.Helper()
	evs, err := b.Store.ListEvents(b.Ctx, state.EventFilter{Kinds: []string{kind}})
	require.NoError(t, err)
	return evs
}

func rejection(t *testing.T, err error) *promotion.Error {
	t.Helper()
	var perr *promotion.Error
	require.ErrorAs(t, err, &perr)
	return perr
}

func reasons(perr *promotion.Error) map[string]promotion.Reason {
	out := map[string]promotion.Reason{}
	for _, v := range perr.Verdicts {
		out[v.Model] = v.Reason
	}
	return out
}

const (
	throughTen    = "{[2024-01-01T00:00:00Z, 2024-01-01T10:00:00Z)}"
	throughEleven = "{[2024-01-01T00:00:00Z, 2024-01-01T11:00:00Z)}"
)

// Scenario (seed 000, strict): the replacement is built through 10:00; the
// scheduler advances the incumbent through 11:00 before promotion. Strict
// refuses both models as incumbent_advanced, names the one-hour suffix,
// both frontiers and the policies that would help, records one rejection
// event per model, and prod keeps serving p1.
func TestPolicyStrictRefusesTheSeedRace(t *testing.T) {
	t.Parallel()
	onBoth(t, seedFiles(""), func(t *testing.T, b *executetest.Bundle) {
		p2 := seedRace(t, b, promotion.Policy{Name: promotion.Strict})
		_, err := policyApply(b, p2, at(2024, 1, 1, 11), nil, advanceOnce(t, b, at(2024, 1, 1, 11)))
		perr := rejection(t, err)
		require.Equal(t, map[string]promotion.Reason{"demo.parent": promotion.IncumbentAdvanced, "demo.child": promotion.IncumbentAdvanced}, reasons(perr))
		v := perr.Verdicts[0]
		require.Equal(t, "[2024-01-01T10:00:00Z, 2024-01-01T11:00:00Z)", v.Suffix.String())
		require.Equal(t, at(2024, 1, 1, 10), v.FrontierAtPlan)
		require.Equal(t, at(2024, 1, 1, 11), v.FrontierNow)
		require.Equal(t, 1, v.Advances)
		require.Contains(t, err.Error(), "--on-incumbent-advance trailing-gap --max-trailing-gap-intervals 1")

		env, err := b.Store.GetEnvironment(b.Ctx, plan.Prod)
		require.NoError(t, err)
		require.Equal(t, "p1", env.PlanID)
		rej := events(t, b, state.EventPromotionRejected)
		require.Len(t, rej, 2)
		require.Equal(t, string(promotion.IncumbentAdvanced), rej[0].Reason)
		require.Contains(t, string(rej[0].Data), `"advances":1`)
		debts, err := b.Store.ListDebts(b.Ctx, state.DebtFilter{})
		require.NoError(t, err)
		require.Empty(t, debts)
	})
}

// Scenario (seed 000, trailing-gap(1)): the same race promotes, accepting
// one hour of debt per model, recorded with the plan, policy, bound and
// count. Prod serves the replacement through 10:00. The next run repairs
// the hour: the debts show repaired-at, and prod serves the new values
// through 11:00, parent and child consistent.
func TestPolicyTrailingGapAcceptsAndTheNextRunRepairs(t *testing.T) {
	t.Parallel()
	onBoth(t, seedFiles(""), func(t *testing.T, b *executetest.Bundle) {
		p2 := seedRace(t, b, promotion.Policy{Name: promotion.TrailingGap, MaxTrailingGapIntervals: 1})
		res, err := policyApply(b, p2, at(2024, 1, 1, 11), nil, advanceOnce(t, b, at(2024, 1, 1, 11)))
		require.NoError(t, err)
		require.Equal(t, "trailing-gap(1)", res.Policy)
		require.Len(t, res.Debts, 2)
		for _, d := range res.Debts {
			require.Equal(t, "[2024-01-01T10:00:00Z, 2024-01-01T11:00:00Z)", d.Range.String())
			require.Equal(t, "p2", d.PlanID)
			require.Equal(t, "trailing-gap", d.Policy)
			require.Equal(t, 1, d.Bound)
			require.Equal(t, 1, d.Advances)
			require.Equal(t, at(2024, 1, 1, 11), d.AcceptedAt)
			require.True(t, d.Open())
		}
		require.Equal(t, throughTen, servedIntervals(t, b, "demo.parent"), "the suffix stays missing in state")
		require.Equal(t, []string{"10"}, b.Rows(t, "SELECT CAST(count(*) AS BIGINT) FROM demo.parent"))
		require.Len(t, events(t, b, state.EventGapAccepted), 2)

		runAt(t, b.Ctx, b, at(2024, 1, 1, 11).Add(5*time.Minute))
		require.Equal(t, throughEleven, servedIntervals(t, b, "demo.parent"))
		require.Equal(t, throughEleven, servedIntervals(t, b, "demo.child"))
		debts, err := b.Store.ListDebts(b.Ctx, state.DebtFilter{Environment: plan.Prod})
		require.NoError(t, err)
		require.Len(t, debts, 2)
		for _, d := range debts {
			require.Equal(t, at(2024, 1, 1, 11).Add(5*time.Minute), d.RepairedAt, d.Model)
		}
		require.Len(t, events(t, b, state.EventGapRepaired), 2)
		require.Equal(t, []string{"11 1155"}, b.Rows(t, "SELECT CAST(count(*) AS BIGINT), CAST(sum(v) AS BIGINT) FROM demo.parent"))
		require.Equal(t, []string{"11 2310"}, b.Rows(t, "SELECT CAST(count(*) AS BIGINT), CAST(sum(w) AS BIGINT) FROM demo.child"))
	})
}

// Scenario (seed 000, catch-up): the same race promotes with no gap: the
// catch-up round fills the parent's and the child's new hour before the
// strict check, reports it as catch-up work (not plan work), and records
// it in the application history.
func TestPolicyCatchUpPromotesWithNoGap(t *testing.T) {
	t.Parallel()
	onBoth(t, seedFiles(""), func(t *testing.T, b *executetest.Bundle) {
		p2 := seedRace(t, b, promotion.Policy{Name: promotion.CatchUp, MaxAttempts: 2})
		res, err := policyApply(b, p2, at(2024, 1, 1, 11), nil, advanceOnce(t, b, at(2024, 1, 1, 11)))
		require.NoError(t, err)
		require.Equal(t, "catch-up(2)", res.Policy)
		require.Empty(t, res.Debts)
		require.Len(t, res.CatchUp, 1)
		got := map[string]string{}
		for _, m := range res.CatchUp[0].Models {
			got[m.Model] = m.Recorded.String()
		}
		tail := "{[2024-01-01T10:00:00Z, 2024-01-01T11:00:00Z)}"
		require.Equal(t, map[string]string{"demo.parent": tail, "demo.child": tail}, got)
		for _, m := range res.Models {
			require.Equal(t, throughTen, m.Recorded.String(), "the plan's own work kept its bounds: %s", m.Model)
		}
		require.Equal(t, throughEleven, servedIntervals(t, b, "demo.parent"))
		require.Equal(t, throughEleven, servedIntervals(t, b, "demo.child"))
		require.Equal(t, []string{"11 2310"}, b.Rows(t, "SELECT CAST(count(*) AS BIGINT), CAST(sum(w) AS BIGINT) FROM demo.child"))
		require.Len(t, events(t, b, state.EventCatchUp), 2)
		apps, err := b.Store.ListApplications(b.Ctx, "p2")
		require.NoError(t, err)
		var stages []string
		for _, a := range apps {
			if a.Stage == string(apply.StageCatchUp) {
				stages = append(stages, a.Status)
			}
		}
		require.Equal(t, []string{apply.StatusStarted, apply.StatusFinished}, stages)
	})
}

// Scenario (catch-up, exhausted): the scheduler advances the incumbent
// again after every catch-up round (a BeforeModel hook on the catch-up's
// parent work runs it). With one attempt, the promotion fails as
// attempts_exhausted, naming the last gap.
func TestPolicyCatchUpGivesUpAfterItsAttempts(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, false, seedFiles(""))
	p2 := seedRace(t, b, promotion.Policy{Name: promotion.CatchUp, MaxAttempts: 1})
	var mu sync.Mutex
	calls := 0
	hooks := advanceOnce(t, b, at(2024, 1, 1, 11))
	hooks.BeforeModel = func(ctx context.Context, model string) error {
		mu.Lock()
		defer mu.Unlock()
		if model == "demo.parent" {
			calls++
			if calls == 2 { // the catch-up round's parent work
				_, err := runOnce(ctx, b, plan.Prod, at(2024, 1, 1, 12), run.Hooks{})
				return err
			}
		}
		return nil
	}
	_, err := policyApply(b, p2, at(2024, 1, 1, 12), nil, hooks)
	perr := rejection(t, err)
	require.Equal(t, promotion.AttemptsExhausted, perr.Verdicts[0].Reason)
	require.Equal(t, "[2024-01-01T11:00:00Z, 2024-01-01T12:00:00Z)", perr.Verdicts[0].Suffix.String())
	require.Contains(t, err.Error(), "raise --max-attempts")
	env, err := b.Store.GetEnvironment(b.Ctx, plan.Prod)
	require.NoError(t, err)
	require.Equal(t, "p1", env.PlanID)
}

// Scenario (seed 000, replan): the same race promotes with no gap: the
// refused plan is followed by a fresh plan for the same snapshots and
// options, which backfills only the one-hour tail and promotes.
func TestPolicyReplanPromotesWithOnlyTheTail(t *testing.T) {
	t.Parallel()
	onBoth(t, seedFiles(""), func(t *testing.T, b *executetest.Bundle) {
		p2 := seedRace(t, b, promotion.Policy{Name: promotion.Replan, MaxAttempts: 2})
		var mu sync.Mutex
		var failed []apply.StageFailed
		res, err := policyApplyEvents(b, p2, at(2024, 1, 1, 11), nil, advanceOnce(t, b, at(2024, 1, 1, 11)), func(e apply.Event) {
			if f, ok := e.(apply.StageFailed); ok {
				mu.Lock()
				failed = append(failed, f)
				mu.Unlock()
			}
		})
		require.NoError(t, err)
		require.Len(t, failed, 1, "the first plan's promotion was refused")
		require.True(t, failed[0].Replanning, "a refusal replan acts on is a warning, not an error")
		require.Equal(t, apply.StagePromote, failed[0].Stage)
		require.Len(t, res.Attempts, 2)
		require.Equal(t, "p2", res.Attempts[0].PlanID)
		require.Contains(t, res.Attempts[0].Err, string(promotion.IncumbentAdvanced))
		require.Equal(t, "p2-r1", res.Attempts[1].PlanID)
		require.Empty(t, res.Attempts[1].Err)
		tail := map[string]string{}
		for _, m := range res.Attempts[1].Models {
			tail[m.Model] = m.Recorded.String()
		}
		want := "{[2024-01-01T10:00:00Z, 2024-01-01T11:00:00Z)}"
		require.Equal(t, map[string]string{"demo.parent": want, "demo.child": want}, tail, "the replan backfilled only the tail")
		env, err := b.Store.GetEnvironment(b.Ctx, plan.Prod)
		require.NoError(t, err)
		require.Equal(t, "p2-r1", env.PlanID)
		require.Equal(t, throughEleven, servedIntervals(t, b, "demo.parent"))
		require.Equal(t, []string{"11 2310"}, b.Rows(t, "SELECT CAST(count(*) AS BIGINT), CAST(sum(w) AS BIGINT) FROM demo.child"))
		require.Len(t, events(t, b, state.EventReplan), 1)
	})
}

// Scenario: two scheduler advances (11:00 and 12:00) under trailing-gap(1)
// are over the bound; the error names the count and the flag value that
// would have accepted it.
func TestPolicyTrailingGapRejectsOverTheBound(t *testing.T) {
	t.Parallel()
	onBoth(t, seedFiles(""), func(t *testing.T, b *executetest.Bundle) {
		p2 := seedRace(t, b, promotion.Policy{Name: promotion.TrailingGap, MaxTrailingGapIntervals: 1})
		_, err := policyApply(b, p2, at(2024, 1, 1, 12), nil, advanceOnce(t, b, at(2024, 1, 1, 11), at(2024, 1, 1, 12)))
		perr := rejection(t, err)
		require.Equal(t, promotion.OverBound, perr.Verdicts[0].Reason)
		require.Equal(t, 2, perr.Verdicts[0].Advances)
		require.Contains(t, err.Error(), "--max-trailing-gap-intervals 2 would accept it")
		debts, err := b.Store.ListDebts(b.Ctx, state.DebtFilter{})
		require.NoError(t, err)
		require.Empty(t, debts)
	})
}

// Scenario: gaps that are not a post-plan trailing suffix are refused under
// trailing-gap with any bound: an hour missing before the plan-time frontier
// (historical_gap), and a post-plan hour missing before a covered one
// (internal_gap).
func TestPolicyTrailingGapRejectsHistoricalAndInternalGaps(t *testing.T) {
	t.Parallel()
	onBoth(t, seedFiles(""), func(t *testing.T, b *executetest.Bundle) {
		p2 := seedRace(t, b, promotion.Policy{Name: promotion.TrailingGap, MaxTrailingGapIntervals: 5})
		replParent := state.VersionKey{Name: "demo.parent", Version: p2.Snapshots[0].Version}
		require.Equal(t, "demo.parent", p2.Snapshots[0].Name)
		hooks := advanceOnce(t, b, at(2024, 1, 1, 11), at(2024, 1, 1, 12))
		after := hooks.AfterBackfill
		hooks.AfterBackfill = func(ctx context.Context) error {
			require.NoError(t, after(ctx))
			return b.Store.RemoveIntervals(ctx, state.IntervalsParams{Key: replParent,
				Ranges: interval.NewSet(interval.NewRange(at(2024, 1, 1, 5), at(2024, 1, 1, 6))), Now: at(2024, 1, 1, 12)})
		}
		_, err := policyApply(b, p2, at(2024, 1, 1, 12), nil, hooks)
		require.Equal(t, promotion.HistoricalGap, reasons(rejection(t, err))["demo.parent"])
		require.Contains(t, err.Error(), "no policy accepts a historical gap")

		// Repair the hole, then leave [10, 11) missing but [11, 12) covered.
		require.NoError(t, b.Store.AddIntervals(b.Ctx, state.IntervalsParams{Key: replParent, Now: at(2024, 1, 1, 12),
			Ranges: interval.NewSet(interval.NewRange(at(2024, 1, 1, 5), at(2024, 1, 1, 6)), interval.NewRange(at(2024, 1, 1, 11), at(2024, 1, 1, 12)))}))
		_, err = policyApply(b, p2, at(2024, 1, 1, 12), nil, apply.Hooks{})
		require.Equal(t, promotion.InternalGap, reasons(rejection(t, err))["demo.parent"])
	})
}

// Scenario: a breaking change that also changes the parent's cron (hourly
// to every two hours) leaves advance boundaries ambiguous: trailing-gap
// refuses it as schedule_changed even within a generous bound.
func TestPolicyTrailingGapRejectsAChangedSchedule(t *testing.T) {
	t.Parallel()
	onBoth(t, seedFiles(""), func(t *testing.T, b *executetest.Bundle) {
		p1 := b.Plan(t, "p1", plan.Prod, at(2024, 1, 1, 10), plan.Options{})
		_, err := policyApply(b, p1, at(2024, 1, 1, 10), nil, apply.Hooks{})
		require.NoError(t, err)
		src := strings.Replace(raceModel("demo.parent", "", hourExpr+" + 100"), "cron '@hourly'", "cron '0 */2 * * *'", 1)
		executetest.WriteFiles(t, b.Dir, map[string]string{"models/parent.sql": src})
		p2 := b.Plan(t, "p2", plan.Prod, at(2024, 1, 1, 10), plan.Options{})
		_, err = policyApply(b, p2, at(2024, 1, 1, 11), &promotion.Policy{Name: promotion.TrailingGap, MaxTrailingGapIntervals: 5},
			advanceOnce(t, b, at(2024, 1, 1, 11)))
		require.Equal(t, promotion.ScheduleChanged, reasons(rejection(t, err))["demo.parent"])
	})
}

// Scenario: the child's new version already has rows over the parent's
// trailing hour (here written by another environment sharing the version).
// Filling the parent later would not recompute them, so trailing-gap
// refuses the parent as downstream_covered, naming the child.
func TestPolicyTrailingGapRejectsACoveredChild(t *testing.T) {
	t.Parallel()
	onBoth(t, seedFiles(""), func(t *testing.T, b *executetest.Bundle) {
		p2 := seedRace(t, b, promotion.Policy{Name: promotion.TrailingGap, MaxTrailingGapIntervals: 1})
		child := state.VersionKey{Name: "demo.child", Version: p2.Snapshots[1].Version}
		require.Equal(t, "demo.child", p2.Snapshots[1].Name)
		hooks := advanceOnce(t, b, at(2024, 1, 1, 11))
		after := hooks.AfterBackfill
		hooks.AfterBackfill = func(ctx context.Context) error {
			require.NoError(t, after(ctx))
			return b.Store.AddIntervals(ctx, state.IntervalsParams{Key: child, Now: at(2024, 1, 1, 11),
				Ranges: interval.NewSet(interval.NewRange(at(2024, 1, 1, 10), at(2024, 1, 1, 11)))})
		}
		_, err := policyApply(b, p2, at(2024, 1, 1, 11), nil, hooks)
		perr := rejection(t, err)
		require.Equal(t, promotion.DownstreamCovered, perr.Verdicts[0].Reason)
		require.Equal(t, "demo.child", perr.Verdicts[0].Child)
		require.Contains(t, err.Error(), "downstream model demo.child already has rows")
	})
}

// Scenario: the child is forward-only, so the parent's breaking change
// leaves it on its production table, which the scheduler advanced through
// 11:00 with the old parent's values. That is the intended exception to
// the downstream guard: trailing-gap(1) promotes, the child keeps its
// historical rows (hour 10 from the old parent), and its next scheduled
// hour reads the new parent.
func TestPolicyTrailingGapAcceptsAForwardOnlyChild(t *testing.T) {
	t.Parallel()
	onBoth(t, seedFiles(", forward_only true"), func(t *testing.T, b *executetest.Bundle) {
		p2 := seedRace(t, b, promotion.Policy{Name: promotion.TrailingGap, MaxTrailingGapIntervals: 1})
		res, err := policyApply(b, p2, at(2024, 1, 1, 11), nil, advanceOnce(t, b, at(2024, 1, 1, 11)))
		require.NoError(t, err)
		require.Len(t, res.Debts, 1)
		require.Equal(t, "demo.parent", res.Debts[0].Model)

		runAt(t, b.Ctx, b, at(2024, 1, 1, 12))
		require.Equal(t, "{[2024-01-01T00:00:00Z, 2024-01-01T12:00:00Z)}", servedIntervals(t, b, "demo.child"))
		require.Equal(t, []string{"10 20", "11 222", "9 18"},
			b.Rows(t, "SELECT CAST(EXTRACT(HOUR FROM ts) AS INTEGER), CAST(w AS BIGINT) FROM demo.child WHERE ts >= '2024-01-01 09:00:00'"),
			"hours 9 and 10 from the old parent (kept), hour 11 from the new one")
		require.Equal(t, []string{"12"}, b.Rows(t, "SELECT CAST(count(*) AS BIGINT) FROM demo.child"), "no hour duplicated")
		debts, err := b.Store.ListDebts(b.Ctx, state.DebtFilter{OpenOnly: true})
		require.NoError(t, err)
		require.Empty(t, debts)
	})
}

// Scenario: advances are counted on the cron, not in buckets or lookback.
// A daily model firing at 12:00 advanced one day is one advance; a model
// on an hourly unit firing every two hours advanced two hours is one
// advance; an hourly model with lookback 3 advanced one hour (recomputing
// four) is one advance. Each is accepted under trailing-gap(1).
func TestPolicyTrailingGapCountsAdvancesOnTheCron(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, header, cron string
		built, plan, now   time.Time
		suffix             string
	}{
		{"daily at noon", "", "'0 12 * * *'", at(2024, 1, 5, 13), at(2024, 1, 5, 13), at(2024, 1, 6, 12),
			"[2024-01-05T00:00:00Z, 2024-01-06T00:00:00Z)"},
		{"two-hourly on hours", "", "'0 */2 * * *'", at(2024, 1, 1, 10), at(2024, 1, 1, 10), at(2024, 1, 1, 12),
			"[2024-01-01T10:00:00Z, 2024-01-01T12:00:00Z)"},
		{"lookback", ",\n  kind INCREMENTAL_BY_TIME_RANGE (time_column ts, lookback 3)", "'@hourly'", at(2024, 1, 1, 10), at(2024, 1, 1, 10), at(2024, 1, 1, 11),
			"[2024-01-01T10:00:00Z, 2024-01-01T11:00:00Z)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := func(expr string) string {
				s := raceModel("demo.m", "", expr)
				s = strings.Replace(s, "cron '@hourly'", "cron "+tc.cron, 1)
				if tc.name == "daily at noon" {
					s = strings.Replace(s, "cron ", "interval_unit 'day',\n  cron ", 1)
				}
				if tc.header != "" {
					s = strings.Replace(s, "  kind INCREMENTAL_BY_TIME_RANGE (time_column ts),\n", "", 1)
					s = strings.Replace(s, "start '2024-01-01'", "start '2024-01-01'"+tc.header, 1)
				}
				return s
			}
			onBoth(t, map[string]string{"models/m.sql": src(hourExpr)}, func(t *testing.T, b *executetest.Bundle) {
				p1 := b.Plan(t, "p1", plan.Prod, tc.built, plan.Options{})
				_, err := policyApply(b, p1, tc.built, nil, apply.Hooks{})
				require.NoError(t, err)
				executetest.WriteFiles(t, b.Dir, map[string]string{"models/m.sql": src(hourExpr + " + 100")})
				p2 := b.Plan(t, "p2", plan.Prod, tc.plan, plan.Options{Policy: promotion.Policy{Name: promotion.TrailingGap, MaxTrailingGapIntervals: 1}})
				res, err := policyApply(b, p2, tc.now, nil, advanceOnce(t, b, tc.now))
				require.NoError(t, err)
				require.Len(t, res.Debts, 1)
				require.Equal(t, tc.suffix, res.Debts[0].Range.String())
				require.Equal(t, 1, res.Debts[0].Advances)
			})
		})
	}
}

// Scenario: two deploys of different changes race for prod under
// trailing-gap; both backfill, the scheduler advances the incumbent, and
// both try to promote at once. Exactly one promotes; the other fails with
// state.ErrConflictingPlan (recorded as a conflicting_plan rejection) and
// writes no debt.
func TestPolicyTwoDeploysRaceExactlyOnePromotes(t *testing.T) {
	t.Parallel()
	onBoth(t, seedFiles(""), func(t *testing.T, b *executetest.Bundle) {
		pol := promotion.Policy{Name: promotion.TrailingGap, MaxTrailingGapIntervals: 1}
		p2 := seedRace(t, b, pol)
		executetest.WriteFiles(t, b.Dir, map[string]string{"models/parent.sql": raceModel("demo.parent", "", hourExpr+" + 200")})
		p3 := b.Plan(t, "p3", plan.Prod, at(2024, 1, 1, 10), plan.Options{Policy: pol})
		runAt(t, b.Ctx, b, at(2024, 1, 1, 11))

		// Both backfill, then both promote: neither promotes before the
		// other has finished its backfill.
		var arrived, wg sync.WaitGroup
		arrived.Add(2)
		errs := make([]error, 2)
		for i, p := range []*plan.Plan{p2, p3} {
			wg.Go(func() {
				_, errs[i] = policyApply(b, p, at(2024, 1, 1, 11), nil, apply.Hooks{AfterBackfill: func(context.Context) error {
					arrived.Done()
					arrived.Wait()
					return nil
				}})
			})
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			if err == nil {
				won++
				continue
			}
			require.ErrorIs(t, err, state.ErrConflictingPlan)
		}
		require.Equal(t, 1, won)
		env, err := b.Store.GetEnvironment(b.Ctx, plan.Prod)
		require.NoError(t, err)
		debts, err := b.Store.ListDebts(b.Ctx, state.DebtFilter{})
		require.NoError(t, err)
		require.Len(t, debts, 2)
		for _, d := range debts {
			require.Equal(t, env.PlanID, d.PlanID, "only the winner's debt")
		}
		rej := events(t, b, state.EventPromotionRejected)
		require.Len(t, rej, 1)
		require.Equal(t, string(promotion.ConflictingPlan), rej[0].Reason)
	})
}
