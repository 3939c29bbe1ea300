package apply

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/gapless-dev/gapless/cadence"
	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/promotion"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/state"
)

// promote is the promote stage: the compare-and-swap on the expected plan
// id with the promotion check inside the transaction (when the plan asks
// for it), under the apply's policy. Under catch-up it first fills the tail
// the scheduler added (see catchUp) and repeats that at most
// Policy.Attempts() times while the incumbent keeps advancing. If an
// earlier attempt already promoted this very plan, it is not repeated.
func (a *applier) promote(ctx context.Context, res *Result) error {
	env := a.Plan.Environment
	cur, err := a.Store.GetEnvironment(ctx, env)
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		return fmt.Errorf("reading environment %s: %w", env, err)
	}
	if cur != nil && !cur.Invalidated && cur.PlanID == a.Plan.ID {
		res.Environment, res.AlreadyPromoted = cur, true
		a.log.InfoContext(ctx, "plan already promoted; resuming after promotion", slog.Int64(logkey.Generation, cur.Generation))
		return nil
	}
	incumbents, err := a.incumbentSnapshots(ctx)
	if err != nil {
		return err
	}
	pol := a.policy()
	if pol.Name == promotion.Lock && a.Plan.Options.Checks() {
		return a.promoteLocked(ctx, res, cur, incumbents, pol)
	}
	catchUp := pol.Name == promotion.CatchUp && a.Plan.Options.Checks()
	for round := 1; ; round++ {
		if catchUp {
			if err := a.catchUp(ctx, res, incumbents, round); err != nil {
				return err
			}
		}
		err := a.promoteOnce(ctx, res, cur, incumbents, pol)
		var perr *promotion.Error
		if err == nil || !catchUp || !errors.As(err, &perr) || !perr.OnlyAdvanced() {
			return err
		}
		if round >= pol.Attempts() {
			return a.exhausted(ctx, perr, round)
		}
		a.log.InfoContext(ctx, "the scheduler advanced the incumbent again; catching up once more",
			slog.String(logkey.Policy, pol.String()), slog.Int(logkey.Round, round))
	}
}

// exhausted turns the last incumbent-advanced rejection of catch-up or
// replan into an AttemptsExhausted one, recorded like every rejection.
func (a *applier) exhausted(ctx context.Context, perr *promotion.Error, attempts int) error {
	out := &promotion.Error{}
	for _, v := range perr.Verdicts {
		v.Reason = promotion.AttemptsExhausted
		out.Verdicts = append(out.Verdicts, v)
	}
	a.recordVerdicts(ctx, out.Verdicts)
	return fmt.Errorf("after %d attempt(s): %w", attempts, out)
}

// policy is the policy this apply promotes under: Params.Policy when the
// caller overrides it, else what the plan recorded (strict for a plan that
// recorded none).
func (a *applier) policy() promotion.Policy {
	if a.Params.Policy != nil {
		return a.Params.Policy.OrDefault()
	}
	return a.Plan.Options.Policy.OrDefault()
}

// promoteOnce is one promotion attempt. The check (see check) runs inside
// the promotion transaction; the debts and acceptance events it returns are
// committed with the promotion. A rejection is logged and recorded as
// history, once per rejecting model (or once for the environment).
func (a *applier) promoteOnce(ctx context.Context, res *Result, cur *state.Environment,
	incumbents map[string]*snapshot.Snapshot, pol promotion.Policy) error {
	env := a.Plan.Environment
	var verdicts []promotion.Verdict
	var check func(context.Context, state.Reader) (state.CheckResult, error)
	if a.Plan.Options.Checks() {
		check = func(ctx context.Context, r state.Reader) (state.CheckResult, error) {
			var out state.CheckResult
			var err error
			verdicts, out, err = a.check(ctx, r, incumbents, pol)
			return out, err
		}
	}
	promoted, err := a.Store.Promote(ctx, state.PromoteParams{
		Environment: env, ExpectedPlanID: a.Plan.Expected.PlanID, PlanID: a.Plan.ID,
		Snapshots: a.snapshotRefs(), ExpiresAt: a.expiresAt(), Now: a.now(), Check: check, Gate: a.Gate,
	})
	if err != nil {
		a.emit(ctx, PromotionRejected{Environment: env, Err: err})
		var perr *promotion.Error
		switch {
		case errors.As(err, &perr):
			a.recordVerdicts(ctx, perr.Verdicts)
		case errors.Is(err, state.ErrConflictingPlan):
			v := promotion.Verdict{Policy: pol.String(), Reason: promotion.ConflictingPlan}
			a.recordVerdicts(ctx, []promotion.Verdict{v})
			// Another plan won after the check stage: say which, as the
			// check stage does. The store's error is logged, not shown.
			a.log.DebugContext(ctx, "promotion compare-and-swap failed", slog.Any(logkey.Error, err))
			now, rerr := a.Store.GetEnvironment(ctx, env)
			if rerr != nil && !errors.Is(rerr, state.ErrNotFound) {
				//nolint:errorlint // the failed re-read is context: callers branch on the compare-and-swap's error
				return fmt.Errorf("%s: %w (and re-reading %s failed: %v)", v.Explain(), err, env, rerr)
			}
			return a.staleError(ctx, now)
		default:
			a.appendEvents(ctx, []state.Event{{At: a.now(), Kind: state.EventPromotionRejected, Environment: env,
				PlanID: a.Plan.ID, Reason: "error", Data: mustJSON(map[string]string{"error": err.Error()})}})
		}
		return err
	}
	res.Environment = promoted
	res.Policy = pol.String()
	res.Verdicts = verdicts
	for _, v := range verdicts {
		logVerdict(ctx, a.log, v)
	}
	debts, err := a.Store.ListDebts(ctx, state.DebtFilter{Environment: env, PlanID: a.Plan.ID})
	if err != nil {
		return fmt.Errorf("reading the debt promotion %s accepted: %w", a.Plan.ID, err)
	}
	res.Debts = debts
	a.unchangedViews = unchangedViews(cur, a.Plan)
	a.emit(ctx, PromotionAccepted{Environment: env, Generation: promoted.Generation, Policy: pol.String(), Debts: debts})
	a.appendEvents(ctx, []state.Event{{At: a.now(), Kind: state.EventPromotionAccepted, Environment: env, PlanID: a.Plan.ID,
		Reason: "promoted", Data: mustJSON(promotedData{Generation: promoted.Generation, Policy: pol.String(), Debts: len(debts), By: a.Actor})}})
	return nil
}

// promotedData is the Data of the environment-wide promotion_accepted
// event (Reason "promoted", no model).
type promotedData struct {
	Generation int64  `json:"generation"`
	Policy     string `json:"policy"`
	Debts      int    `json:"debts"`
	// By is who applied the plan (Params.Actor), when known.
	By string `json:"by,omitempty"`
}

// expiresAt is when the environment this apply promotes expires: now plus
// Params.EnvironmentTTL, or zero (never) for prod and for a zero TTL.
func (a *applier) expiresAt() time.Time {
	if a.EnvironmentTTL <= 0 || a.Plan.Environment == plan.Prod {
		return time.Time{}
	}
	return a.now().Add(a.EnvironmentTTL)
}

// candidate is one model in the promotion check's scope.
type candidate struct {
	inc  plan.Incumbent
	old  *snapshot.Snapshot
	repl *snapshot.Snapshot
}

// scope is every model the plan replaces (its version changes) where both
// the incumbent and the replacement are incremental, in plan order. Whether
// the incumbent has intervals is decided against state by the caller.
func (a *applier) scope(incumbents map[string]*snapshot.Snapshot) []candidate {
	next := map[string]*snapshot.Snapshot{}
	for _, s := range a.Plan.Snapshots {
		next[s.Name] = s
	}
	var out []candidate
	for _, inc := range a.Plan.Incumbents {
		repl, ok := next[inc.Name]
		old := incumbents[inc.Name]
		inScope := ok && old != nil && repl.Version != inc.Snapshot.Version &&
			old.Model.Kind.IsIncremental() && repl.Model.Kind.IsIncremental()
		if inScope {
			out = append(out, candidate{inc: inc, old: old, repl: repl})
		}
	}
	return out
}

// downstream maps each model of the plan to its transitive children in the
// plan, in plan (topological) order.
func (a *applier) downstream() map[string][]*snapshot.Snapshot {
	children := map[string][]*snapshot.Snapshot{}
	for _, s := range a.Plan.Snapshots {
		for _, p := range s.Parents {
			children[p] = append(children[p], s)
		}
	}
	out := map[string][]*snapshot.Snapshot{}
	for _, s := range a.Plan.Snapshots {
		seen := map[string]bool{}
		stack := append([]*snapshot.Snapshot(nil), children[s.Name]...)
		for len(stack) > 0 {
			c := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if seen[c.Name] {
				continue
			}
			seen[c.Name] = true
			stack = append(stack, children[c.Name]...)
		}
		for _, c := range a.Plan.Snapshots {
			if seen[c.Name] {
				out[s.Name] = append(out[s.Name], c)
			}
		}
	}
	return out
}

// check is the promotion check, run inside the promotion transaction so
// that no interval write or environment change can slip between check and
// commit. For every model in scope (see scope) whose incumbent has
// intervals now, it gathers the facts from r and asks promotion.Judge. Any
// rejection fails the whole promotion with a *promotion.Error holding every
// rejecting verdict; otherwise the accepted debts and one acceptance event
// per verdict are returned for the promotion to commit.
func (a *applier) check(ctx context.Context, r state.Reader, incumbents map[string]*snapshot.Snapshot,
	pol promotion.Policy) ([]promotion.Verdict, state.CheckResult, error) {
	cands := a.scope(incumbents)
	if len(cands) == 0 {
		return nil, state.CheckResult{}, nil
	}
	served := map[string]state.SnapshotRef{}
	env, err := r.GetEnvironment(ctx, a.Plan.Environment)
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		return nil, state.CheckResult{}, fmt.Errorf("reading environment %s for the promotion check: %w", a.Plan.Environment, err)
	}
	if env != nil && !env.Invalidated {
		for _, ref := range env.Snapshots {
			served[ref.Name] = ref
		}
	}
	down := a.downstream()
	var keys []state.VersionKey
	for _, c := range cands {
		keys = append(keys, c.inc.Snapshot.VersionKey(), keyOf(c.repl))
		for _, d := range down[c.repl.Name] {
			keys = append(keys, keyOf(d))
		}
	}
	covered, err := r.GetIntervals(ctx, keys)
	if err != nil {
		return nil, state.CheckResult{}, fmt.Errorf("reading intervals for the promotion check: %w", err)
	}
	var verdicts, rejected []promotion.Verdict
	var out state.CheckResult
	now := a.now()
	for _, c := range cands {
		frontierNow := covered[c.inc.Snapshot.VersionKey()].Frontier()
		if frontierNow.IsZero() {
			continue // the incumbent has nothing a replacement could fall behind
		}
		incSpec, err := cadence.ForModel(c.old.Model)
		if err != nil {
			return nil, state.CheckResult{}, fmt.Errorf("the schedule of incumbent %s: %w", c.old.Name, err)
		}
		replSpec, err := cadence.ForModel(c.repl.Model)
		if err != nil {
			return nil, state.CheckResult{}, fmt.Errorf("the schedule of %s: %w", c.repl.Name, err)
		}
		pc := promotion.Candidate{Model: c.repl.Name, Recorded: c.inc.Snapshot, Served: served[c.repl.Name],
			Incumbent: incSpec, Replacement: replSpec, FrontierAtPlan: c.inc.Frontier, FrontierNow: frontierNow,
			Covered: covered[keyOf(c.repl)]}
		for _, d := range down[c.repl.Name] {
			if !d.Model.Kind.IsIncremental() {
				continue // built whole, from the parents as they are then
			}
			reused := served[d.Name].Version == d.Version
			pc.Downstream = append(pc.Downstream, promotion.Downstream{Model: d.Name, Reused: reused, Covered: covered[keyOf(d)]})
		}
		v := promotion.Judge(pol, pc)
		verdicts = append(verdicts, v)
		if !v.Accepted {
			rejected = append(rejected, v)
			continue
		}
		if d, ok := v.Debt(c.repl.Version); ok {
			d.AcceptedAt = now
			out.Debts = append(out.Debts, d)
		}
		out.Events = append(out.Events, verdictEvent(a.Plan, v, now))
	}
	if len(rejected) > 0 {
		return verdicts, state.CheckResult{}, &promotion.Error{Verdicts: rejected}
	}
	return verdicts, out, nil
}

func keyOf(s *snapshot.Snapshot) state.VersionKey {
	return state.VersionKey{Name: s.Name, Version: s.Version}
}

// verdictEvent is the history record of one verdict: an acceptance
// (promotion_accepted, or gap_accepted when it creates debt) or a
// rejection (promotion_rejected). Data holds every field of the verdict.
func verdictEvent(p *plan.Plan, v promotion.Verdict, now time.Time) state.Event {
	kind := state.EventPromotionRejected
	switch {
	case v.Reason == promotion.TrailingGapAccepted:
		kind = state.EventGapAccepted
	case v.Accepted:
		kind = state.EventPromotionAccepted
	}
	return state.Event{At: now, Kind: kind, Environment: p.Environment, Model: v.Model, PlanID: p.ID,
		Reason: string(v.Reason), Data: mustJSON(v)}
}

// recordVerdicts logs and records rejecting verdicts; the promotion they
// describe did not happen, so they are appended outside its transaction.
func (a *applier) recordVerdicts(ctx context.Context, vs []promotion.Verdict) {
	evs := make([]state.Event, len(vs))
	for i, v := range vs {
		logVerdict(ctx, a.log, v)
		evs[i] = verdictEvent(a.Plan, v, a.now())
	}
	a.appendEvents(ctx, evs)
}

// logVerdict is the one structured log line of a verdict. Its attribute
// keys are stable: model, policy, reason, frontier_at_plan, frontier_now,
// suffix, advances, bound (and child for downstream_covered).
func logVerdict(ctx context.Context, l *slog.Logger, v promotion.Verdict) {
	attrs := []slog.Attr{
		slog.String(logkey.Model, v.Model), slog.String(logkey.Policy, v.Policy), slog.String(logkey.Reason, string(v.Reason)),
		slog.Bool(logkey.Accepted, v.Accepted),
		slog.Time(logkey.FrontierAtPlan, v.FrontierAtPlan), slog.Time(logkey.FrontierNow, v.FrontierNow),
		slog.String(logkey.Suffix, rangeText(v)), slog.Int(logkey.Advances, v.Advances), slog.Int(logkey.Bound, v.Bound),
	}
	if v.Child != "" {
		attrs = append(attrs, slog.String(logkey.Child, v.Child))
	}
	// Info either way: a rejection is returned to the caller (in a
	// *promotion.Error), which reports it.
	msg := "promotion verdict: accepted"
	if !v.Accepted {
		msg = "promotion verdict: rejected"
	}
	l.LogAttrs(ctx, slog.LevelInfo, msg, attrs...)
}

func rangeText(v promotion.Verdict) string {
	if v.Suffix.Empty() {
		return ""
	}
	return v.Suffix.String()
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		// Every value passed here is a plain struct or map of JSON-safe
		// fields; an error is a programming mistake, reported in the data.
		b, _ = json.Marshal(map[string]string{"encoding_error": err.Error()})
	}
	return b
}

// unchangedViews is the set of models whose view needs no update after
// replacing prev by p: prev was finalised (every view of it was created) and
// served the same version. The promotion's compare-and-swap on prev's plan
// id guarantees prev is exactly what was replaced.
func unchangedViews(prev *state.Environment, p *plan.Plan) map[string]bool {
	out := map[string]bool{}
	if prev == nil || prev.Invalidated || prev.FinalizedAt.IsZero() || prev.PlanID != p.Expected.PlanID {
		return out
	}
	before := map[string]string{}
	for _, r := range prev.Snapshots {
		before[r.Name] = r.Version
	}
	for _, s := range p.Snapshots {
		if v, ok := before[s.Name]; ok && v == s.Version {
			out[s.Name] = true
		}
	}
	return out
}

// appendEvents records history (promotion outcomes, plan applied); a
// failure is logged, not returned: the outcome it describes has already
// happened.
func (a *applier) appendEvents(ctx context.Context, evs []state.Event) {
	if len(evs) == 0 {
		return
	}
	if _, err := a.Store.AppendEvents(context.WithoutCancel(ctx), evs...); err != nil {
		a.log.ErrorContext(ctx, "recording promotion events", slog.Any(logkey.Error, err))
	}
}

func (a *applier) incumbentSnapshots(ctx context.Context) (map[string]*snapshot.Snapshot, error) {
	keys := make([]state.SnapshotKey, 0, len(a.Plan.Incumbents))
	for _, inc := range a.Plan.Incumbents {
		keys = append(keys, inc.Snapshot.Key())
	}
	got, err := a.Store.GetSnapshots(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("reading incumbent snapshots: %w", err)
	}
	out := make(map[string]*snapshot.Snapshot, len(got))
	for k, s := range got {
		out[k.Name] = s
	}
	return out, nil
}
