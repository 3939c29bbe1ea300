package scheduler_test

import (
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/execute/executetest"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/state"
)

// Scenario: prod serves an hourly model reading a source that has not
// landed. A tick finds it due but nothing runnable, so it does not open the
// warehouse; once the source publishes coverage (what ingestion will do,
// written here by hand), the next tick's nothing-due check, which reads the
// source's record with the models', opens it and computes what the source
// covers.
func TestTickWaitsOnASourceUntilItPublishes(t *testing.T) {
	t.Parallel()
	b := executetest.Setup(t, false, map[string]string{
		"sources/src.yaml": "name: raw.src\nconnector: files\nfiles: {path: in/*.csv}\ntime_column: ts\ncolumns: {ts: TIMESTAMP, v: INTEGER}\n",
		"models/child.sql": hourly("demo.child", "raw.src", ""),
	})
	deploy(t, b, "p1", at(2024, 1, 1, 10))
	clk := clockwork.NewFakeClockAt(at(2024, 1, 1, 11).Add(30 * time.Minute))
	d := newDaemon(t, b, "d1", clk, nil)

	res, err := d.Tick(b.Ctx)
	require.NoError(t, err)
	require.False(t, res.OpenedEngine, "nothing is runnable before the source lands")
	require.Equal(t, []string{"demo.child"}, res.Envs[0].Due)
	require.Zero(t, res.Envs[0].Ran)
	require.Equal(t, "{}", served(t, b, "demo.child"))

	covered := interval.NewSet(interval.NewRange(at(2024, 1, 1, 0), at(2024, 1, 1, 4)))
	require.NoError(t, b.Store.AddIntervals(b.Ctx, state.IntervalsParams{Key: state.SourceKey("raw.src"), Ranges: covered, Now: clk.Now()}))
	res, err = d.Tick(b.Ctx)
	require.NoError(t, err)
	require.True(t, res.OpenedEngine)
	require.Equal(t, 1, res.Envs[0].Ran)
	require.Equal(t, covered.String(), served(t, b, "demo.child"))
}
