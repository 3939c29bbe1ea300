package apply_test

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/run"
)

const concurrentEvents = `MODEL (
  name demo.hits,
  kind INCREMENTAL_BY_TIME_RANGE (time_column ts, batch_size 2, batch_concurrency 3),
  cron '@hourly',
  start '2024-01-01'
);
SELECT g.ts AS ts, epoch(g.ts)::BIGINT AS id FROM generate_series(@start_ts, @end_ts, INTERVAL 10 MINUTE) AS g(ts)`

// Scenario: a model asks for batch_concurrency 3. Its first apply to prod
// backfills a version nobody serves yet, so three batches run at once (the
// gate proves it). Once prod serves that version, a restatement and a run
// that catches up twelve hours compute its batches one at a time, so prod
// never shows an hour while an earlier one is missing.
func TestBatchConcurrencyOnlyForVersionsNobodyServes(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, false, map[string]string{"models/hits.sql": concurrentEvents})
	g := executetest.NewGate(b.Engine, 3)
	ctx, cancel := context.WithTimeout(b.Ctx, time.Minute)
	defer cancel()
	applyAt := func(p *plan.Plan, now time.Time) *apply.Result {
		res, err := apply.Apply(ctx, apply.Params{Plan: p, Store: b.Store, Engine: g, Parser: b.Parser, ProjectDir: b.Dir,
			Clock: clockwork.NewFakeClockAt(now), Logger: quiet})
		require.NoError(t, err)
		return res
	}
	res := applyAt(b.Plan(t, "p1", plan.Prod, at(2024, 1, 2, 0), plan.Options{}), at(2024, 1, 2, 0))
	require.Equal(t, 12, res.Models[0].Batches)
	require.Equal(t, 3, g.Most(), "a new version's batches run three at once")
	require.Equal(t, []string{"144|144"}, b.Rows(t, "SELECT count(*) || '|' || count(DISTINCT id) FROM demo.hits"))

	g.SetWant(1)
	res = applyAt(b.Plan(t, "p2", plan.Prod, at(2024, 1, 2, 0), plan.Options{Restate: []string{"demo.hits"}}), at(2024, 1, 2, 0))
	require.Equal(t, 12, res.Models[0].Batches)
	require.Equal(t, 1, g.Most(), "a served version's restatement runs one batch at a time")
	require.Equal(t, []string{"144|144"}, b.Rows(t, "SELECT count(*) || '|' || count(DISTINCT id) FROM demo.hits"))

	g.SetWant(1)
	exec := at(2024, 1, 2, 12)
	rr, err := run.Once(ctx, run.Params{Env: plan.Prod, ExecutionTime: exec, Store: b.Store, Engine: g, Parser: b.Parser,
		ProjectDir: b.Dir, Clock: clockwork.NewFakeClockAt(exec), Logger: quiet})
	require.NoError(t, err)
	require.Len(t, rr.Models, 1)
	require.Equal(t, 6, rr.Models[0].Batches)
	require.Equal(t, 1, g.Most(), "a run computes a served version one batch at a time")
	require.Equal(t, []string{"216|216"}, b.Rows(t, "SELECT count(*) || '|' || count(DISTINCT id) FROM demo.hits"))
}
