package schedule

import (
	"errors"
	"fmt"

	"github.com/gapless-dev/gapless/cron"
	"github.com/gapless-dev/gapless/model"
)

// ErrNoStart is wrapped by ForModel for a model without a start: its history
// has no first interval, so nothing can be counted as missing.
var ErrNoStart = errors.New("no start")

// ForModel is the schedule of model m: its start, end, cron, interval unit,
// lookback and partials flag, validated. The model parser has already
// checked each part, so an error here names the model and what is missing.
func ForModel(m *model.Model) (Spec, error) {
	if m.Start.IsZero() {
		return Spec{}, fmt.Errorf("model %s (%s): %w; set start in its MODEL header or model_defaults.start in gapless.yaml", m.Name, m.HeaderPos, ErrNoStart)
	}
	c, err := cron.Parse(m.Cron)
	if err != nil {
		return Spec{}, fmt.Errorf("model %s (%s): %w", m.Name, m.HeaderPos, err)
	}
	s := Spec{
		Start: m.Start, End: m.End, Cron: c, Unit: m.IntervalUnit,
		Lookback: m.Lookback, AllowPartials: m.AllowPartials,
	}
	if err := s.Validate(); err != nil {
		return Spec{}, fmt.Errorf("model %s (%s): %w", m.Name, m.HeaderPos, err)
	}
	return s, nil
}
