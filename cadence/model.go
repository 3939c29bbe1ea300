package cadence

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
// checked each part, so an error here is a *model.Error at m's header that
// names the model and what is missing; a missing start wraps ErrNoStart.
func ForModel(m *model.Model) (Spec, error) {
	if m.Start.IsZero() {
		return Spec{}, &model.Error{Pos: m.HeaderPos, Code: model.CodeInvalid, Err: ErrNoStart, Msg: fmt.Sprintf(
			"model %s has no start, and none of the models it reads has one: set start in its MODEL header "+
				"(start '2024-01-01') or model_defaults.start in gapless.yaml", m.Name)}
	}
	c, err := cron.Parse(m.Cron)
	if err != nil {
		return Spec{}, &model.Error{Pos: m.HeaderPos, Code: model.CodeBadCron, Err: err, Msg: fmt.Sprintf("model %s: %v", m.Name, err)}
	}
	s := Spec{
		Start: m.Start, End: m.End, Cron: c, Unit: m.IntervalUnit,
		Lookback: m.Lookback, AllowPartials: m.AllowPartials,
	}
	if m.CronTZ != "" {
		loc, err := model.LoadCronTZ(m.CronTZ)
		if err != nil {
			return Spec{}, &model.Error{Pos: m.HeaderPos, Code: model.CodeBadValue, Err: err, Msg: fmt.Sprintf("model %s: bad cron_tz %q: %v", m.Name, m.CronTZ, err)}
		}
		s.Location = loc
	}
	if err := s.Validate(); err != nil {
		return Spec{}, &model.Error{Pos: m.HeaderPos, Code: model.CodeInvalid, Err: err, Msg: fmt.Sprintf("model %s: %v", m.Name, err)}
	}
	return s, nil
}
