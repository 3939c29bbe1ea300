package simulate

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/promotion"
	"github.com/gapless-dev/gapless/state"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// small is a quick scenario: a two-model hourly chain with six hours of
// history, six deploys whose backfills take about an hour.
func small(pols ...promotion.Name) Params {
	return Params{Seed: 7, Deploys: 6, DAG: "chain:2", History: 6 * time.Hour, BackfillMean: time.Hour,
		BackfillStddev: 30 * time.Minute, DeployGap: time.Hour, Policies: pols}
}

func simulate(t *testing.T, p Params) *Report {
	t.Helper()
	rep, err := Run(t.Context(), p)
	require.NoError(t, err)
	require.Len(t, rep.Policies, len(p.WithDefaults().Policies))
	return rep
}

func result(t *testing.T, rep *Report, name promotion.Name) PolicyResult {
	t.Helper()
	for _, r := range rep.Policies {
		if strings.HasPrefix(r.Policy, string(name)) {
			return r
		}
	}
	t.Fatalf("no result for %s", name)
	return PolicyResult{}
}

// Scenario: the same parameters (seed included) simulated twice, every
// policy, give byte-identical JSON; another seed gives another scenario.
func TestFixedSeedRunsAreReproducible(t *testing.T) {
	t.Parallel()
	p := small()
	var outs [2]bytes.Buffer
	for i := range outs {
		require.NoError(t, simulate(t, p).WriteJSON(&outs[i]))
	}
	require.Equal(t, outs[0].String(), outs[1].String())

	var rep Report
	require.NoError(t, json.Unmarshal(outs[0].Bytes(), &rep))
	require.Len(t, rep.Policies, 5)
	for _, r := range rep.Policies {
		require.Len(t, r.DeployOutcomes, 6, r.Policy)
		require.Positive(t, r.SchedulerRuns, r.Policy)
	}

	p.Seed = 8
	p.Policies = []promotion.Name{promotion.Strict}
	var other bytes.Buffer
	require.NoError(t, simulate(t, p).WriteJSON(&other))
	require.NotEqual(t, outs[0].String(), other.String())
}

// Scenario (seed 000 under strict): every backfill lasts a cadence plus the
// jitter, so at least one tick falls during each; each tick advances the
// incumbents, and strict fails every deploy as incumbent_advanced. Prod
// keeps its plan, so nothing was accepted.
func TestStrictFailsEveryDeployRacedByTheScheduler(t *testing.T) {
	t.Parallel()
	p := small(promotion.Strict)
	p.BackfillDist, p.BackfillMean, p.BackfillStddev = DistFixed, time.Hour+10*time.Minute, 0
	p.Jitter = 10 * time.Minute
	r := simulate(t, p).Policies[0]
	require.Equal(t, "strict", r.Policy)
	require.Zero(t, r.Promoted)
	require.Zero(t, r.SuccessRate)
	require.Equal(t, map[string]int{string(promotion.IncumbentAdvanced): 6}, r.Failures)
	for _, o := range r.DeployOutcomes {
		require.GreaterOrEqual(t, o.TicksDuringBackfill, 1, o.PlanID)
		require.False(t, o.Promoted, o.PlanID)
		require.Equal(t, string(promotion.IncumbentAdvanced), o.Reason, o.PlanID)
		require.Equal(t, 1, o.Attempts, o.PlanID)
		require.Positive(t, o.PlanIntervals, o.PlanID)
	}
	require.Zero(t, r.Debt.Count)
	require.Zero(t, r.ExtraComputeIntervals)
	require.Equal(t, r.DeployIntervals, r.WastedIntervals, "every deploy's work was wasted")
}

// Scenario (trailing-gap(1)): backfills long enough that some see one tick
// and some two. Every debt recorded counts at most one advance and spans at
// most one interval; deploys raced twice fail as over_bound; the scheduler
// repairs every debt, within about a cadence of its acceptance.
func TestTrailingGapDebtNeverExceedsOneAdvance(t *testing.T) {
	t.Parallel()
	p := small(promotion.TrailingGap)
	p.BackfillMean, p.BackfillStddev = 80*time.Minute, 40*time.Minute
	r := simulate(t, p).Policies[0]
	require.Equal(t, "trailing-gap(1)", r.Policy)
	require.Positive(t, r.Debt.Count)
	for _, d := range r.Debt.Debts {
		require.LessOrEqual(t, d.Advances, 1, d.Model)
		require.LessOrEqual(t, d.Intervals, 1, d.Model)
		require.Equal(t, 1, d.Bound)
		require.False(t, d.RepairedAt.IsZero(), "repaired: %+v", d)
		require.LessOrEqual(t, d.RepairedAt.Sub(d.AcceptedAt), time.Hour+10*time.Minute)
	}
	require.LessOrEqual(t, r.Debt.MaxIntervals, 1)
	require.LessOrEqual(t, r.Debt.MaxAdvances, 1)
	require.Zero(t, r.Debt.OpenAtEnd)
	debts := 0
	for _, o := range r.DeployOutcomes {
		debts += o.Debts
		if !o.Promoted {
			require.Equal(t, string(promotion.OverBound), o.Reason, o.PlanID)
		}
	}
	require.Equal(t, r.Debt.Count, debts)
	require.Zero(t, r.ExtraComputeIntervals)
}

// Scenario (lock): the deploy holds its leases for 90 simulated minutes,
// so ticks fall during the hold and defer the leased models; every deploy
// promotes, none with debt, and the deferred work runs after the release.
func TestLockHasNoDebt(t *testing.T) {
	t.Parallel()
	p := small(promotion.Lock)
	p.LockHold = 90 * time.Minute
	r := simulate(t, p).Policies[0]
	require.Equal(t, "lock", r.Policy)
	require.Equal(t, 6, r.Promoted)
	require.Zero(t, r.Debt.Count)
	require.Empty(t, r.Debt.Debts)
	locked := 0
	for _, o := range r.DeployOutcomes {
		locked += o.TicksDuringLock
	}
	require.Positive(t, locked)
	require.Positive(t, r.Deferred.Intervals)
	require.GreaterOrEqual(t, r.Deferred.Ticks, r.Deferred.Intervals)
	require.Positive(t, r.Deferred.TotalMinutes)
	require.Zero(t, r.Deferred.Unresolved)
}

// Scenario (catch-up and replan): ticks fall during the backfills; both
// policies promote with no debt, and every deploy a tick raced computed
// work beyond its plan (the catch-up round, the replanned tail).
func TestCatchUpAndReplanHaveNoDebtButExtraCompute(t *testing.T) {
	t.Parallel()
	rep := simulate(t, small(promotion.CatchUp, promotion.Replan))
	for _, name := range []promotion.Name{promotion.CatchUp, promotion.Replan} {
		r := result(t, rep, name)
		require.Zero(t, r.Debt.Count, r.Policy)
		require.Positive(t, r.ExtraComputeIntervals, r.Policy)
		raced := 0
		for _, o := range r.DeployOutcomes {
			if o.TicksDuringBackfill == 0 || !o.Promoted {
				continue
			}
			raced++
			require.Positive(t, o.ExtraIntervals, "%s %s", r.Policy, o.PlanID)
			if name == promotion.Replan {
				require.GreaterOrEqual(t, o.Attempts, 2, o.PlanID)
			}
		}
		require.Positive(t, raced, r.Policy)
	}
}

// Scenario: the fan and diamond shapes, and the five-minute and daily
// units, run end to end (their models parse and plan).
func TestShapesAndUnits(t *testing.T) {
	t.Parallel()
	for _, p := range []Params{
		{DAG: "diamond", Deploys: 3, History: 4 * time.Hour, Policies: []promotion.Name{promotion.TrailingGap}},
		{DAG: "fan:3", Deploys: 3, Unit: "five_minute", Cadence: 5 * time.Minute, Jitter: time.Minute,
			BackfillMean: 4 * time.Minute, BackfillStddev: time.Minute, DeployGap: 5 * time.Minute, History: time.Hour,
			LockHold: time.Minute, Policies: []promotion.Name{promotion.Lock}},
		{DAG: "chain:2", Deploys: 2, Unit: "day", Cadence: 24 * time.Hour, Jitter: time.Hour, BackfillMean: 20 * time.Hour,
			DeployGap: 24 * time.Hour, History: 72 * time.Hour, Policies: []promotion.Name{promotion.CatchUp}},
	} {
		r := simulate(t, p).Policies[0]
		require.Len(t, r.DeployOutcomes, p.Deploys, p.DAG)
		require.Positive(t, r.Promoted, p.DAG)
	}
}

// Scenario: parameters the simulator cannot run are refused before
// anything runs, naming the parameter.
func TestInvalidParams(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		p    Params
		want string
	}{
		{Params{DAG: "ring:3"}, `dag "ring:3"`},
		{Params{DAG: "chain:0"}, "size"},
		{Params{Unit: "month"}, "unit"},
		{Params{Jitter: 2 * time.Hour}, "jitter"},
		{Params{BackfillDist: "pareto"}, "distribution"},
		{Params{Policies: []promotion.Name{"yolo"}}, "yolo"},
	} {
		_, err := Run(t.Context(), tc.p)
		require.ErrorIs(t, err, ErrInvalid)
		require.ErrorContains(t, err, tc.want)
	}
}

// Scenario: a debt carried to a later version counts once, with its
// original, and its repair latency runs from the original acceptance to
// the carried debt's repair; an open debt counts as open at the end.
func TestDebtStatsFollowCarriedDebts(t *testing.T) {
	t.Parallel()
	at := func(h int) time.Time { return time.Date(2024, 1, 2, h, 0, 0, 0, time.UTC) }
	hour := func(h int) interval.Range { return interval.NewRange(at(h), at(h+1)) }
	debts := []state.Debt{
		{ID: 1, Model: "m", Range: hour(10), Advances: 1, Bound: 1, AcceptedAt: at(11), SupersededAt: at(12)},
		{ID: 2, Model: "m", Range: hour(10), Advances: 1, Bound: 1, AcceptedAt: at(12), RepairedAt: at(13), CarriedFrom: 1},
		{ID: 3, Model: "n", Range: interval.NewRange(at(14), at(16)), Advances: 1, Bound: 2, AcceptedAt: at(16).Add(30 * time.Minute),
			RepairedAt: at(17)},
		{ID: 4, Model: "o", Range: hour(20), Advances: 1, Bound: 1, AcceptedAt: at(21)},
	}
	s := debtStats(debts, interval.Hour)
	require.Equal(t, 3, s.Count)
	require.Equal(t, 1, s.OpenAtEnd)
	require.Equal(t, 2, s.MaxIntervals)
	require.InDelta(t, 4.0/3, s.MeanIntervals, 0.001)
	require.InDelta(t, 120, s.MaxMinutes, 0.001)
	require.InDelta(t, (120+30)/2.0, s.RepairLatencyMeanMinutes, 0.001)
	require.InDelta(t, 120, s.RepairLatencyMaxMinutes, 0.001)
	require.Equal(t, at(13), s.Debts[0].RepairedAt)
	require.True(t, s.Debts[2].RepairedAt.IsZero())
}

// Scenario: the chart is a PNG.
func TestChartIsAPNG(t *testing.T) {
	t.Parallel()
	rep := &Report{Params: paramsReport(Defaults.WithDefaults(), 3)}
	for i, n := range promotion.Names {
		rep.Policies = append(rep.Policies, PolicyResult{Policy: string(n), Deploys: 4, Promoted: i, SuccessRate: float64(i) / 4,
			ExtraComputeIntervals: i * 3, Deferred: DeferredStats{TotalMinutes: float64(i * 10)}})
	}
	var buf bytes.Buffer
	require.NoError(t, rep.WriteChart(&buf))
	require.Equal(t, "\x89PNG\r\n\x1a\n", buf.String()[:8])
}
