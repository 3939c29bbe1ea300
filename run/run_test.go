package run_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/run"
	"github.com/gapless-dev/gapless/state"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var at = executetest.At

var quiet = slog.New(slog.DiscardHandler)

func doApply(ctx context.Context, b *executetest.Bundle, p *plan.Plan, now time.Time) error {
	_, err := apply.Apply(ctx, apply.Params{Plan: p, Store: b.Store, Engine: b.Engine, Parser: b.Parser,
		ProjectDir: b.Dir, Clock: clockwork.NewFakeClockAt(now), Logger: quiet})
	return err
}

func runOnce(ctx context.Context, b *executetest.Bundle, env string, exec time.Time, sel []string, hooks run.Hooks) (*run.Result, error) {
	return run.Once(ctx, run.Params{Env: env, ExecutionTime: exec, Select: sel, Store: b.Store, Engine: b.Engine,
		Parser: b.Parser, ProjectDir: b.Dir, Clock: clockwork.NewFakeClockAt(exec), Logger: quiet, Hooks: hooks})
}

func setupProd(t *testing.T) *executetest.Bundle {
	t.Helper()
	b := executetest.Setup(t, true, nil)
	p := b.Plan(t, "p1", plan.Prod, at(2024, 1, 3, 0), plan.Options{})
	require.NoError(t, doApply(b.Ctx, b, p, at(2024, 1, 3, 0)))
	return b
}

func byModel(res *run.Result) map[string]run.ModelResult {
	out := map[string]run.ModelResult{}
	for _, m := range res.Models {
		out[m.Model] = m
	}
	return out
}

// Scenario: a day after the first apply, the scheduler runs prod once at
// 00:30: the hourly events gain a day, then the daily rollup (whose parent
// now covers it), then the FULL totals are rebuilt; prod's views serve the
// new rows.
func TestRunAdvancesEveryModelInDAGOrder(t *testing.T) {
	t.Parallel()
	b := setupProd(t)
	res, err := runOnce(b.Ctx, b, plan.Prod, time.Date(2024, 1, 4, 0, 30, 0, 0, time.UTC), nil, run.Hooks{})
	require.NoError(t, err)
	require.Equal(t, int64(1), res.Generation)
	got := byModel(res)
	require.Equal(t, 1, got["demo.events"].Batches)
	require.Equal(t, 1, got["demo.daily_revenue"].Batches)
	require.True(t, got["demo.daily_revenue"].Waiting.IsEmpty())

	served, _ := b.Served(t, plan.Prod)
	three := "{[2024-01-01T00:00:00Z, 2024-01-04T00:00:00Z)}"
	require.Equal(t, three, b.Intervals(t, "demo.events", served["demo.events"].Version))
	require.Equal(t, three, b.Intervals(t, "demo.daily_revenue", served["demo.daily_revenue"].Version))
	require.Equal(t, int64(864), b.Count(t, "demo.events"))
	require.Equal(t, int64(15), b.Count(t, "demo.daily_revenue"))
	require.Equal(t, []string{"864"}, b.Rows(t, "SELECT sum(events)::BIGINT FROM demo.customer_totals"))

	// Nothing is due again at the same time: only the example's model
	// reading its source, raw.orders, which has not landed, still waits.
	res, err = runOnce(b.Ctx, b, plan.Prod, time.Date(2024, 1, 4, 0, 30, 0, 0, time.UTC), nil, run.Hooks{})
	require.NoError(t, err)
	require.Len(t, res.Models, 1)
	require.Equal(t, "demo.orders_hourly", res.Models[0].Model)
	require.Zero(t, res.Models[0].Batches)
	require.Equal(t, []string{"waiting on raw.orders (not landed yet)"}, res.Models[0].WaitingOn)
}

// Scenario: a run selecting only the rollup does not compute its parent; the
// rollup's due days wait for events to cover them, and nothing is written.
func TestChildWaitsForItsParents(t *testing.T) {
	t.Parallel()
	b := setupProd(t)
	res, err := runOnce(b.Ctx, b, plan.Prod, at(2024, 1, 5, 0), []string{"demo.daily_revenue"}, run.Hooks{})
	require.NoError(t, err)
	got := byModel(res)
	require.Equal(t, "{[2024-01-03T00:00:00Z, 2024-01-05T00:00:00Z)}", got["demo.daily_revenue"].Waiting.String())
	require.Zero(t, got["demo.daily_revenue"].Batches)
	require.Equal(t, int64(10), b.Count(t, "demo.daily_revenue"))

	// A full run at a time when events cover only part of a day leaves that
	// day waiting too.
	_, err = runOnce(b.Ctx, b, plan.Prod, at(2024, 1, 5, 0), nil, run.Hooks{})
	require.NoError(t, err)
	require.Equal(t, int64(20), b.Count(t, "demo.daily_revenue"))
}

// Scenario: a run starts at generation 1; before it reaches events, a plan
// replacing events is applied and promoted (generation 2). The run's
// circuit breaker stops it before events: the retired version is not
// advanced. The next run serves generation 2.
func TestRunStopsAtItsCircuitBreaker(t *testing.T) {
	t.Parallel()
	b := setupProd(t)
	executetest.WriteFiles(t, b.Dir, map[string]string{"models/events.sql": `MODEL (
  name demo.events,
  kind INCREMENTAL_BY_TIME_RANGE (time_column event_ts, batch_size 24),
  cron '@hourly'
);
SELECT epoch(g.ts)::BIGINT / 300 AS event_id, g.ts AS event_ts, 1 AS customer_id, 1.0 AS amount
FROM generate_series(@start_ts, @end_ts, INTERVAL 5 MINUTE) AS g(ts)`})
	p2 := b.Plan(t, "p2", plan.Prod, at(2024, 1, 3, 0), plan.Options{})
	retired, _ := b.Served(t, plan.Prod)

	exec := at(2024, 1, 4, 0)
	hooks := run.Hooks{BeforeModel: func(ctx context.Context, model string) error {
		if model == "demo.events" {
			return doApply(ctx, b, p2, exec)
		}
		return nil
	}}
	res, err := runOnce(b.Ctx, b, plan.Prod, exec, nil, hooks)
	var stopped *run.StoppedError
	require.ErrorAs(t, err, &stopped)
	require.True(t, errors.Is(err, run.ErrGenerationChanged))
	require.Equal(t, "demo.events", stopped.Model)
	require.Equal(t, int64(1), stopped.Started)
	require.Equal(t, int64(2), stopped.Now)
	require.Equal(t, int64(1), res.Generation)
	_, ranEvents := byModel(res)["demo.events"]
	require.False(t, ranEvents)
	require.Equal(t, "{[2024-01-01T00:00:00Z, 2024-01-03T00:00:00Z)}",
		b.Intervals(t, "demo.events", retired["demo.events"].Version), "the retired version was not advanced")

	res, err = runOnce(b.Ctx, b, plan.Prod, exec, nil, run.Hooks{})
	require.NoError(t, err)
	require.Equal(t, int64(2), res.Generation)
	served, _ := b.Served(t, plan.Prod)
	require.Equal(t, "{[2024-01-01T00:00:00Z, 2024-01-04T00:00:00Z)}", b.Intervals(t, "demo.events", served["demo.events"].Version))
	require.Equal(t, []string{"864"}, b.Rows(t, "SELECT sum(amount)::BIGINT FROM demo.events"))
}

// Scenario: a promotion lands after the run passed its circuit-breaker
// check for events but before events' first write. The write carries the
// run's generation as a fence, so state refuses it: the run stops with a
// *StoppedError wrapping state.ErrFenced, the retired version's intervals
// do not advance, and nothing was written to its table.
func TestRunIsFencedWhenPromotionLandsMidModel(t *testing.T) {
	t.Parallel()
	b := setupProd(t)
	executetest.WriteFiles(t, b.Dir, map[string]string{"models/daily_revenue.sql": `MODEL (
  name demo.daily_revenue,
  kind INCREMENTAL_BY_TIME_RANGE (time_column day),
  cron '@daily'
);
SELECT date_trunc('day', e.event_ts) AS day, e.customer_id, count(*) AS events, 0 AS revenue
FROM demo.events AS e
WHERE e.event_ts BETWEEN @start_ts AND @end_ts
GROUP BY ALL`})
	p2 := b.Plan(t, "p2", plan.Prod, at(2024, 1, 3, 0), plan.Options{})
	retired, _ := b.Served(t, plan.Prod)

	exec := at(2024, 1, 4, 0)
	hooks := run.Hooks{AfterCheck: func(ctx context.Context, model string) error {
		if model == "demo.daily_revenue" {
			return doApply(ctx, b, p2, exec)
		}
		return nil
	}}
	_, err := runOnce(b.Ctx, b, plan.Prod, exec, nil, hooks)
	var stopped *run.StoppedError
	require.ErrorAs(t, err, &stopped)
	require.ErrorIs(t, err, state.ErrFenced)
	require.Equal(t, "demo.daily_revenue", stopped.Model)
	require.Equal(t, int64(2), stopped.Now)
	require.Equal(t, "{[2024-01-01T00:00:00Z, 2024-01-03T00:00:00Z)}",
		b.Intervals(t, "demo.daily_revenue", retired["demo.daily_revenue"].Version), "the fenced write was not recorded")
	retiredTable := b.Engine.QuoteTable(execute.PhysicalTable(retired["demo.daily_revenue"]))
	require.Equal(t, []string{"0"}, b.Rows(t, "SELECT count(*) FROM "+retiredTable+" WHERE day >= '2024-01-03'"),
		"the fenced batch wrote no rows to the retired table: its fence was checked before the batch started")
}

// Scenario: a model with lookback 3 recomputes the three hours before each
// due hour on every run; the recomputed hours replace exactly their rows.
func TestLookbackRecomputesWithoutDuplicates(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, false, map[string]string{"models/late.sql": `MODEL (
  name demo.late,
  kind INCREMENTAL_BY_TIME_RANGE (time_column ts, lookback 3),
  cron '@hourly',
  start '2024-01-01'
);
SELECT g.ts AS ts, 1 AS n FROM generate_series(@start_ts, @end_ts, INTERVAL 15 MINUTE) AS g(ts)`})
	p := b.Plan(t, "p1", plan.Prod, at(2024, 1, 1, 6), plan.Options{})
	require.NoError(t, doApply(b.Ctx, b, p, at(2024, 1, 1, 6)))
	res, err := runOnce(b.Ctx, b, plan.Prod, at(2024, 1, 1, 7), nil, run.Hooks{})
	require.NoError(t, err)
	got := byModel(res)["demo.late"]
	require.Equal(t, "{[2024-01-01T03:00:00Z, 2024-01-01T07:00:00Z)}", got.Recorded.String(), "the due hour and three hours of lookback")
	require.Equal(t, int64(16), got.Rows)
	require.Equal(t, int64(7*4), b.Count(t, "demo.late"))
	require.Equal(t, []string{"28"}, b.Rows(t, "SELECT count(DISTINCT ts) FROM demo.late"))
}

// Scenario: model a fails for every hour from 05:00 (its SQL raises), c
// reads a, and b is independent. A run at 07:00 records nothing for a,
// does not run c (its parent failed), still advances b, and returns a's
// failure naming the model and the interval.
func TestAFailedModelStopsOnlyItsBranch(t *testing.T) {
	t.Parallel()
	hourly := func(name, query string) string {
		return `MODEL (name ` + name + `, kind INCREMENTAL_BY_TIME_RANGE (time_column ts), cron '@hourly', start '2024-01-01');
` + query
	}
	b := executetest.Setup(t, false, map[string]string{
		"models/a.sql": hourly("demo.a", `SELECT g.ts AS ts, CASE WHEN g.ts >= TIMESTAMP '2024-01-01 05:00:00' THEN error('boom') ELSE 1 END AS v
FROM generate_series(@start_ts, @end_ts, INTERVAL 1 HOUR) AS g(ts)`),
		"models/b.sql": hourly("demo.b", `SELECT g.ts AS ts, 2 AS v FROM generate_series(@start_ts, @end_ts, INTERVAL 1 HOUR) AS g(ts)`),
		"models/c.sql": hourly("demo.c", `SELECT a.ts AS ts, a.v AS v FROM demo.a AS a WHERE a.ts BETWEEN @start_ts AND @end_ts`),
	})
	p := b.Plan(t, "p1", plan.Prod, at(2024, 1, 1, 5), plan.Options{})
	require.NoError(t, doApply(b.Ctx, b, p, at(2024, 1, 1, 5)))

	res, err := runOnce(b.Ctx, b, plan.Prod, at(2024, 1, 1, 7), nil, run.Hooks{})
	var batch *execute.BatchError
	require.ErrorAs(t, err, &batch)
	require.Equal(t, "demo.a", batch.Model)
	require.Contains(t, err.Error(), "2024-01-01T05:00:00Z")
	got := byModel(res)
	require.Error(t, got["demo.a"].Err)
	require.Equal(t, "demo.a", got["demo.c"].BlockedBy)
	require.Equal(t, "{[2024-01-01T05:00:00Z, 2024-01-01T07:00:00Z)}", got["demo.b"].Recorded.String(), "the independent branch ran")
	served, _ := b.Served(t, plan.Prod)
	five := "{[2024-01-01T00:00:00Z, 2024-01-01T05:00:00Z)}"
	require.Equal(t, five, b.Intervals(t, "demo.a", served["demo.a"].Version))
	require.Equal(t, five, b.Intervals(t, "demo.c", served["demo.c"].Version))
	require.Equal(t, "{[2024-01-01T00:00:00Z, 2024-01-01T07:00:00Z)}", b.Intervals(t, "demo.b", served["demo.b"].Version))
}

// countingStore counts a run's environment reads.
type countingStore struct {
	state.Store
	whole, generation atomic.Int64
}

func (s *countingStore) GetEnvironment(ctx context.Context, name string) (*state.Environment, error) {
	s.whole.Add(1)
	return s.Store.GetEnvironment(ctx, name)
}

func (s *countingStore) EnvironmentGeneration(ctx context.Context, name string) (int64, bool, error) {
	s.generation.Add(1)
	return s.Store.EnvironmentGeneration(ctx, name)
}

// Scenario: a run over every model of prod reads the whole environment
// (its snapshot references) once, at the start; its circuit breaker then
// reads only the generation, once before each model it runs, so that a run
// of N models stays linear in N.
func TestCircuitBreakerReadsOnlyTheGeneration(t *testing.T) {
	t.Parallel()
	b := setupProd(t)
	st := &countingStore{Store: b.Store}
	exec := time.Date(2024, 1, 4, 0, 30, 0, 0, time.UTC)
	res, err := run.Once(b.Ctx, run.Params{Env: plan.Prod, ExecutionTime: exec, Store: st, Engine: b.Engine,
		Parser: b.Parser, ProjectDir: b.Dir, Clock: clockwork.NewFakeClockAt(exec), Logger: quiet})
	require.NoError(t, err)
	served, _ := b.Served(t, plan.Prod)
	checked := 0
	for _, s := range served {
		if s.Model.Kind != model.KindExternal {
			checked++
		}
	}
	require.Greater(t, checked, 1)
	require.Len(t, res.Models, checked, "every model had work")
	require.Equal(t, int64(1), st.whole.Load(), "the whole environment is read once per run")
	require.Equal(t, int64(checked), st.generation.Load(), "one generation read before each model")
}

// Scenario: an hourly model joins the seed demo.customers, whose default
// cadence is daily. A run at 06:30 on a day the seed's daily cadence does
// not cover yet computes the child's six hours anyway: a loaded seed's rows
// hold for all time (SQLMesh does not wait on seeds either; the side-by-side
// harness found gapless holding such a model back for the rest of the day).
func TestAHourlyChildOfASeedDoesNotWaitForTheSeedsCadence(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, true, map[string]string{"models/by_segment.sql": `MODEL (
  name demo.hourly_by_segment,
  kind INCREMENTAL_BY_TIME_RANGE (time_column hour),
  cron '@hourly',
  start '2024-01-01'
);
SELECT date_trunc('hour', e.event_ts) AS hour, c.segment, count(*) AS events
FROM demo.events AS e JOIN demo.customers AS c ON c.customer_id = e.customer_id
WHERE e.event_ts BETWEEN @start_ts AND @end_ts
GROUP BY 1, 2`})
	p := b.Plan(t, "p1", plan.Prod, at(2024, 1, 3, 0), plan.Options{})
	require.NoError(t, doApply(b.Ctx, b, p, at(2024, 1, 3, 0)))
	require.Equal(t, int64(3*48), b.Count(t, "demo.hourly_by_segment"), "three segments in each of 48 hours")

	res, err := runOnce(b.Ctx, b, plan.Prod, time.Date(2024, 1, 3, 6, 30, 0, 0, time.UTC), nil, run.Hooks{})
	require.NoError(t, err)
	got := byModel(res)
	require.Positive(t, got["demo.events"].Batches, "events gains its six hours")
	require.True(t, got["demo.hourly_by_segment"].Waiting.IsEmpty(), "waiting: %s", got["demo.hourly_by_segment"].Waiting)
	served, _ := b.Served(t, plan.Prod)
	require.Equal(t, "{[2024-01-01T00:00:00Z, 2024-01-03T06:00:00Z)}",
		b.Intervals(t, "demo.hourly_by_segment", served["demo.hourly_by_segment"].Version))
	require.Equal(t, int64(3*54), b.Count(t, "demo.hourly_by_segment"))
}
