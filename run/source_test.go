package run_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/cadence"
	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/run"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/state"
)

// sourceProject is a source and three models reading it: an hourly model
// directly, a daily one through the hourly one, and a FULL one directly.
var sourceProject = map[string]string{
	"sources/events.yaml": `name: raw.events
connector: files
files: {path: landing/events/*.csv, settle: 0s}
time_column: ts
start: '2024-01-01'
watermark: {lateness: 10m}
columns: {id: BIGINT, ts: TIMESTAMP}
`,
	"models/hourly.sql": `MODEL (name demo.raw_hourly, kind INCREMENTAL_BY_TIME_RANGE (time_column hour), cron '@hourly');
SELECT date_trunc('hour', ts) AS hour, count(*) AS n FROM raw.events WHERE ts >= @start_ts AND ts <= @end_ts GROUP BY 1`,
	"models/daily.sql": `MODEL (name demo.raw_daily, kind INCREMENTAL_BY_TIME_RANGE (time_column day), cron '@daily');
SELECT date_trunc('day', hour) AS day, sum(n) AS n FROM demo.raw_hourly WHERE hour >= @start_ts AND hour <= @end_ts GROUP BY 1`,
	"models/total.sql": `MODEL (name demo.raw_total, kind FULL, cron '@hourly');
SELECT count(*) AS n FROM raw.events`,
}

// Scenario: before a source has landed, nothing downstream of it runs, and
// the plan, the run and its result say why. A plan holds back the work of
// every model reading the source (directly or through another model); the
// apply succeeds, an empty view standing in for the source's table; a run
// computes none of it. Once the source publishes coverage (what ingestion
// will do, written here by hand), a run computes exactly what it covers.
func TestModelsReadingASourceWaitUntilItLands(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		setup func(testing.TB, bool, map[string]string) *executetest.Bundle
	}{{"duckdb+sqlite", executetest.Setup}, {"postgres", executetest.SetupPostgres}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := tc.setup(t, false, sourceProject)
			deploy := at(2024, 1, 2, 0)
			p := b.Plan(t, "p1", plan.Prod, deploy, plan.Options{})
			for _, bf := range p.Backfills {
				require.NotContains(t, []string{"demo.raw_hourly", "demo.raw_daily", "demo.raw_total"}, bf.Name,
					"nothing reading an unlanded source is backfilled")
			}
			waits := map[string]plan.SourceWait{}
			for _, w := range p.Waits {
				waits[w.Name] = w
			}
			require.Len(t, waits, 3)
			day := "{[2024-01-01T00:00:00Z, 2024-01-02T00:00:00Z)}"
			require.Equal(t, day, waits["demo.raw_hourly"].Held.String())
			require.Equal(t, day, waits["demo.raw_daily"].Held.String())
			require.True(t, waits["demo.raw_total"].Whole)
			require.Equal(t, []plan.WaitedSource{{Name: "raw.events"}}, waits["demo.raw_daily"].Sources)

			require.NoError(t, doApply(b.Ctx, b, p, deploy))
			require.Equal(t, int64(0), b.Count(t, "raw.events"), "an empty view stands in for the source")
			require.Equal(t, int64(0), b.Count(t, "demo.raw_hourly"))

			exec := at(2024, 1, 2, 5)
			res, err := runOnce(b.Ctx, b, plan.Prod, exec, nil, run.Hooks{})
			require.NoError(t, err)
			got := byModel(res)
			for _, n := range []string{"demo.raw_hourly", "demo.raw_daily", "demo.raw_total"} {
				require.Zero(t, got[n].Batches, n)
				require.False(t, got[n].Waiting.IsEmpty(), n)
			}
			notLanded := []string{"waiting on raw.events (not landed yet)"}
			require.Equal(t, "{[2024-01-01T00:00:00Z, 2024-01-02T05:00:00Z)}", got["demo.raw_hourly"].Waiting.String())
			require.Equal(t, notLanded, got["demo.raw_hourly"].WaitingOn)
			require.Equal(t, notLanded, got["demo.raw_total"].WaitingOn)
			require.Empty(t, got["demo.raw_daily"].WaitingOn, "it waits on its parent model, which a run brings")
			served, _ := b.Served(t, plan.Prod)
			require.Equal(t, "{}", b.Intervals(t, "demo.raw_hourly", served["demo.raw_hourly"].Version))
			require.Equal(t, "{}", b.Intervals(t, "demo.raw_total", served["demo.raw_total"].Version))

			// The source lands three hours (by hand: the ingestion to come
			// repoints the view and publishes its watermark).
			_, err = b.Engine.Query(b.Ctx, `CREATE OR REPLACE VIEW raw.events AS
SELECT i::BIGINT AS id, TIMESTAMP '2024-01-01 00:00:00' + i * INTERVAL '20 minutes' AS ts FROM generate_series(0, 8) AS g(i)`)
			require.NoError(t, err)
			three := interval.NewSet(interval.NewRange(at(2024, 1, 1, 0), at(2024, 1, 1, 3)))
			require.NoError(t, b.Store.AddIntervals(b.Ctx, state.IntervalsParams{Key: state.SourceKey("raw.events"), Ranges: three, Now: exec}))

			res, err = runOnce(b.Ctx, b, plan.Prod, exec, nil, run.Hooks{})
			require.NoError(t, err)
			got = byModel(res)
			require.Equal(t, three.String(), got["demo.raw_hourly"].Recorded.String())
			require.Equal(t, "{[2024-01-01T03:00:00Z, 2024-01-02T05:00:00Z)}", got["demo.raw_hourly"].Waiting.String())
			require.Equal(t, []string{"waiting on raw.events (complete through 2024-01-01T03:00:00Z)"}, got["demo.raw_hourly"].WaitingOn)
			require.Equal(t, []string{"9"}, b.Rows(t, "SELECT sum(n)::BIGINT FROM demo.raw_hourly"))
			require.Equal(t, 1, got["demo.raw_total"].Batches, "a kind built whole runs once its source has landed")
			require.Zero(t, got["demo.raw_daily"].Batches, "no whole day is covered yet")

			// A later deploy leaves the landed source alone, and backfills a
			// changed model reading it only as far as the source covers.
			executetest.WriteFiles(t, b.Dir, map[string]string{"models/hourly.sql": `MODEL (name demo.raw_hourly, kind INCREMENTAL_BY_TIME_RANGE (time_column hour), cron '@hourly');
SELECT date_trunc('hour', ts) AS hour, count(*) + 0 AS n FROM raw.events WHERE ts >= @start_ts AND ts <= @end_ts GROUP BY 1`})
			p2 := b.Plan(t, "p2", plan.Prod, exec, plan.Options{})
			var hourly *plan.Backfill
			for i := range p2.Backfills {
				if p2.Backfills[i].Name == "demo.raw_hourly" {
					hourly = &p2.Backfills[i]
				}
			}
			require.NotNil(t, hourly)
			require.Equal(t, three.String(), hourly.Ranges.String())
			require.NoError(t, doApply(b.Ctx, b, p2, exec))
			require.Equal(t, int64(9), b.Count(t, "raw.events"), "the landed source is not replaced by a stand-in")
			require.Equal(t, []string{"9"}, b.Rows(t, "SELECT sum(n)::BIGINT FROM demo.raw_hourly"))
		})
	}
}

// Scenario: DueWork, the definition the scheduler's nothing-due check
// shares, holds a model reading a source to the source's coverage.
func TestDueWorkIsClippedToASourcesCoverage(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, false, sourceProject)
	pr := b.Load(t)
	set := pr.Snapshots
	hourly := set["demo.raw_hourly"]
	spec := mustSpec(t, hourly)
	exec := time.Date(2024, 1, 1, 6, 0, 0, 0, time.UTC)
	due := run.DueWork(hourly, spec, set, nil, exec)
	require.True(t, due.Work.IsEmpty())
	require.Equal(t, "{[2024-01-01T00:00:00Z, 2024-01-01T06:00:00Z)}", due.Waiting.String())

	covered := map[state.VersionKey]interval.Set{
		state.SourceKey("raw.events"): interval.NewSet(interval.NewRange(at(2024, 1, 1, 0), time.Date(2024, 1, 1, 2, 30, 0, 0, time.UTC))),
	}
	due = run.DueWork(hourly, spec, set, covered, exec)
	require.Equal(t, "{[2024-01-01T00:00:00Z, 2024-01-01T02:00:00Z)}", due.Work.String(), "whole hours only")
	total := set["demo.raw_total"]
	require.False(t, run.DueWork(total, mustSpec(t, total), set, covered, exec).Work.IsEmpty())
	require.True(t, run.DueWork(total, mustSpec(t, total), set, nil, exec).Work.IsEmpty())
}

func mustSpec(t *testing.T, s *snapshot.Snapshot) cadence.Spec {
	t.Helper()
	spec, err := cadence.ForModel(s.Model)
	require.NoError(t, err)
	return spec
}
