package cadence

import (
	"errors"
	"time"

	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/model"
)

// Gaps are what a model's version is missing at an execution time: the
// intervals due by then, from the model's start to Spec.Bound(exec), that
// its interval record does not cover. This is the one definition of a gap:
// `gapless status` lists the gaps, the scheduler's lag is how old the
// oldest is, and a run computes them (Spec.Missing, whose Missing they
// are).
type Gaps struct {
	// Missing is the due window minus the covered intervals, merged; empty
	// when nothing is missing.
	Missing interval.Set
	// Buckets counts the unit buckets in Missing; a partial bucket counts
	// as one.
	Buckets int
	// Unit is the model's interval unit.
	Unit interval.Unit
}

// Gaps is s's gaps at exec given what is covered (see Gaps).
func (s Spec) Gaps(covered interval.Set, exec time.Time) Gaps {
	r := s.Missing(covered, exec)
	return Gaps{Missing: r.Missing, Buckets: r.Buckets, Unit: s.Unit}
}

// ModelGaps is model m's gaps at exec given what its version covers. An
// EXTERNAL model (gapless computes nothing of it) and a model without a
// start (no first interval to count from) have none. A model whose
// schedule is invalid is an error (ForModel's *model.Error).
func ModelGaps(m *model.Model, covered interval.Set, exec time.Time) (Gaps, error) {
	if m.Kind == model.KindExternal {
		return Gaps{Unit: m.IntervalUnit}, nil
	}
	spec, err := ForModel(m)
	switch {
	case errors.Is(err, ErrNoStart):
		return Gaps{Unit: m.IntervalUnit}, nil
	case err != nil:
		return Gaps{}, err
	}
	return spec.Gaps(covered, exec), nil
}

// Empty reports whether nothing is missing.
func (g Gaps) Empty() bool { return g.Missing.IsEmpty() }

// Lag is how far the oldest gap is behind exec: exec minus the end of the
// first unit bucket of the oldest missing range (the range's end when it
// ends inside that bucket), the moment that interval became computable;
// 0 when nothing is missing or the gap is not behind exec.
func (g Gaps) Lag(exec time.Time) time.Duration {
	for r := range g.Missing.All() {
		end := g.Unit.Add(g.Unit.Floor(r.Start), 1)
		if end.After(r.End) {
			end = r.End
		}
		return max(exec.Sub(end), 0)
	}
	return 0
}
