package apply

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/schedule"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/state"
)

// GapError is a promotion refused by the strict no-gap check: the
// replacement of Model does not cover [model start, FrontierNow), the
// incumbent's frontier as it is in state at promotion. Missing is what the
// replacement lacks. FrontierAtPlan is the incumbent's frontier when the plan
// was built; when FrontierNow is later, the scheduler advanced the incumbent
// meanwhile (seed 000's race).
type GapError struct {
	Model          string
	Missing        interval.Set
	FrontierAtPlan time.Time
	FrontierNow    time.Time
}

func (e *GapError) Error() string {
	why := "the replacement has gaps before the incumbent's frontier"
	if e.FrontierNow.After(e.FrontierAtPlan) {
		why = fmt.Sprintf("the incumbent advanced from %s (when the plan was built) to %s (now) while the replacement was built",
			e.FrontierAtPlan.UTC().Format(time.RFC3339), e.FrontierNow.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("no-gap check failed for %s: the replacement is missing %s; %s. "+
		"Nothing was promoted. Build a new plan (it reuses everything already computed and backfills only the new tail) and apply it, "+
		"or wait for a promotion policy that accepts a bounded trailing gap",
		e.Model, e.Missing, why)
}

// checkNoGaps is the strict no-gap check, run inside the promotion
// transaction so that no interval write can slip between check and commit.
//
// Scope: every model the plan replaces (its version changes) where both
// the incumbent and the replacement are incremental and the incumbent has
// intervals now. The replacement must cover [Unit.Floor(model start),
// incumbent's frontier now). Every failing model is reported (joined
// *GapErrors, in plan order).
func checkNoGaps(ctx context.Context, r state.Reader, p *plan.Plan, incumbents map[string]*snapshot.Snapshot) error {
	next := map[string]*snapshot.Snapshot{}
	for _, s := range p.Snapshots {
		next[s.Name] = s
	}
	type pair struct {
		inc     plan.Incumbent
		repl    *snapshot.Snapshot
		incKey  state.VersionKey
		replKey state.VersionKey
	}
	var pairs []pair
	var keys []state.VersionKey
	for _, inc := range p.Incumbents {
		repl, ok := next[inc.Name]
		old := incumbents[inc.Name]
		inScope := ok && old != nil && repl.Version != inc.Snapshot.Version &&
			execute.IsIncremental(old.Model.Kind) && execute.IsIncremental(repl.Model.Kind)
		if !inScope {
			continue
		}
		pr := pair{inc: inc, repl: repl, incKey: inc.Snapshot.VersionKey(),
			replKey: state.VersionKey{Name: repl.Name, Version: repl.Version}}
		pairs = append(pairs, pr)
		keys = append(keys, pr.incKey, pr.replKey)
	}
	if len(pairs) == 0 {
		return nil
	}
	covered, err := r.GetIntervals(ctx, keys)
	if err != nil {
		return fmt.Errorf("reading intervals for the no-gap check: %w", err)
	}
	var errs []error
	for _, pr := range pairs {
		frontierNow := covered[pr.incKey].Frontier()
		if frontierNow.IsZero() {
			continue
		}
		spec, err := schedule.ForModel(pr.repl.Model)
		if err != nil {
			return err
		}
		required := interval.NewRange(spec.Unit.Floor(spec.Start), frontierNow)
		missing := covered[pr.replKey].Missing(required)
		if !missing.IsEmpty() {
			errs = append(errs, &GapError{Model: pr.repl.Name, Missing: missing,
				FrontierAtPlan: pr.inc.Frontier, FrontierNow: frontierNow})
		}
	}
	return errors.Join(errs...)
}
