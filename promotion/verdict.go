package promotion

import (
	"fmt"
	"strings"
	"time"

	"github.com/gapless-dev/gapless/cadence"
	"github.com/gapless-dev/gapless/internal/invariants"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/state"
)

// Reason is a verdict's stable reason code. Stored events and logs carry
// it; codes never change meaning.
type Reason string

// Reason codes. The first three accept; every other one rejects.
const (
	// Covered: the replacement covers everything the incumbent covers now.
	Covered Reason = "covered"
	// TrailingGapAccepted: trailing-gap accepted a bounded post-plan suffix
	// as debt.
	TrailingGapAccepted Reason = "trailing_gap_accepted"
	// CaughtUp: catch-up filled the tail and the strict check passed.
	CaughtUp Reason = "caught_up"

	// IncumbentAdvanced: the scheduler advanced the incumbent after the
	// plan was built and the policy (strict, or catch-up/replan between
	// attempts) does not accept the trailing gap.
	IncumbentAdvanced Reason = "incumbent_advanced"
	// HistoricalGap: the replacement misses time before the incumbent's
	// frontier at plan time: the plan's own work is incomplete.
	HistoricalGap Reason = "historical_gap"
	// InternalGap: what the replacement misses after the plan-time
	// frontier is not one contiguous trailing suffix, or the replacement
	// covers time after a hole (past the incumbent's frontier too).
	InternalGap Reason = "internal_gap"
	// ScheduleChanged: the cron, interval unit or partial setting differs
	// between incumbent and replacement, so advances cannot be counted.
	ScheduleChanged Reason = "schedule_changed"
	// OverBound: the suffix counts more scheduler advances than the bound.
	OverBound Reason = "over_bound"
	// DownstreamCovered: a downstream candidate already holds rows over the
	// suffix; filling the parent later would not recompute them.
	DownstreamCovered Reason = "downstream_covered"
	// IncumbentChanged: the environment no longer serves the incumbent the
	// plan recorded.
	IncumbentChanged Reason = "incumbent_changed"
	// ConflictingPlan: another plan was promoted since this one was built.
	ConflictingPlan Reason = "conflicting_plan"
	// AttemptsExhausted: catch-up or replan used every attempt and the
	// incumbent still advanced past the replacement.
	AttemptsExhausted Reason = "attempts_exhausted"
)

// Accepts reports whether r is an accepting reason.
func (r Reason) Accepts() bool { return r == Covered || r == TrailingGapAccepted || r == CaughtUp }

// Candidate is what the promotion check knows of one model in its scope: a
// model whose version the plan replaces, where incumbent and replacement
// are both incremental and the incumbent has intervals.
type Candidate struct {
	Model string
	// Recorded is the incumbent as the plan recorded it at build time;
	// Served is what the environment serves now (zero if nothing).
	Recorded, Served state.SnapshotRef
	// Incumbent and Replacement are the two schedules.
	Incumbent, Replacement cadence.Spec
	// FrontierAtPlan is the incumbent's frontier when the plan was built;
	// FrontierNow is its frontier now, in the promotion's transaction.
	FrontierAtPlan, FrontierNow time.Time
	// Covered is the replacement's coverage now.
	Covered interval.Set
	// Downstream lists the plan's transitive downstream candidates of this
	// model with their coverage now.
	Downstream []Downstream
}

// Downstream is one transitive child of a candidate in the plan.
type Downstream struct {
	Model string
	// Reused: the child keeps the physical table (and the version) it has
	// in the environment now, as a forward-only change does. Its rows over
	// the suffix were computed by the incumbent and it is allowed to keep
	// them: its next scheduled interval reads the new parent.
	Reused  bool
	Covered interval.Set
}

// Verdict is the promotion check's answer for one model. Every field is a
// stable, loggable fact.
type Verdict struct {
	Model  string `json:"model"`
	Policy string `json:"policy"` // Policy.String()
	Reason Reason `json:"reason"`
	// Accepted: the model may be promoted.
	Accepted       bool      `json:"accepted"`
	FrontierAtPlan time.Time `json:"frontier_at_plan,omitzero"`
	FrontierNow    time.Time `json:"frontier_now,omitzero"`
	// Missing is everything the replacement lacks of [start, FrontierNow).
	Missing interval.Set `json:"missing"`
	// Suffix is the trailing gap (zero when there is none or the gap is not
	// a single suffix).
	Suffix interval.Range `json:"suffix,omitzero"`
	// Advances is the number of scheduler advances the suffix spans; Bound
	// is trailing-gap's bound.
	Advances int `json:"advances"`
	Bound    int `json:"bound"`
	// Child names the downstream model of a DownstreamCovered rejection.
	Child string `json:"child,omitempty"`
}

// Debt returns the freshness debt an accepting trailing-gap verdict
// creates, and false for any other verdict.
func (v Verdict) Debt(version string) (state.Debt, bool) {
	if v.Reason != TrailingGapAccepted || v.Suffix.Empty() {
		return state.Debt{}, false
	}
	return state.Debt{Model: v.Model, Version: version, Range: v.Suffix, Policy: string(TrailingGap),
		Bound: v.Bound, Advances: v.Advances}, true
}

// Judge is the promotion check for one candidate under p.
//
// The rules, in order:
//  1. the environment must still serve the incumbent the plan recorded
//     (IncumbentChanged);
//  2. a replacement covering [start, FrontierNow) is accepted (Covered),
//     provided what it covers past FrontierNow (a dev environment's run, or
//     concurrent batches) leaves no hole either: the check runs to the
//     later of FrontierNow and the replacement's own frontier, because
//     serving rows after a missing interval is serving a gap;
//  3. anything missing before FrontierAtPlan is a HistoricalGap, and a
//     missing part that is not one trailing suffix is an InternalGap: no
//     policy accepts either;
//  4. what is left is a post-plan trailing suffix. Strict, catch-up and
//     replan reject it as IncumbentAdvanced (catch-up and replan then act
//     on it); lock rejects it likewise (its leases should have prevented
//     it);
//  5. trailing-gap accepts it only if the schedules agree
//     (ScheduleChanged), its advances, counted from the suffix's start to
//     FrontierNow on the cron (never lookback-widened work), are at most
//     the bound (OverBound), and no non-reused downstream candidate has
//     coverage overlapping it (DownstreamCovered).
//
// In invariants builds (internal/invariants) every verdict is checked:
// it accepts no gap, or exactly one bounded post-plan suffix.
func Judge(p Policy, c Candidate) Verdict {
	v := judge(p, c)
	if invariants.Enabled {
		v.mustBeValid()
	}
	return v
}

// judge is Judge without the check of its verdict.
func judge(p Policy, c Candidate) Verdict {
	p = p.OrDefault()
	v := Verdict{Model: c.Model, Policy: p.String(), FrontierAtPlan: c.FrontierAtPlan.UTC(), FrontierNow: c.FrontierNow.UTC(),
		Bound: p.MaxTrailingGapIntervals}
	if c.Served != c.Recorded {
		v.Reason = IncumbentChanged
		return v
	}
	end := c.FrontierNow
	if f := c.Covered.Frontier(); f.After(end) {
		end = f
	}
	required := interval.NewRange(c.Replacement.Unit.Floor(c.Replacement.Start), end)
	v.Missing = c.Covered.Missing(required)
	if v.Missing.IsEmpty() {
		v.Reason, v.Accepted = Covered, true
		return v
	}
	if !v.Missing.IntersectRange(interval.NewRange(required.Start, c.FrontierAtPlan)).IsEmpty() {
		v.Reason = HistoricalGap
		return v
	}
	suffix, ok := c.Covered.OnlyTrailingGap(required)
	if !ok {
		v.Reason = InternalGap
		return v
	}
	v.Suffix = suffix
	v.Advances = c.Incumbent.Advances(suffix.Start, suffix.End)
	if p.Name != TrailingGap {
		v.Reason = IncumbentAdvanced
		return v
	}
	if !sameSchedule(c.Incumbent, c.Replacement) {
		v.Reason = ScheduleChanged
		return v
	}
	if v.Advances > p.MaxTrailingGapIntervals {
		v.Reason = OverBound
		return v
	}
	for _, d := range c.Downstream {
		if !d.Reused && !d.Covered.IntersectRange(suffix).IsEmpty() {
			v.Reason, v.Child = DownstreamCovered, d.Model
			return v
		}
	}
	v.Reason, v.Accepted = TrailingGapAccepted, true
	return v
}

// sameSchedule: the advances of the incumbent are the replacement's
// advances only when both fire and bucket alike.
func sameSchedule(a, b cadence.Spec) bool {
	return a.Cron.String() == b.Cron.String() && a.Unit == b.Unit && a.AllowPartials == b.AllowPartials
}

// Error is a promotion refused by the check: every rejecting verdict, in
// plan order. It says which rule rejected each model and which policy or
// flag would have helped.
type Error struct {
	Verdicts []Verdict
}

func (e *Error) Error() string {
	parts := make([]string, len(e.Verdicts))
	for i, v := range e.Verdicts {
		parts[i] = v.Explain()
	}
	return "promotion refused: " + strings.Join(parts, "; ")
}

// OnlyAdvanced reports whether every rejection is an incumbent advance:
// the one failure catch-up and replan can repair.
func (e *Error) OnlyAdvanced() bool {
	for _, v := range e.Verdicts {
		if v.Reason != IncumbentAdvanced {
			return false
		}
	}
	return len(e.Verdicts) > 0
}

// Explain is one rejecting verdict in words: the model, the rule, the
// range, the frontiers, and what would have helped.
func (v Verdict) Explain() string {
	when := fmt.Sprintf("incumbent frontier %s at plan time, %s now", stamp(v.FrontierAtPlan), stamp(v.FrontierNow))
	switch v.Reason {
	case IncumbentChanged:
		return fmt.Sprintf("%s [%s]: the environment no longer serves the incumbent this plan was built against; build a new plan", v.Model, v.Reason)
	case HistoricalGap:
		return fmt.Sprintf("%s [%s]: the replacement is missing %s, before the plan-time frontier (%s); no policy accepts a historical gap: apply the plan again to resume its backfill, or build a new plan",
			v.Model, v.Reason, v.Missing, when)
	case InternalGap:
		if !v.Missing.IsEmpty() && !v.Missing.Ranges()[len(v.Missing.Ranges())-1].Start.Before(v.FrontierNow) {
			return fmt.Sprintf("%s [%s]: the replacement is missing %s but covers time after it, past the incumbent's frontier (%s); serving it would serve a gap: "+
				"another apply of this version (a failed or running backfill with batch_concurrency) left the hole; resume that apply, or wait for it, then apply again",
				v.Model, v.Reason, v.Missing, when)
		}
		return fmt.Sprintf("%s [%s]: the replacement is missing %s, which is not one trailing range (%s); no policy accepts an internal gap: build a new plan, which backfills it",
			v.Model, v.Reason, v.Missing, when)
	case IncumbentAdvanced:
		return fmt.Sprintf("%s [%s] under %s: the scheduler advanced the incumbent %d time(s) after the plan was built, so the replacement is missing %s (%s); "+
			"--on-incumbent-advance trailing-gap --max-trailing-gap-intervals %d would accept it as tracked debt, catch-up or replan would fill it",
			v.Model, v.Reason, v.Policy, v.Advances, v.Suffix, when, max(v.Advances, 1))
	case ScheduleChanged:
		return fmt.Sprintf("%s [%s] under %s: the replacement is missing %s (%s), and its cron or interval unit differs from the incumbent's, so the advances cannot be counted; catch-up or replan would fill it",
			v.Model, v.Reason, v.Policy, v.Suffix, when)
	case OverBound:
		return fmt.Sprintf("%s [%s] under %s: the trailing gap %s spans %d scheduler advances, over the bound of %d (%s); --max-trailing-gap-intervals %d would accept it, catch-up or replan would fill it",
			v.Model, v.Reason, v.Policy, v.Suffix, v.Advances, v.Bound, when, v.Advances)
	case DownstreamCovered:
		return fmt.Sprintf("%s [%s] under %s: downstream model %s already has rows over the trailing gap %s, which filling %s later would not recompute; catch-up recomputes them, or replan",
			v.Model, v.Reason, v.Policy, v.Child, v.Suffix, v.Model)
	case ConflictingPlan:
		return fmt.Sprintf("[%s]: another plan was promoted since this one was built; build a new plan against the environment as it is now", v.Reason)
	case AttemptsExhausted:
		return fmt.Sprintf("%s [%s] under %s: the scheduler kept advancing the incumbent; the replacement is still missing %s (%s); raise --max-attempts, or use trailing-gap",
			v.Model, v.Reason, v.Policy, v.Suffix, when)
	}
	return fmt.Sprintf("%s [%s]", v.Model, v.Reason)
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "none"
	}
	return t.UTC().Format(time.RFC3339)
}
