package run_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/run"
	"github.com/gapless-dev/gapless/state"
)

// signalProject is a source and an hourly model that does not read it but
// waits for it through SQLMesh's signals attribute (gapless's built-in
// source_landed signal), as a SQLMesh model waits on a Python signal.
var signalProject = map[string]string{
	"sources/events.yaml": sourceProject["sources/events.yaml"],
	"models/clock.sql": `MODEL (name demo.clock, kind INCREMENTAL_BY_TIME_RANGE (time_column hour, batch_size 1), cron '@hourly', start '2024-01-01',
  signals [source_landed(source := raw.events)]);
SELECT @start_ts::TIMESTAMP AS hour`,
}

// Scenario: a model with the source_landed signal is computed for no
// interval before the source's watermark passes it: not by the plan's
// backfill, not by a run; once the source publishes coverage a run
// computes exactly the hours it covers, and the next hours once it covers
// them too.
func TestSignalHoldsAModelUntilTheSourceLands(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, false, signalProject)
	deploy := at(2024, 1, 1, 6)
	p := b.Plan(t, "p1", plan.Prod, deploy, plan.Options{})
	for _, bf := range p.Backfills {
		require.NotEqual(t, "demo.clock", bf.Name, "nothing is backfilled before the source lands")
	}
	require.NoError(t, doApply(b.Ctx, b, p, deploy))

	res, err := runOnce(b.Ctx, b, plan.Prod, deploy, nil, run.Hooks{})
	require.NoError(t, err)
	got := byModel(res)["demo.clock"]
	require.Zero(t, got.Batches)
	require.Equal(t, "{[2024-01-01T00:00:00Z, 2024-01-01T06:00:00Z)}", got.Waiting.String())
	require.Equal(t, []string{"waiting on raw.events (not landed yet)"}, got.WaitingOn)
	require.Equal(t, int64(0), b.Count(t, "demo.clock"))

	two := interval.NewSet(interval.NewRange(at(2024, 1, 1, 0), at(2024, 1, 1, 2)))
	require.NoError(t, b.Store.AddIntervals(b.Ctx, state.IntervalsParams{Key: state.SourceKey("raw.events"), Ranges: two, Now: deploy}))
	res, err = runOnce(b.Ctx, b, plan.Prod, deploy, nil, run.Hooks{})
	require.NoError(t, err)
	got = byModel(res)["demo.clock"]
	require.Equal(t, two.String(), got.Recorded.String())
	require.Equal(t, "{[2024-01-01T02:00:00Z, 2024-01-01T06:00:00Z)}", got.Waiting.String())
	require.Equal(t, []string{"2024-01-01 00:00:00", "2024-01-01 01:00:00"}, b.Rows(t, "SELECT strftime(hour, '%Y-%m-%d %H:%M:%S') FROM demo.clock ORDER BY 1"))

	five := interval.NewSet(interval.NewRange(at(2024, 1, 1, 2), at(2024, 1, 1, 5)))
	require.NoError(t, b.Store.AddIntervals(b.Ctx, state.IntervalsParams{Key: state.SourceKey("raw.events"), Ranges: five, Now: deploy}))
	res, err = runOnce(b.Ctx, b, plan.Prod, deploy, nil, run.Hooks{})
	require.NoError(t, err)
	got = byModel(res)["demo.clock"]
	require.Equal(t, five.String(), got.Recorded.String())
	require.Equal(t, int64(5), b.Count(t, "demo.clock"))
}
