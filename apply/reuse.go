package apply

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/gapless-dev/gapless/state"
)

// ErrReuseLost is returned when a version the plan reuses (plan.Reuses:
// another environment built it, so the plan has no backfill for it) has lost
// intervals since the plan was built, for instance because the janitor
// dropped it. Nothing is computed in its place: the plan never widens its
// work at apply time (design invariant 5); a new plan computes it.
var ErrReuseLost = errors.New("a version the plan reuses is no longer built")

// checkReuses refuses, with ErrReuseLost, to backfill and promote a plan that
// counted on work state no longer holds: every plan.Reuse's Covered must
// still be covered now. Once the apply is recorded, the janitor keeps the
// plan's versions, so the check holds through promotion.
func (a *applier) checkReuses(ctx context.Context) error {
	if len(a.Plan.Reuses) == 0 {
		return nil
	}
	keys := make([]state.VersionKey, len(a.Plan.Reuses))
	for i, r := range a.Plan.Reuses {
		keys[i] = state.VersionKey{Name: r.Name, Version: r.Version}
	}
	covered, err := a.Store.GetIntervals(ctx, keys)
	if err != nil {
		return fmt.Errorf("reading the intervals of the versions plan %s reuses: %w", a.Plan.ID, err)
	}
	for i, r := range a.Plan.Reuses {
		lost := r.Covered.Subtract(covered[keys[i]])
		if lost.IsEmpty() {
			continue
		}
		by := "an earlier plan"
		if len(r.BuiltBy) > 0 {
			by = strings.Join(r.BuiltBy, ", ")
		}
		return fmt.Errorf("plan %s reuses %s version %s, which %s built, but state no longer holds %s of it; build a new plan: %w",
			a.Plan.ID, r.Name, r.Version, by, lost, ErrReuseLost)
	}
	return nil
}
