package promotion

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gapless-dev/gapless/internal/invariants"
	"github.com/gapless-dev/gapless/interval"
)

// verdictInvariant names the invariant Judge keeps in a violation's panic.
const verdictInvariant = "a verdict accepts only what its policy allows: no gap, or one bounded post-plan trailing gap that becomes debt"

// mustBeValid panics, naming the verdict invariant, when v breaks it: a
// bug in Judge. Judge calls it in invariants builds (internal/invariants).
func (v Verdict) mustBeValid() {
	if err := v.check(); err != nil {
		invariants.Violated(verdictInvariant, err)
	}
}

// check verifies what Judge guarantees of a verdict (design invariant 2:
// no unaccepted gap is ever served), in time linear in Missing:
//   - Accepted is exactly Reason.Accepts();
//   - a Covered verdict misses nothing;
//   - a TrailingGapAccepted verdict is trailing-gap's, misses exactly its
//     Suffix (non-empty, starting no earlier than FrontierAtPlan), and
//     spans at most Bound advances, so its Debt records the whole gap with
//     its bound.
func (v Verdict) check() error {
	if v.Accepted != v.Reason.Accepts() {
		return fmt.Errorf("%s: accepted is %t for reason %s", v.Model, v.Accepted, v.Reason)
	}
	switch v.Reason {
	case Covered:
		if !v.Missing.IsEmpty() {
			return fmt.Errorf("%s: covered, but %v is missing", v.Model, v.Missing)
		}
	case TrailingGapAccepted:
		switch {
		case !strings.HasPrefix(v.Policy, string(TrailingGap)+"("):
			return fmt.Errorf("%s: a trailing gap accepted under %s", v.Model, v.Policy)
		case v.Suffix.Empty():
			return errors.New(v.Model + ": a trailing gap accepted with no suffix")
		case !v.Missing.Equal(interval.NewSet(v.Suffix)):
			return fmt.Errorf("%s: accepted suffix %v, but %v is missing", v.Model, v.Suffix, v.Missing)
		case v.Suffix.Start.Before(v.FrontierAtPlan):
			return fmt.Errorf("%s: accepted suffix %v starts before the plan-time frontier %s", v.Model, v.Suffix, v.FrontierAtPlan)
		case v.Advances > v.Bound:
			return fmt.Errorf("%s: accepted %d advances over the bound %d", v.Model, v.Advances, v.Bound)
		}
	}
	return nil
}
