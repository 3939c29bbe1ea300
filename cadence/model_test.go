package cadence

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/model"
)

func TestForModel(t *testing.T) {
	t.Parallel()
	m := &model.Model{Name: "s.t", Cron: "0 12 * * *", IntervalUnit: interval.Day, Lookback: 2,
		Start: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), HeaderPos: model.Pos{File: "models/t.sql", Line: 1, Col: 1}}
	s, err := ForModel(m)
	require.NoError(t, err)
	require.Equal(t, 2, s.Lookback)
	require.Equal(t, time.Date(2024, 1, 4, 0, 0, 0, 0, time.UTC), s.Bound(time.Date(2024, 1, 5, 10, 0, 0, 0, time.UTC)))

	m.Start = time.Time{}
	_, err = ForModel(m)
	require.ErrorIs(t, err, ErrNoStart)
	require.ErrorContains(t, err, "models/t.sql:1:1: model s.t has no start")
	var me *model.Error
	require.ErrorAs(t, err, &me, "a missing start is a project error at the model's header")

	m.Start = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	m.IntervalUnit = interval.Month // coarser than a daily cron, without allow_partials
	_, err = ForModel(m)
	require.ErrorIs(t, err, ErrInvalidSpec)
}
