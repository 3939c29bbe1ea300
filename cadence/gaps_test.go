package cadence

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/model"
)

// Scenario: the one definition of a gap (what status lists and the
// scheduler's lag measures). An hourly model from 2024-01-01 with lookback
// 2 covers [00:00, 03:00) and [05:00, 06:00); at 08:30 its gaps are
// [03:00, 05:00) and [06:00, 08:00), four hours (lookback widens a run's
// work, never the gaps), and its lag is 4h30m: the 03:00 hour has been
// computable since 04:00. A partial oldest gap lags from its own end. A
// daily model on a noon cron is due only to the day the last firing
// closed. Caught up, or asked before the gap was due, the lag is 0; an
// EXTERNAL model and a model without a start have no gaps, and an invalid
// schedule is the model's error.
func TestModelGaps(t *testing.T) {
	t.Parallel()
	hourly := &model.Model{Name: "s.h", Kind: model.KindIncrementalByTimeRange, Cron: "@hourly", IntervalUnit: interval.Hour,
		Lookback: 2, Start: ts(t, "2024-01-01T00:00:00Z"), HeaderPos: model.Pos{File: "models/h.sql", Line: 1, Col: 1}}
	exec := ts(t, "2024-01-01T08:30:00Z")
	covered := interval.NewSet(rng(t, "2024-01-01T00:00:00Z", "2024-01-01T03:00:00Z"), rng(t, "2024-01-01T05:00:00Z", "2024-01-01T06:00:00Z"))

	g, err := ModelGaps(hourly, covered, exec)
	require.NoError(t, err)
	require.Equal(t, "{[2024-01-01T03:00:00Z, 2024-01-01T05:00:00Z) [2024-01-01T06:00:00Z, 2024-01-01T08:00:00Z)}", g.Missing.String())
	require.Equal(t, 4, g.Buckets)
	require.Equal(t, interval.Hour, g.Unit)
	require.False(t, g.Empty())
	require.Equal(t, 4*time.Hour+30*time.Minute, g.Lag(exec))
	require.Zero(t, g.Lag(ts(t, "2024-01-01T03:30:00Z")), "not behind an execution time before the gap was computable")

	partial := interval.NewSet(rng(t, "2024-01-01T00:00:00Z", "2024-01-01T03:30:00Z"), rng(t, "2024-01-01T03:45:00Z", "2024-01-01T08:00:00Z"))
	g, err = ModelGaps(hourly, partial, exec)
	require.NoError(t, err)
	require.Equal(t, "{[2024-01-01T03:30:00Z, 2024-01-01T03:45:00Z)}", g.Missing.String())
	require.Equal(t, 1, g.Buckets, "a partial bucket counts as one")
	require.Equal(t, 4*time.Hour+45*time.Minute, g.Lag(exec))

	g, err = ModelGaps(hourly, interval.NewSet(rng(t, "2024-01-01T00:00:00Z", "2024-01-01T08:00:00Z")), exec)
	require.NoError(t, err)
	require.True(t, g.Empty(), "08:00-09:00 is not due before 09:00")
	require.Zero(t, g.Buckets)
	require.Zero(t, g.Lag(exec))

	daily := &model.Model{Name: "s.d", Kind: model.KindIncrementalByTimeRange, Cron: "0 12 * * *", IntervalUnit: interval.Day,
		Start: ts(t, "2024-01-01T00:00:00Z")}
	g, err = ModelGaps(daily, interval.NewSet(rng(t, "2024-01-01T00:00:00Z", "2024-01-02T00:00:00Z")), ts(t, "2024-01-05T10:00:00Z"))
	require.NoError(t, err)
	require.Equal(t, "{[2024-01-02T00:00:00Z, 2024-01-04T00:00:00Z)}", g.Missing.String(), "the 4th is due only from the 5th at noon")
	require.Equal(t, 2*24*time.Hour+10*time.Hour, g.Lag(ts(t, "2024-01-05T10:00:00Z")))

	for _, m := range []*model.Model{
		{Name: "s.ext", Kind: model.KindExternal, Cron: "@daily", IntervalUnit: interval.Day},
		{Name: "s.nostart", Kind: model.KindFull, Cron: "@daily", IntervalUnit: interval.Day},
	} {
		g, err := ModelGaps(m, interval.Set{}, exec)
		require.NoError(t, err, m.Name)
		require.True(t, g.Empty(), m.Name)
		require.Zero(t, g.Lag(exec), m.Name)
	}

	bad := *hourly
	bad.IntervalUnit = interval.Month // coarser than an hourly cron, without allow_partials
	_, err = ModelGaps(&bad, covered, exec)
	require.ErrorIs(t, err, ErrInvalidSpec)
	var me *model.Error
	require.ErrorAs(t, err, &me)
	require.ErrorContains(t, err, "models/h.sql:1:1: model s.h")
}
