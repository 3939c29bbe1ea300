package apply_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/promotion"
	"github.com/gapless-dev/gapless/run"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var at = executetest.At

var quiet = slog.New(slog.DiscardHandler)

// doApply applies p at the given clock with the bundle's databases.
func doApply(b *executetest.Bundle, p *plan.Plan, now time.Time, hooks apply.Hooks, onEvent func(apply.Event)) (*apply.Result, error) {
	return apply.Apply(b.Ctx, apply.Params{
		Plan: p, Store: b.Store, Engine: b.Engine, Parser: b.Parser, ProjectDir: b.Dir,
		Clock: clockwork.NewFakeClockAt(now), Logger: quiet, Hooks: hooks, OnEvent: onEvent,
	})
}

func runOnce(ctx context.Context, b *executetest.Bundle, env string, exec time.Time, hooks run.Hooks) (*run.Result, error) {
	return run.Once(ctx, run.Params{Env: env, ExecutionTime: exec, Store: b.Store, Engine: b.Engine, Parser: b.Parser,
		ProjectDir: b.Dir, Clock: clockwork.NewFakeClockAt(exec), Logger: quiet, Hooks: hooks})
}

// firstApply applies the quickstart to prod at 2024-01-03 00:00 as plan p1.
func firstApply(t *testing.T, b *executetest.Bundle) *apply.Result {
	t.Helper()
	p := b.Plan(t, "p1", plan.Prod, at(2024, 1, 3, 0), plan.Options{})
	res, err := doApply(b, p, at(2024, 1, 3, 0), apply.Hooks{}, nil)
	require.NoError(t, err)
	return res
}

func editEvents(t *testing.T, b *executetest.Bundle, amountExpr string) {
	t.Helper()
	executetest.WriteFiles(t, b.Dir, map[string]string{"models/events.sql": `MODEL (
  name demo.events,
  kind INCREMENTAL_BY_TIME_RANGE (time_column event_ts, batch_size 24),
  cron '@hourly',
  grain (event_id)
);
SELECT
  epoch(g.ts)::BIGINT / 300 AS event_id,
  g.ts AS event_ts,
  (epoch(g.ts)::BIGINT / 300) % 5 + 1 AS customer_id,
  ` + amountExpr + ` AS amount
FROM generate_series(@start_ts, @end_ts, INTERVAL 5 MINUTE) AS g(ts)`})
}

// Scenario: the first apply of the quickstart to prod backfills two days of
// hourly events and their daily rollup, builds the seed, the FULL model and
// the view, promotes generation 1, and serves every model through prod's
// views. Every stage is in the application history.
func TestFirstApplyOfQuickstart(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, true, nil)
	var (
		mu     sync.Mutex
		events []apply.Event
	)
	p := b.Plan(t, "p1", plan.Prod, at(2024, 1, 3, 0), plan.Options{})
	res, err := doApply(b, p, at(2024, 1, 3, 0), apply.Hooks{}, func(e apply.Event) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	})
	require.NoError(t, err)
	require.Equal(t, int64(1), res.Environment.Generation)
	require.Equal(t, "p1", res.Environment.PlanID)

	env, err := b.Store.GetEnvironment(b.Ctx, plan.Prod)
	require.NoError(t, err)
	require.False(t, env.FinalizedAt.IsZero(), "finalised")

	served, _ := b.Served(t, plan.Prod)
	two := "{[2024-01-01T00:00:00Z, 2024-01-03T00:00:00Z)}"
	require.Equal(t, two, b.Intervals(t, "demo.events", served["demo.events"].Version))
	require.Equal(t, two, b.Intervals(t, "demo.daily_revenue", served["demo.daily_revenue"].Version))
	require.Equal(t, int64(576), b.Count(t, "demo.events"))
	require.Equal(t, int64(10), b.Count(t, "demo.daily_revenue"))
	require.Equal(t, int64(5), b.Count(t, "demo.customer_totals"))
	require.Equal(t, int64(3), b.Count(t, "demo.top_customers"))
	require.Equal(t, []string{"576"}, b.Rows(t, "SELECT sum(events) FROM demo.daily_revenue"))

	apps, err := b.Store.ListApplications(b.Ctx, "p1")
	require.NoError(t, err)
	var finished []string
	for _, a := range apps {
		if a.Status == apply.StatusFinished {
			finished = append(finished, a.Stage)
		}
	}
	want := make([]string, len(apply.Stages))
	for i, s := range apply.Stages {
		want[i] = string(s)
	}
	require.Equal(t, want, finished)

	var accepted, batches int
	for _, e := range events {
		switch e.(type) {
		case apply.PromotionAccepted:
			accepted++
		case apply.BatchCommitted:
			batches++
		}
	}
	require.Equal(t, 1, accepted)
	require.Equal(t, 2+1+3, batches, "events in two 24h batches, the rollup in one (no batch_size), and three whole builds")
	evs, err := b.Store.ListEvents(b.Ctx, state.EventFilter{Kinds: []string{state.EventPromotionAccepted, state.EventPlanApplied}})
	require.NoError(t, err)
	require.Len(t, evs, 2)
	require.Equal(t, state.EventPromotionAccepted, evs[0].Kind)
	require.Equal(t, state.EventPlanApplied, evs[1].Kind)
}

// Scenario: a development environment changes only the rollup. It reuses
// prod's physical table for events (one table, no copy), builds its own
// rollup, and serves both through demo__dev views; prod is untouched.
func TestDevEnvironmentReusesProdTables(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, true, nil)
	firstApply(t, b)
	executetest.WriteFiles(t, b.Dir, map[string]string{"models/daily_revenue.sql": `MODEL (
  name demo.daily_revenue,
  kind INCREMENTAL_BY_TIME_RANGE (time_column day),
  cron '@daily'
);
SELECT date_trunc('day', e.event_ts) AS day, e.customer_id, count(*) AS events, sum(e.amount) * 100 AS revenue
FROM demo.events AS e
WHERE e.event_ts BETWEEN @start_ts AND @end_ts
GROUP BY ALL`})
	p := b.Plan(t, "d1", "dev", at(2024, 1, 3, 0), plan.Options{AllowGaps: true})
	_, ok := p.BackfillFor("demo.events")
	require.False(t, ok, "events is unchanged: nothing to backfill")
	_, err := doApply(b, p, at(2024, 1, 3, 0), apply.Hooks{}, nil)
	require.NoError(t, err)

	prod, _ := b.Served(t, plan.Prod)
	dev, _ := b.Served(t, "dev")
	require.Equal(t, prod["demo.events"].Version, dev["demo.events"].Version)
	require.NotEqual(t, prod["demo.daily_revenue"].Version, dev["demo.daily_revenue"].Version)
	require.Equal(t, []string{"1"}, b.Rows(t,
		"SELECT count(*) FROM information_schema.tables WHERE table_schema = 'gapless__demo' AND table_name LIKE 'demo__events__%'"))
	require.Equal(t, int64(576), b.Count(t, "demo__dev.events"))
	require.Equal(t, b.Rows(t, "SELECT sum(revenue) * 100 FROM demo.daily_revenue"), b.Rows(t, "SELECT sum(revenue) FROM demo__dev.daily_revenue"))
	env, err := b.Store.GetEnvironment(b.Ctx, plan.Prod)
	require.NoError(t, err)
	require.Equal(t, "p1", env.PlanID)
}

// Scenario: a breaking change to events is applied to prod. Events and
// everything downstream get new tables, backfilled up to the incumbent's
// frontier; prod's views switch to them at generation 2 and serve the new
// amounts, while the old tables stay for rollback.
func TestBreakingChangeToProd(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, true, nil)
	firstApply(t, b)
	before, _ := b.Served(t, plan.Prod)
	oldSum := b.Rows(t, "SELECT sum(amount) * 2 FROM demo.events")
	editEvents(t, b, "((epoch(g.ts)::BIGINT / 300) % 7) * 3.0")
	p := b.Plan(t, "p2", plan.Prod, at(2024, 1, 3, 0), plan.Options{})
	require.Len(t, p.Incumbents, 4, "events and everything downstream of it are replaced")
	res, err := doApply(b, p, at(2024, 1, 3, 0), apply.Hooks{}, nil)
	require.NoError(t, err)
	require.Equal(t, int64(2), res.Environment.Generation)

	after, _ := b.Served(t, plan.Prod)
	require.NotEqual(t, before["demo.events"].Version, after["demo.events"].Version)
	require.Equal(t, before["demo.customers"].Version, after["demo.customers"].Version)
	require.Equal(t, oldSum, b.Rows(t, "SELECT sum(amount) FROM demo.events"))
	require.Equal(t, int64(576), b.Count(t, "demo.events"))
	require.Equal(t, int64(10), b.Count(t, "demo.daily_revenue"))
	old := b.Engine.QuoteTable(execute.PhysicalTable(before["demo.events"]))
	require.Equal(t, int64(576), b.Count(t, old), "the old table is kept")
}

// Scenario: restating events in prod recomputes its intervals and its
// rollup's in place: exactly the same rows, no duplicates, same intervals.
func TestRestatementReplacesExactlyItsRows(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, true, nil)
	firstApply(t, b)
	rows := b.Rows(t, "SELECT event_id, event_ts, amount FROM demo.events")
	p := b.Plan(t, "p2", plan.Prod, at(2024, 1, 3, 0), plan.Options{Restate: []string{"demo.events"}})
	bf, ok := p.BackfillFor("demo.events")
	require.True(t, ok)
	require.Equal(t, "{[2024-01-01T00:00:00Z, 2024-01-03T00:00:00Z)}", bf.Ranges.String())
	res, err := doApply(b, p, at(2024, 1, 3, 0), apply.Hooks{}, nil)
	require.NoError(t, err)
	require.Equal(t, 2, res.Models[0].Batches, "both days recomputed")

	require.Equal(t, rows, b.Rows(t, "SELECT event_id, event_ts, amount FROM demo.events"))
	require.Equal(t, []string{"576"}, b.Rows(t, "SELECT count(DISTINCT event_id) FROM demo.events"))
	require.Equal(t, int64(10), b.Count(t, "demo.daily_revenue"))
	served, _ := b.Served(t, plan.Prod)
	require.Equal(t, "{[2024-01-01T00:00:00Z, 2024-01-03T00:00:00Z)}", b.Intervals(t, "demo.events", served["demo.events"].Version))
}

const fragileProject = `MODEL (name src.raw, kind EXTERNAL, columns (day TIMESTAMP, v VARCHAR));`

const fragileModel = `MODEL (
  name demo.fragile,
  kind INCREMENTAL_BY_TIME_RANGE (time_column ts, batch_size 1),
  cron '@daily',
  start '2024-01-01'
);
SELECT r.day AS ts, r.v::INTEGER AS n FROM src.raw AS r WHERE r.day BETWEEN @start_ts AND @end_ts`

const fragileChild = `MODEL (
  name demo.fragile_sum,
  kind INCREMENTAL_BY_TIME_RANGE (time_column ts),
  cron '@daily',
  start '2024-01-01'
);
SELECT ts, n * 10 AS n10 FROM demo.fragile WHERE ts BETWEEN @start_ts AND @end_ts`

// rawTable fills src.raw with one row per day of January 1..5, the value of
// the 3rd being v3.
func rawTable(t *testing.T, b *executetest.Bundle, v3 string) {
	t.Helper()
	raw := warehouse.Table{Schema: "src", Name: "raw"}
	require.NoError(t, b.Engine.CreateSchema(b.Ctx, "src"))
	require.NoError(t, b.Engine.ReplaceTable(b.Ctx, warehouse.ReplaceTableParams{Table: raw, Query: `
SELECT d::TIMESTAMP AS day, CASE WHEN d = TIMESTAMP '2024-01-03' THEN '` + v3 + `' ELSE '1' END AS v
FROM generate_series(TIMESTAMP '2024-01-01', TIMESTAMP '2024-01-05', INTERVAL 1 DAY) AS g(d)`}))
}

// Scenario: a model fails for one day (its source holds a value that does
// not convert). The apply stops naming the model, the interval and the SQL
// error; nothing is promoted and the child never starts. Once the source is
// fixed, applying the same plan again resumes: the two committed days are
// not recomputed.
func TestFailedBatchStopsTheApplyAndResumes(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, false, map[string]string{
		"models/raw.sql": fragileProject, "models/fragile.sql": fragileModel, "models/fragile_sum.sql": fragileChild})
	rawTable(t, b, "boom")
	exec := at(2024, 1, 6, 0)
	p := b.Plan(t, "p1", plan.Prod, exec, plan.Options{})
	_, err := doApply(b, p, exec, apply.Hooks{}, nil)
	var be *execute.BatchError
	require.ErrorAs(t, err, &be)
	require.Equal(t, "demo.fragile", be.Model)
	require.Equal(t, interval.NewRange(at(2024, 1, 3, 0), at(2024, 1, 4, 0)), be.Interval)
	require.Contains(t, err.Error(), "boom")
	require.Contains(t, err.Error(), "stage backfill")
	_, err = b.Store.GetEnvironment(b.Ctx, plan.Prod)
	require.ErrorIs(t, err, state.ErrNotFound, "nothing promoted")
	fragile := p.Snapshots[1]
	require.Equal(t, "demo.fragile", fragile.Name)
	require.Equal(t, "{[2024-01-01T00:00:00Z, 2024-01-03T00:00:00Z)}", b.Intervals(t, fragile.Name, fragile.Version))
	require.Equal(t, "{}", b.Intervals(t, "demo.fragile_sum", p.Snapshots[2].Version), "the child never started")

	rawTable(t, b, "3")
	var mu sync.Mutex
	var recomputed []string
	res, err := doApply(b, p, exec, apply.Hooks{}, func(e apply.Event) {
		if bc, ok := e.(apply.BatchCommitted); ok && bc.Batch.Model == "demo.fragile" {
			mu.Lock()
			recomputed = append(recomputed, bc.Batch.Interval.Start.Format("01-02"))
			mu.Unlock()
		}
	})
	require.NoError(t, err)
	require.Equal(t, []string{"01-03", "01-04", "01-05"}, recomputed)
	require.Equal(t, "{[2024-01-01T00:00:00Z, 2024-01-03T00:00:00Z)}", res.Models[0].Skipped.String())
	require.Equal(t, []string{"10", "10", "10", "10", "30"}, b.Rows(t, "SELECT n10 FROM demo.fragile_sum"))
}

// Scenario (seed 000): a strict prod plan is built at 00:00; while its
// replacement is backfilled, the scheduler advances the incumbent to 02:00.
// Promotion refuses with a *promotion.Error naming the model, the missing tail and
// both frontiers, records the rejection, and changes nothing. A fresh plan
// reuses the built intervals and backfills only the tail, then promotes.
func TestStrictPromotionFailsWhenRunAdvancedTheIncumbent(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, true, nil)
	firstApply(t, b)
	editEvents(t, b, "((epoch(g.ts)::BIGINT / 300) % 7) * 3.0")
	p := b.Plan(t, "p2", plan.Prod, at(2024, 1, 3, 0), plan.Options{})
	hooks := apply.Hooks{AfterBackfill: func(ctx context.Context) error {
		_, err := runOnce(ctx, b, plan.Prod, at(2024, 1, 3, 2), run.Hooks{})
		return err
	}}
	_, err := doApply(b, p, at(2024, 1, 3, 2), hooks, nil)
	var perr *promotion.Error
	require.ErrorAs(t, err, &perr)
	gap := perr.Verdicts[0]
	require.Equal(t, "demo.events", gap.Model)
	require.Equal(t, promotion.IncumbentAdvanced, gap.Reason)
	require.Equal(t, "{[2024-01-03T00:00:00Z, 2024-01-03T02:00:00Z)}", gap.Missing.String())
	require.Equal(t, at(2024, 1, 3, 0), gap.FrontierAtPlan)
	require.Equal(t, at(2024, 1, 3, 2), gap.FrontierNow)
	require.Contains(t, err.Error(), "catch-up or replan would fill it")

	env, err := b.Store.GetEnvironment(b.Ctx, plan.Prod)
	require.NoError(t, err)
	require.Equal(t, "p1", env.PlanID)
	require.Equal(t, int64(1), env.Generation)
	require.Equal(t, int64(600), b.Count(t, "demo.events"), "prod serves the incumbent, advanced by the run")
	rej, err := b.Store.ListEvents(b.Ctx, state.EventFilter{Kinds: []string{state.EventPromotionRejected}})
	require.NoError(t, err)
	require.Len(t, rej, 1)
	require.Equal(t, "demo.events", rej[0].Model)

	p3 := b.Plan(t, "p3", plan.Prod, at(2024, 1, 3, 2), plan.Options{})
	bf, ok := p3.BackfillFor("demo.events")
	require.True(t, ok)
	require.Equal(t, "{[2024-01-03T00:00:00Z, 2024-01-03T02:00:00Z)}", bf.Ranges.String(), "only the tail")
	_, err = doApply(b, p3, at(2024, 1, 3, 2), apply.Hooks{}, nil)
	require.NoError(t, err)
	require.Equal(t, int64(600), b.Count(t, "demo.events"))
	require.Equal(t, b.Rows(t, "SELECT sum(amount) FROM demo.events"), b.Rows(t,
		"SELECT sum(((epoch(event_ts)::BIGINT / 300) % 7) * 3.0) FROM demo.events"))
}

// Scenario: two plans are built against the same prod (both expecting p1)
// and applied at once. Exactly one promotes; the other fails with
// state.ErrConflictingPlan and serves nothing.
func TestTwoAppliesRaceForProd(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, true, nil)
	firstApply(t, b)
	editEvents(t, b, "2.0")
	pa := b.Plan(t, "pa", plan.Prod, at(2024, 1, 3, 0), plan.Options{})
	editEvents(t, b, "3.0")
	pb := b.Plan(t, "pb", plan.Prod, at(2024, 1, 3, 0), plan.Options{})

	start := make(chan struct{})
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, p := range []*plan.Plan{pa, pb} {
		wg.Go(func() {
			<-start
			_, errs[i] = doApply(b, p, at(2024, 1, 3, 0), apply.Hooks{}, nil)
		})
	}
	close(start)
	wg.Wait()

	var won, lost int
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case errors.Is(err, state.ErrConflictingPlan):
			lost++
		default:
			t.Fatalf("unexpected error: %v", err)
		}
	}
	require.Equal(t, 1, won)
	require.Equal(t, 1, lost)
	env, err := b.Store.GetEnvironment(b.Ctx, plan.Prod)
	require.NoError(t, err)
	require.Equal(t, int64(2), env.Generation)
	want := map[string]string{"pa": "1152", "pb": "1728"}[env.PlanID]
	require.Equal(t, []string{want}, b.Rows(t, "SELECT round(sum(amount))::BIGINT FROM demo.events"))
}

// Scenario: an apply interrupted before a model (a hook failing, as a crash
// would) is applied again and resumes: completed models are skipped.
func TestInterruptedApplyResumes(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, true, nil)
	p := b.Plan(t, "p1", plan.Prod, at(2024, 1, 3, 0), plan.Options{})
	crash := errors.New("crash")
	_, err := doApply(b, p, at(2024, 1, 3, 0), apply.Hooks{BeforeModel: func(_ context.Context, m string) error {
		if m == "demo.daily_revenue" {
			return crash
		}
		return nil
	}}, nil)
	require.ErrorIs(t, err, crash)
	res, err := doApply(b, p, at(2024, 1, 3, 0), apply.Hooks{}, nil)
	require.NoError(t, err)
	for _, m := range res.Models {
		if m.Model == "demo.events" {
			require.Zero(t, m.Batches, "events was complete")
			require.False(t, m.Skipped.IsEmpty())
		}
		if m.Model == "demo.daily_revenue" {
			require.Equal(t, 1, m.Batches, "no batch_size: one batch")
		}
	}
	require.Equal(t, int64(10), b.Count(t, "demo.daily_revenue"))
	require.True(t, strings.HasPrefix(res.Environment.PlanID, "p1"))
}
