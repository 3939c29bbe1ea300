package apply

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/promotion"
	"github.com/gapless-dev/gapless/state"
)

// StaleError refuses a plan built against an environment that another plan
// changed since (design invariant 1: the plan's evidence is its expected
// plan id and generation). It is returned by the check stage, before the
// plan creates a table or computes a batch, and by the promote stage when
// another plan won the race after the check. It says, in the user's words,
// which plan won and what to do; errors.Is(err, state.ErrConflictingPlan)
// holds.
//
// Only another promotion makes a plan stale: a scheduler run that advances
// what the environment serves changes neither its plan id nor its
// generation, and is the promotion policies' business.
type StaleError struct {
	Environment string
	// PlanID is the refused plan; Expected what it was built against.
	PlanID   string
	Expected plan.Expected
	// Current is the plan the environment serves now, at Generation: ""
	// (and 0) when it no longer exists or was invalidated.
	Current    string
	Generation int64
	// PromotedAt is when Current was promoted, By who promoted it ("" when
	// not recorded), and Now when the refusal was decided.
	PromotedAt time.Time
	By         string
	Now        time.Time
}

func (e *StaleError) Error() string {
	env := e.Environment
	fix := fmt.Sprintf("re-run `gapless plan %s`", env)
	against := "plan " + e.Expected.PlanID
	if e.Expected.PlanID == "" {
		against = fmt.Sprintf("no %s (it did not exist)", env)
	}
	if e.Current == "" {
		return fmt.Sprintf("%s was removed or invalidated after this plan was built against %s; %s", env, against, fix)
	}
	who := "promoted " + Ago(e.Now.Sub(e.PromotedAt)) + " ago"
	if e.PromotedAt.IsZero() {
		who = "promoted"
	}
	if e.By != "" {
		who += " by " + e.By
	}
	if e.Current == e.Expected.PlanID {
		return fmt.Sprintf("%s was promoted again (plan %s, generation %d, %s) after this plan was built against its generation %d; %s",
			env, e.Current, e.Generation, who, e.Expected.Generation, fix)
	}
	verb := "changed"
	if e.Expected.PlanID == "" {
		verb = "created"
	}
	return fmt.Sprintf("%s was %s by plan %s (%s) after this plan was built against %s; %s", env, verb, e.Current, who, against, fix)
}

// Unwrap makes a stale plan a state.ErrConflictingPlan.
func (e *StaleError) Unwrap() error { return state.ErrConflictingPlan }

// Ago is a duration the way a person says how long ago: "40s", "5m",
// "3h", "2d" (rounded down; never negative).
func Ago(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(int64(d/time.Second), 0))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int64(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int64(d/time.Hour))
	}
	return fmt.Sprintf("%dd", int64(d/(24*time.Hour)))
}

// Refused reports whether err refuses the plan for good, with a stable
// reason: "conflicting_plan" (a stale plan, or another plan won the
// promotion), a policy reason code (the promotion check, e.g.
// "historical_gap"; the first rejecting model's), or "superseded" (a newer
// promotion landed before this plan's views were updated). Applying the
// same plan again cannot succeed, unless the policy is changed (apply's
// policy flags). A failed batch, a cancelled apply or an unreachable store
// is not a refusal: that apply may be resumed.
func Refused(err error) (string, bool) {
	var perr *promotion.Error
	switch {
	case errors.As(err, &perr) && len(perr.Verdicts) > 0:
		return string(perr.Verdicts[0].Reason), true
	case errors.Is(err, state.ErrConflictingPlan):
		return string(promotion.ConflictingPlan), true
	case errors.Is(err, ErrSuperseded):
		return "superseded", true
	}
	return "", false
}

// checkCurrent is the check stage: it refuses, with a *StaleError, a plan
// whose environment is no longer at the plan id and generation it was built
// against, before anything is created or computed. A plan the environment
// already serves (an apply resumed after its promotion) passes. The
// refusal is recorded as a conflicting_plan rejection, as the promote
// stage records one, so the history names the plan.
func (a *applier) checkCurrent(ctx context.Context) error {
	env := a.Plan.Environment
	cur, err := a.Store.GetEnvironment(ctx, env)
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		return fmt.Errorf("reading environment %s: %w", env, err)
	}
	var current string
	var generation int64
	if cur != nil && !cur.Invalidated {
		current, generation = cur.PlanID, cur.Generation
	}
	if current == a.Plan.ID {
		return nil
	}
	if current == a.Plan.Expected.PlanID && generation == a.Plan.Expected.Generation {
		return nil
	}
	serr := a.staleError(ctx, cur)
	a.emit(ctx, PromotionRejected{Environment: env, Err: serr})
	a.recordVerdicts(ctx, []promotion.Verdict{{Policy: a.policy().String(), Reason: promotion.ConflictingPlan}})
	return serr
}

// staleError describes the environment cur (nil or invalidated: absent) to
// a plan built against something else: which plan is current, when it was
// promoted and by whom (the promotion_accepted event's "by", when
// recorded).
func (a *applier) staleError(ctx context.Context, cur *state.Environment) *StaleError {
	e := &StaleError{Environment: a.Plan.Environment, PlanID: a.Plan.ID, Expected: a.Plan.Expected, Now: a.now()}
	if cur == nil || cur.Invalidated {
		return e
	}
	e.Current, e.Generation, e.PromotedAt = cur.PlanID, cur.Generation, cur.PromotedAt
	evs, err := a.Store.ListEvents(ctx, state.EventFilter{Kinds: []string{state.EventPromotionAccepted},
		Environment: cur.Name, PlanID: cur.PlanID})
	if err != nil {
		a.log.WarnContext(ctx, "reading who promoted the current plan", slog.String(logkey.CurrentPlan, cur.PlanID), slog.Any(logkey.Error, err))
		return e
	}
	for _, ev := range evs {
		var d struct {
			Generation int64  `json:"generation"`
			By         string `json:"by"`
		}
		if ev.Model == "" && json.Unmarshal(ev.Data, &d) == nil && d.Generation == cur.Generation {
			e.By = d.By
		}
	}
	return e
}
