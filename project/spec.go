package project

import (
	"errors"
	"fmt"

	"github.com/gapless-dev/gapless/cron"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/schedule"
)

// ErrNoStart is wrapped by Spec for a model without a start: its history
// has no first interval, so nothing can be counted as missing.
var ErrNoStart = errors.New("no start")

// Spec is the schedule of model m: its start, end, cron, interval unit,
// lookback and partials flag, validated. The parser has already checked each
// part, so an error here names the model and what is missing.
func Spec(m *model.Model) (schedule.Spec, error) {
	if m.Start.IsZero() {
		return schedule.Spec{}, fmt.Errorf("model %s (%s): %w; set start in its MODEL header or model_defaults.start in gapless.yaml", m.Name, m.HeaderPos, ErrNoStart)
	}
	c, err := cron.Parse(m.Cron)
	if err != nil {
		return schedule.Spec{}, fmt.Errorf("model %s (%s): %w", m.Name, m.HeaderPos, err)
	}
	s := schedule.Spec{
		Start: m.Start, End: m.End, Cron: c, Unit: m.IntervalUnit,
		Lookback: m.Lookback, AllowPartials: m.AllowPartials,
	}
	if err := s.Validate(); err != nil {
		return schedule.Spec{}, fmt.Errorf("model %s (%s): %w", m.Name, m.HeaderPos, err)
	}
	return s, nil
}
