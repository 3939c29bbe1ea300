package storekit

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gapless-dev/gapless/state"
)

// The merge gate's transitions (state.GateStore), shared by both stores
// over GateTx. Each locks the attempt it changes first (its row), then what
// else it reads, and writes the attempt, its holds, the PR checks it resets
// and its history event in one transaction, so a transition that checked a
// state, a token or a lease writes against exactly that.
//
// Lock order (PostgreSQL; SQLite's write lock serialises everything): the
// gate lock of an environment (LockGate), then its environment row, then
// deploy attempts, then holds and PR checks, and the event lock last. A
// BeginDeploy takes the gate lock exclusively and every PutPRCheck shares
// it, so a PR check written while an attempt's holds are being recorded is
// either read by BeginDeploy (and held) or sees the attempt active (and
// holds itself, the write-path guard): no PR slips between the two.

// GateTx is what the merge gate's transitions need of one store
// transaction, beside the code-host store's rows (CodeHostTx, whose reads
// lock).
type GateTx interface {
	CodeHostTx
	// LockGate takes env's gate lock until the transaction ends: exclusive
	// for BeginDeploy, shared for PutPRCheck (PostgreSQL: a
	// transaction-scoped advisory lock; SQLite: nothing, the transaction
	// holds the file's write lock).
	LockGate(ctx context.Context, env string, exclusive bool) error
	// EnvironmentGeneration reads env's generation, its row locked against
	// a promotion until the transaction ends (FOR SHARE); found is false
	// for an environment that does not exist (never promoted, or removed).
	EnvironmentGeneration(ctx context.Context, env string) (gen int64, found bool, err error)
	// GateTarget reads env's gate target.
	GateTarget(ctx context.Context, env string) (state.GateTarget, bool, error)
	// PutGateTarget inserts or replaces env's gate target.
	PutGateTarget(ctx context.Context, t state.GateTarget) error
	// DeleteGateTarget deletes env's gate target and reports whether there
	// was one.
	DeleteGateTarget(ctx context.Context, env string) (bool, error)
	// OpenPRChecks reads the checks on env of PRs not closed, by repo and
	// number.
	OpenPRChecks(ctx context.Context, env string) ([]state.PRCheck, error)
	// Holds reads and locks the holds matching f, by attempt, repo and
	// number.
	Holds(ctx context.Context, f state.ListHoldsParams) ([]state.Hold, error)
	// InsertHold inserts a hold unless the attempt holds the PR already
	// (ON CONFLICT DO NOTHING) and reports whether it did.
	InsertHold(ctx context.Context, h state.Hold) (bool, error)
	// UpdateHold rewrites a hold's render outcome (RenderedAt,
	// RenderError).
	UpdateHold(ctx context.Context, h state.Hold) error
	// ReleaseHolds releases the unreleased holds matching f (only
	// AttemptID and Env filter), a compare-and-swap on released_at being
	// unset, with reason at now, and returns them, by attempt, repo and
	// number.
	ReleaseHolds(ctx context.Context, f state.ListHoldsParams, reason string, now time.Time) ([]state.Hold, error)
	// AppendEvents appends history events inside the transaction (last:
	// PostgreSQL's event lock is the last lock a transition takes).
	AppendEvents(ctx context.Context, events ...state.Event) error
}

// GatePR names one pull request in a gate event's Data.
type GatePR struct {
	Repo   string `json:"repo"`
	Number int    `json:"number"`
}

// GateEventData is the Data of the merge gate's history events on an
// attempt: the attempt, the pull requests the transition concerns (the
// holds recorded, rendered, released or active), and what else the
// transition decided.
type GateEventData struct {
	Attempt string   `json:"attempt"`
	PRs     []GatePR `json:"prs"`
	// Mode is the attempt's gate mode; BaseGeneration the environment's
	// generation when its holds were recorded.
	Mode           string `json:"mode,omitempty"`
	BaseGeneration int64  `json:"base_generation,omitempty"`
	// By says which write recorded a hold: "begin" (BeginDeploy) or
	// "pr_check" (PutPRCheck's write-path guard); for a settle, who
	// settled (settle, sweep, operator).
	By string `json:"by,omitempty"`
	// State is the attempt's state after the transition (settle, resolve).
	State string `json:"state,omitempty"`
	// Unrendered lists, when the gate opened, the holds not rendered yet
	// (mode recorded).
	Unrendered []GatePR `json:"unrendered,omitempty"`
	// Forced is set on an operator's forced settle.
	Forced bool `json:"forced,omitempty"`
	// LeaseExpiredAt is, on a resolve, when the attempt's lease expired.
	LeaseExpiredAt time.Time `json:"lease_expired_at,omitzero"`
}

// GateTargetEventData is the Data of EventGateTarget.
type GateTargetEventData struct {
	Repo   string `json:"repo,omitempty"`
	Mode   string `json:"mode,omitempty"`
	Unsafe string `json:"unsafe,omitempty"`
}

// ReasonGateRemoved is the Reason of the EventGateTarget RemoveGateTarget
// appends; SetGateTarget's are "safe" and "unsafe".
const ReasonGateRemoved = "removed"

// Hold sources (GateEventData.By of EventGateHoldsRecorded).
const (
	heldByBegin   = "begin"
	heldByPRCheck = "pr_check"
)

var gateModes = []string{state.GateRendered, state.GateRecorded}

var settlers = []string{state.SettledBySettle, state.SettledBySweep, state.SettledByOperator}

// SortHolds orders holds by attempt, repo and number (the order of
// ListHolds; an UPDATE ... RETURNING has none).
func SortHolds(hs []state.Hold) {
	slices.SortFunc(hs, func(a, b state.Hold) int {
		return cmp.Or(cmp.Compare(a.AttemptID, b.AttemptID), cmp.Compare(a.Repo, b.Repo), cmp.Compare(a.Number, b.Number))
	})
}

// holdPRs lists the PRs of hs.
func holdPRs(hs []state.Hold) []GatePR {
	out := make([]GatePR, 0, len(hs))
	for _, h := range hs {
		out = append(out, GatePR{Repo: h.Repo, Number: h.Number})
	}
	return out
}

// gateEvent is the history event kind on attempt a at now, with reason and
// data.
func gateEvent(kind string, a state.DeployAttempt, reason string, now time.Time, data any) (state.Event, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return state.Event{}, fmt.Errorf("encoding the %s event: %w", kind, err)
	}
	return state.Event{At: now, Kind: kind, Environment: a.Env, PlanID: a.PlanID, Reason: reason, Data: raw}, nil
}

// appendGateEvent appends one gate event on attempt a.
func appendGateEvent(ctx context.Context, tx GateTx, kind string, a state.DeployAttempt, reason string, now time.Time, data any) error {
	e, err := gateEvent(kind, a, reason, now, data)
	if err != nil {
		return err
	}
	if err := tx.AppendEvents(ctx, e); err != nil {
		return fmt.Errorf("appending the %s event: %w", kind, err)
	}
	return nil
}

// gated reports whether a went through the gate (its holds were recorded):
// only such an attempt holds PRs and is settled.
func gated(a state.DeployAttempt) bool { return !a.HoldsRecordedAt.IsZero() }

// CheckGateTarget refuses a gate target without an environment, with an
// unknown mode or without its UpdatedAt (the Now of the write), and
// returns it with the default mode ("" is GateRendered) and its time as
// stored.
func CheckGateTarget(t state.GateTarget) (state.GateTarget, error) {
	if t.Mode == "" {
		t.Mode = state.GateRendered
	}
	switch {
	case t.Env == "":
		return state.GateTarget{}, errors.New("an environment is required")
	case !slices.Contains(gateModes, t.Mode):
		return state.GateTarget{}, fmt.Errorf("gate mode %q: want one of %v", t.Mode, gateModes)
	case t.UpdatedAt.IsZero():
		return state.GateTarget{}, fmt.Errorf("the gate target's UpdatedAt: %w", state.ErrNoNow)
	}
	t.UpdatedAt = stamp(t.UpdatedAt)
	return t, nil
}

// SetGateTarget puts an environment under the gate or updates it (see
// state.GateStore.SetGateTarget): an identical target is left as stored;
// a new one, or a change of Unsafe, appends EventGateTarget.
func SetGateTarget(ctx context.Context, tx GateTx, t state.GateTarget) (state.GateTarget, error) {
	t, err := CheckGateTarget(t)
	if err != nil {
		return state.GateTarget{}, err
	}
	stored, found, err := tx.GateTarget(ctx, t.Env)
	if err != nil {
		return state.GateTarget{}, fmt.Errorf("reading the gate target: %w", err)
	}
	if found && stored.Repo == t.Repo && stored.Mode == t.Mode && stored.Unsafe == t.Unsafe {
		return stored, nil
	}
	if err := tx.PutGateTarget(ctx, t); err != nil {
		return state.GateTarget{}, fmt.Errorf("writing the gate target: %w", err)
	}
	if found && stored.Unsafe == t.Unsafe {
		return t, nil
	}
	reason := "safe"
	if t.Unsafe != "" {
		reason = "unsafe"
	}
	raw, err := json.Marshal(GateTargetEventData{Repo: t.Repo, Mode: t.Mode, Unsafe: t.Unsafe})
	if err != nil {
		return state.GateTarget{}, fmt.Errorf("encoding the %s event: %w", state.EventGateTarget, err)
	}
	if err := tx.AppendEvents(ctx, state.Event{At: t.UpdatedAt, Kind: state.EventGateTarget, Environment: t.Env,
		Reason: reason, Data: raw}); err != nil {
		return state.GateTarget{}, fmt.Errorf("appending the %s event: %w", state.EventGateTarget, err)
	}
	return t, nil
}

// RemoveGateTarget takes an environment out of the gate (see
// state.GateStore.RemoveGateTarget), appending EventGateTarget (Reason
// ReasonGateRemoved); an environment not gated is left alone.
func RemoveGateTarget(ctx context.Context, tx GateTx, env string, now time.Time) error {
	switch {
	case env == "":
		return errors.New("an environment is required")
	case now.IsZero():
		return state.ErrNoNow
	}
	removed, err := tx.DeleteGateTarget(ctx, env)
	if err != nil {
		return fmt.Errorf("deleting the gate target: %w", err)
	}
	if !removed {
		return nil
	}
	if err := tx.AppendEvents(ctx, state.Event{At: stamp(now), Kind: state.EventGateTarget, Environment: env,
		Reason: ReasonGateRemoved}); err != nil {
		return fmt.Errorf("appending the %s event: %w", state.EventGateTarget, err)
	}
	return nil
}

// CheckListHolds refuses a hold filter with a negative number.
func CheckListHolds(p state.ListHoldsParams) error {
	if p.Number < 0 {
		return fmt.Errorf("pull request number %d is negative", p.Number)
	}
	return nil
}

// checkBeginDeploy refuses BeginDeploy's parameters when they name no
// attempt, no lease, an unknown mode, a negative expected generation or no
// Now.
func checkBeginDeploy(p state.BeginDeployParams) error {
	switch {
	case p.ID == "":
		return errors.New("a deploy attempt id is required")
	case p.TTL < time.Microsecond:
		return fmt.Errorf("lease TTL %s: want at least a microsecond", p.TTL)
	case p.Mode != "" && !slices.Contains(gateModes, p.Mode):
		return fmt.Errorf("gate mode %q: want one of %v (or none, for the gate target's)", p.Mode, gateModes)
	case p.ExpectedGeneration != nil && *p.ExpectedGeneration < 0:
		return fmt.Errorf("expected generation %d is negative", *p.ExpectedGeneration)
	case p.Now.IsZero():
		return state.ErrNoNow
	case p.Request != nil && p.Request.ID != "" && p.Request.ID != p.ID:
		return fmt.Errorf("the request's id %q is not the attempt's %q", p.Request.ID, p.ID)
	}
	return nil
}

// BeginDeploy is the gate's first phase, storage only (see
// state.GateStore.BeginDeploy).
//
// Invariant: the attempt moves to held and its holds are inserted in one
// transaction that read, under the environment's exclusive gate lock, every
// open PR check on the environment; and no other attempt on the
// environment is held, rendered or running when it commits (checked here,
// and by the schema's partial unique index for racing transactions).
func BeginDeploy(ctx context.Context, tx GateTx, p state.BeginDeployParams) (state.DeployAttempt, []state.Hold, error) {
	if err := checkBeginDeploy(p); err != nil {
		return state.DeployAttempt{}, nil, err
	}
	var (
		a   state.DeployAttempt
		err error
	)
	if p.Request != nil {
		req := *p.Request
		req.ID = p.ID
		if req.Now.IsZero() {
			req.Now = p.Now
		}
		if a, err = RequestDeploy(ctx, tx, req); err != nil {
			return state.DeployAttempt{}, nil, fmt.Errorf("recording the request: %w", err)
		}
	} else if a, err = deployRow(ctx, tx, p.ID); err != nil {
		return state.DeployAttempt{}, nil, err
	}
	if a.State != state.DeployPending {
		return state.DeployAttempt{}, nil, fmt.Errorf("%w: it is %s, not %s", state.ErrDeployState, a.State, state.DeployPending)
	}
	if err := tx.LockGate(ctx, a.Env, true); err != nil {
		return state.DeployAttempt{}, nil, fmt.Errorf("taking the gate lock of %q: %w", a.Env, err)
	}
	now := stamp(p.Now)
	active, err := tx.ActiveDeploys(ctx, a.Env, a.ID)
	if err != nil {
		return state.DeployAttempt{}, nil, fmt.Errorf("reading the active attempts of %q: %w", a.Env, err)
	}
	if len(active) > 0 {
		other := active[0]
		why := "until " + other.LeaseExpiresAt.Format(time.RFC3339Nano)
		if expired(other.LeaseExpiresAt, now) {
			why = "its lease expired at " + other.LeaseExpiresAt.Format(time.RFC3339Nano) + "; the release sweep resolves it"
		}
		return state.DeployAttempt{}, nil, fmt.Errorf("%w: attempt %s is %s on %q (owner %q, %s)", state.ErrDeployActive,
			other.ID, other.State, other.Env, other.Owner, why)
	}
	gen, _, err := tx.EnvironmentGeneration(ctx, a.Env)
	if err != nil {
		return state.DeployAttempt{}, nil, fmt.Errorf("reading the generation of %q: %w", a.Env, err)
	}
	if p.ExpectedGeneration != nil && *p.ExpectedGeneration != gen {
		return state.DeployAttempt{}, nil, fmt.Errorf("%w: environment %q is at generation %d, the deploy expected %d",
			state.ErrConflictingPlan, a.Env, gen, *p.ExpectedGeneration)
	}
	mode := p.Mode
	if mode == "" {
		target, found, err := tx.GateTarget(ctx, a.Env)
		if err != nil {
			return state.DeployAttempt{}, nil, fmt.Errorf("reading the gate target of %q: %w", a.Env, err)
		}
		mode = state.GateRendered
		if found {
			mode = target.Mode
		}
	}
	checks, err := tx.OpenPRChecks(ctx, a.Env)
	if err != nil {
		return state.DeployAttempt{}, nil, fmt.Errorf("reading the open PR checks on %q: %w", a.Env, err)
	}
	holds := []state.Hold{}
	for _, c := range checks {
		if c.Repo == a.Repo && c.Number == a.Number {
			continue // the attempt's own PR
		}
		holds = append(holds, state.Hold{AttemptID: a.ID, Env: a.Env, Repo: c.Repo, Number: c.Number, HeadSHA: c.HeadSHA, CreatedAt: now})
	}
	token, err := NewLeaseToken()
	if err != nil {
		return state.DeployAttempt{}, nil, err
	}
	a.State, a.Owner, a.LeaseToken, a.LeaseExpiresAt = state.DeployHeld, p.Owner, token, now.Add(p.TTL.Truncate(time.Microsecond))
	a.Mode, a.BaseGeneration, a.HoldsRecordedAt, a.UpdatedAt = mode, gen, now, now
	if p.PlanID != "" {
		a.PlanID = p.PlanID
	}
	if len(holds) == 0 {
		a.State, a.HoldsRenderedAt = state.DeployRendered, now
	}
	if err := tx.UpdateDeploy(ctx, a); err != nil {
		return state.DeployAttempt{}, nil, fmt.Errorf("holding the attempt: %w", err)
	}
	for _, h := range holds {
		ok, err := tx.InsertHold(ctx, h)
		if err != nil {
			return state.DeployAttempt{}, nil, fmt.Errorf("recording the hold of %s#%d: %w", h.Repo, h.Number, err)
		}
		if !ok {
			return state.DeployAttempt{}, nil, fmt.Errorf("the hold of %s#%d by attempt %s exists already", h.Repo, h.Number, a.ID)
		}
	}
	events := make([]state.Event, 0, 2)
	e, err := gateEvent(state.EventGateHoldsRecorded, a, mode, now,
		GateEventData{Attempt: a.ID, PRs: holdPRs(holds), Mode: mode, BaseGeneration: gen, By: heldByBegin})
	if err != nil {
		return state.DeployAttempt{}, nil, err
	}
	events = append(events, e)
	if len(holds) == 0 {
		if e, err = gateEvent(state.EventGateHoldsRendered, a, mode, now, GateEventData{Attempt: a.ID, PRs: []GatePR{}, Mode: mode}); err != nil {
			return state.DeployAttempt{}, nil, err
		}
		events = append(events, e)
	}
	if err := tx.AppendEvents(ctx, events...); err != nil {
		return state.DeployAttempt{}, nil, fmt.Errorf("appending the gate events: %w", err)
	}
	return a, holds, nil
}

// MarkHoldRendered records one hold's render outcome and moves a held
// attempt to rendered once its last hold is rendered (see
// state.GateStore.MarkHoldRendered).
func MarkHoldRendered(ctx context.Context, tx GateTx, p state.MarkHoldRenderedParams) (state.Hold, error) {
	switch {
	case p.AttemptID == "":
		return state.Hold{}, errors.New("a deploy attempt id is required")
	case p.Now.IsZero():
		return state.Hold{}, state.ErrNoNow
	}
	if err := checkPR(p.Repo, p.Number); err != nil {
		return state.Hold{}, err
	}
	a, err := deployRow(ctx, tx, p.AttemptID)
	if err != nil {
		return state.Hold{}, err
	}
	hs, err := tx.Holds(ctx, state.ListHoldsParams{AttemptID: p.AttemptID, Repo: p.Repo, Number: p.Number})
	if err != nil {
		return state.Hold{}, fmt.Errorf("reading the hold: %w", err)
	}
	if len(hs) != 1 {
		return state.Hold{}, fmt.Errorf("attempt %s holds no %s#%d: %w", p.AttemptID, p.Repo, p.Number, state.ErrNotFound)
	}
	h := hs[0]
	if !h.Active() || !h.RenderedAt.IsZero() {
		return h, nil
	}
	now := stamp(p.Now)
	if p.Error != "" {
		h.RenderError = p.Error
		if err := tx.UpdateHold(ctx, h); err != nil {
			return state.Hold{}, fmt.Errorf("recording the render error: %w", err)
		}
		return h, nil
	}
	h.RenderedAt, h.RenderError = now, ""
	if err := tx.UpdateHold(ctx, h); err != nil {
		return state.Hold{}, fmt.Errorf("recording the render: %w", err)
	}
	if a.Terminal() || !a.HoldsRenderedAt.IsZero() {
		return h, nil
	}
	all, err := tx.Holds(ctx, state.ListHoldsParams{AttemptID: a.ID, ActiveOnly: true})
	if err != nil {
		return state.Hold{}, fmt.Errorf("reading the attempt's holds: %w", err)
	}
	for _, other := range all {
		if other.RenderedAt.IsZero() {
			return h, nil // not the last
		}
	}
	if a.State == state.DeployHeld {
		a.State = state.DeployRendered
	}
	a.HoldsRenderedAt, a.UpdatedAt = now, now
	if err := tx.UpdateDeploy(ctx, a); err != nil {
		return state.Hold{}, fmt.Errorf("marking the attempt's holds rendered: %w", err)
	}
	if err := appendGateEvent(ctx, tx, state.EventGateHoldsRendered, a, a.Mode, now,
		GateEventData{Attempt: a.ID, PRs: holdPRs(all), Mode: a.Mode}); err != nil {
		return state.Hold{}, err
	}
	return h, nil
}

// RunDeploy opens the gate of an attempt (see state.GateStore.RunDeploy):
// held or rendered -> running, pinned to its token and unexpired lease; in
// mode rendered a held attempt is refused with state.ErrGateNotOpen,
// naming the holds not rendered and their last errors.
func RunDeploy(ctx context.Context, tx GateTx, p state.RunDeployParams) (state.DeployAttempt, error) {
	switch {
	case p.Token == "":
		return state.DeployAttempt{}, errors.New("the attempt's lease token is required")
	case p.Now.IsZero():
		return state.DeployAttempt{}, state.ErrNoNow
	}
	a, err := deployRow(ctx, tx, p.ID)
	if err != nil {
		return state.DeployAttempt{}, err
	}
	now := stamp(p.Now)
	switch {
	case a.LeaseToken != p.Token:
		return state.DeployAttempt{}, fmt.Errorf("%w: the token is not the attempt's", state.ErrLeaseLost)
	case a.State == state.DeployRunning:
		return a, nil // a replay of the run that committed
	case a.Terminal():
		return state.DeployAttempt{}, fmt.Errorf("%w: the attempt is %s", state.ErrLeaseLost, a.State)
	case a.State != state.DeployHeld && a.State != state.DeployRendered:
		return state.DeployAttempt{}, fmt.Errorf("%w: it is %s, not %s or %s", state.ErrDeployState, a.State, state.DeployHeld, state.DeployRendered)
	case expired(a.LeaseExpiresAt, now):
		return state.DeployAttempt{}, fmt.Errorf("%w: the lease expired at %s", state.ErrLeaseLost, a.LeaseExpiresAt.Format(time.RFC3339Nano))
	}
	holds, err := tx.Holds(ctx, state.ListHoldsParams{AttemptID: a.ID, ActiveOnly: true})
	if err != nil {
		return state.DeployAttempt{}, fmt.Errorf("reading the attempt's holds: %w", err)
	}
	var unrendered []state.Hold
	for _, h := range holds {
		if h.RenderedAt.IsZero() {
			unrendered = append(unrendered, h)
		}
	}
	if a.State == state.DeployHeld && a.Mode != state.GateRecorded && !mutated(MutantRunIgnoresRender) {
		missing := make([]string, len(unrendered))
		for i, h := range unrendered {
			missing[i] = fmt.Sprintf("%s#%d", h.Repo, h.Number)
			if h.RenderError != "" {
				missing[i] += " (" + h.RenderError + ")"
			}
		}
		return state.DeployAttempt{}, fmt.Errorf("%w: in mode %s, %d of %d holds are not rendered: %s", state.ErrGateNotOpen,
			state.GateRendered, len(unrendered), len(holds), strings.Join(missing, ", "))
	}
	a.State, a.StartedAt, a.UpdatedAt = state.DeployRunning, now, now
	if err := tx.UpdateDeploy(ctx, a); err != nil {
		return state.DeployAttempt{}, fmt.Errorf("opening the gate: %w", err)
	}
	data := GateEventData{Attempt: a.ID, PRs: holdPRs(holds), Mode: a.Mode}
	if len(unrendered) > 0 {
		data.Unrendered = holdPRs(unrendered)
	}
	if err := appendGateEvent(ctx, tx, state.EventGateOpened, a, a.Mode, now, data); err != nil {
		return state.DeployAttempt{}, err
	}
	return a, nil
}

// SettleDeploy releases an ended attempt's own holds and resets the
// verdicts of the PRs it released (see state.GateStore.SettleDeploy).
//
// Invariant (G5): it releases only holds whose attempt is p.ID, each a
// compare-and-swap on its release being unset; another attempt's holds
// are never touched, and while another attempt is held, rendered or
// running on the environment it writes nothing (ErrSettleDeferred), unless
// forced.
func SettleDeploy(ctx context.Context, tx GateTx, p state.SettleDeployParams) (state.DeployAttempt, []state.Hold, error) {
	switch {
	case !slices.Contains(settlers, p.By):
		return state.DeployAttempt{}, nil, fmt.Errorf("settled by %q: want one of %v", p.By, settlers)
	case p.Now.IsZero():
		return state.DeployAttempt{}, nil, state.ErrNoNow
	}
	a, err := deployRow(ctx, tx, p.ID)
	if err != nil {
		return state.DeployAttempt{}, nil, err
	}
	if !a.SettledAt.IsZero() {
		return a, []state.Hold{}, nil
	}
	now := stamp(p.Now)
	if !a.Terminal() {
		if !p.Force {
			return state.DeployAttempt{}, nil, fmt.Errorf("%w: it is %s and has not ended (only an operator's forced settle ends it)",
				state.ErrDeployState, a.State)
		}
		reason := p.Reason
		if reason == "" {
			reason = "settled by " + p.By
		}
		a.State, a.Error, a.FinishedAt = state.DeployAbandoned, reason, now
	}
	if !p.Force {
		active, err := tx.ActiveDeploys(ctx, a.Env, a.ID)
		if err != nil {
			return state.DeployAttempt{}, nil, fmt.Errorf("reading the active attempts of %q: %w", a.Env, err)
		}
		if len(active) > 0 {
			other := active[0]
			return state.DeployAttempt{}, nil, fmt.Errorf("%w: attempt %s is %s on %q (owner %q); its holds must survive",
				state.ErrSettleDeferred, other.ID, other.State, other.Env, other.Owner)
		}
	}
	which := state.ListHoldsParams{AttemptID: a.ID}
	if mutated(MutantSettleReleasesEveryHold) {
		which = state.ListHoldsParams{Env: a.Env}
	}
	released, err := tx.ReleaseHolds(ctx, which, p.By, now)
	if err != nil {
		return state.DeployAttempt{}, nil, fmt.Errorf("releasing the holds: %w", err)
	}
	if released == nil {
		released = []state.Hold{}
	}
	for _, h := range released {
		c, found, err := tx.PRCheck(ctx, h.Repo, h.Number, h.Env)
		if err != nil {
			return state.DeployAttempt{}, nil, fmt.Errorf("reading the check of %s#%d: %w", h.Repo, h.Number, err)
		}
		if !found || c.Closed {
			continue
		}
		c.Verdict, c.Revision, c.UpdatedAt = state.VerdictPending, c.Revision+1, now
		if err := tx.UpdatePRCheck(ctx, c); err != nil {
			return state.DeployAttempt{}, nil, fmt.Errorf("resetting the verdict of %s#%d: %w", h.Repo, h.Number, err)
		}
	}
	a.SettledAt, a.SettledBy, a.UpdatedAt = now, p.By, now
	if err := tx.UpdateDeploy(ctx, a); err != nil {
		return state.DeployAttempt{}, nil, fmt.Errorf("settling the attempt: %w", err)
	}
	if err := appendGateEvent(ctx, tx, state.EventGateSettled, a, p.By, now,
		GateEventData{Attempt: a.ID, PRs: holdPRs(released), Mode: a.Mode, By: p.By, State: a.State, Forced: p.Force}); err != nil {
		return state.DeployAttempt{}, nil, err
	}
	return a, released, nil
}

// ResolveDeploy ends an attempt whose process died: its lease expired at
// least Grace before Now (see state.GateStore.ResolveDeploy). It is
// promoted when a fenced promotion committed under it (PromotedAt), and
// abandoned otherwise.
func ResolveDeploy(ctx context.Context, tx GateTx, p state.ResolveDeployParams) (state.DeployAttempt, bool, error) {
	switch {
	case p.Grace < 0:
		return state.DeployAttempt{}, false, fmt.Errorf("grace %s is negative", p.Grace)
	case p.Now.IsZero():
		return state.DeployAttempt{}, false, state.ErrNoNow
	}
	a, err := deployRow(ctx, tx, p.ID)
	if err != nil {
		return state.DeployAttempt{}, false, err
	}
	now := stamp(p.Now)
	if !slices.Contains(ActiveDeployStates, a.State) || !expired(a.LeaseExpiresAt.Add(p.Grace.Truncate(time.Microsecond)), now) {
		return a, false, nil
	}
	holds, err := tx.Holds(ctx, state.ListHoldsParams{AttemptID: a.ID, ActiveOnly: true})
	if err != nil {
		return state.DeployAttempt{}, false, fmt.Errorf("reading the attempt's holds: %w", err)
	}
	if a.PromotedAt.IsZero() {
		a.State, a.Error = state.DeployAbandoned, state.AbandonedLeaseExpired
	} else {
		a.State = state.DeployPromoted
	}
	a.FinishedAt, a.UpdatedAt = now, now
	if err := tx.UpdateDeploy(ctx, a); err != nil {
		return state.DeployAttempt{}, false, fmt.Errorf("resolving the attempt: %w", err)
	}
	if err := appendGateEvent(ctx, tx, state.EventGateResolved, a, a.State, now,
		GateEventData{Attempt: a.ID, PRs: holdPRs(holds), Mode: a.Mode, State: a.State, LeaseExpiredAt: a.LeaseExpiresAt}); err != nil {
		return state.DeployAttempt{}, false, err
	}
	return a, true, nil
}

// guardPRCheck is PutPRCheck's write-path guard: it holds an open PR's
// freshly written check c for every gated attempt active on its
// environment that does not hold it yet and is not the PR's own, with an
// EventGateHoldsRecorded per hold. The caller holds the environment's gate
// lock, shared.
func guardPRCheck(ctx context.Context, tx GateTx, c state.PRCheck) error {
	if c.Closed || mutated(MutantPRCheckSkipsHold) {
		return nil
	}
	active, err := tx.ActiveDeploys(ctx, c.Env, "")
	if err != nil {
		return fmt.Errorf("reading the active attempts of %q: %w", c.Env, err)
	}
	for _, a := range active {
		if !gated(a) || (a.Repo == c.Repo && a.Number == c.Number) {
			continue
		}
		h := state.Hold{AttemptID: a.ID, Env: c.Env, Repo: c.Repo, Number: c.Number, HeadSHA: c.HeadSHA, CreatedAt: c.UpdatedAt}
		ok, err := tx.InsertHold(ctx, h)
		if err != nil {
			return fmt.Errorf("holding %s#%d for attempt %s: %w", c.Repo, c.Number, a.ID, err)
		}
		if !ok {
			continue // held already
		}
		if err := appendGateEvent(ctx, tx, state.EventGateHoldsRecorded, a, a.Mode, c.UpdatedAt,
			GateEventData{Attempt: a.ID, PRs: holdPRs([]state.Hold{h}), Mode: a.Mode, BaseGeneration: a.BaseGeneration, By: heldByPRCheck}); err != nil {
			return err
		}
	}
	return nil
}

// PromoteGate is the merge gate's fence of a promotion (see
// state.PromoteParams.Gate), checked inside the promotion's transaction
// after the environment's row is locked: it returns the attempt to stamp
// (nil when the promotion names none), or an error wrapping
// state.ErrNotHeld, naming the environment and the attempt, when the
// environment is gated and the promotion names no attempt, or when the
// attempt it names is not on the environment, running, on p.Gate.Token's
// lease unexpired at p.Now, with its holds recorded (and rendered, in mode
// rendered).
func PromoteGate(ctx context.Context, tx GateTx, p state.PromoteParams) (*state.DeployAttempt, error) {
	_, isGated, err := tx.GateTarget(ctx, p.Environment)
	if err != nil {
		return nil, fmt.Errorf("reading the gate target of %q: %w", p.Environment, err)
	}
	skip := mutated(MutantPromoteSkipsFence)
	if p.Gate == nil {
		if isGated && !skip {
			return nil, fmt.Errorf("%w: environment %q, and the promotion of plan %q names no deploy attempt",
				state.ErrNotHeld, p.Environment, p.PlanID)
		}
		return nil, nil
	}
	a, found, err := tx.Deploy(ctx, p.Gate.AttemptID)
	if err != nil {
		return nil, fmt.Errorf("reading deploy attempt %q: %w", p.Gate.AttemptID, err)
	}
	if skip {
		if !found {
			return nil, nil
		}
		return &a, nil
	}
	var why string
	switch {
	case !found:
		why = "no such attempt"
	case a.Env != p.Environment:
		why = fmt.Sprintf("the attempt deploys %q", a.Env)
	case a.State != state.DeployRunning:
		why = fmt.Sprintf("the attempt is %s, not %s", a.State, state.DeployRunning)
	case p.Gate.Token == "" || a.LeaseToken != p.Gate.Token:
		why = "the token is not the attempt's"
	case expired(a.LeaseExpiresAt, p.Now):
		why = "its lease expired at " + a.LeaseExpiresAt.Format(time.RFC3339Nano)
	case a.HoldsRecordedAt.IsZero():
		why = "its holds were never recorded"
	case a.Mode == state.GateRendered && a.HoldsRenderedAt.IsZero():
		why = "its holds are not rendered (mode " + state.GateRendered + ")"
	default:
		return &a, nil
	}
	return nil, fmt.Errorf("%w: environment %q, deploy attempt %q: %s", state.ErrNotHeld, p.Environment, p.Gate.AttemptID, why)
}

// StampPromotion records, in the promotion's transaction, that the fenced
// promotion of p committed under attempt a, giving the environment
// generation gen: the attempt's PlanID, ResultGeneration and PromotedAt.
func StampPromotion(ctx context.Context, tx GateTx, a *state.DeployAttempt, p state.PromoteParams, gen int64) error {
	if a == nil {
		return nil
	}
	now := stamp(p.Now)
	a.PlanID, a.ResultGeneration, a.PromotedAt, a.UpdatedAt = p.PlanID, gen, now, now
	if err := tx.UpdateDeploy(ctx, *a); err != nil {
		return fmt.Errorf("stamping the promotion on deploy attempt %q: %w", a.ID, err)
	}
	return nil
}
