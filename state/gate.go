package state

import (
	"context"
	"errors"
	"slices"
	"time"
)

// The merge gate (design invariant 4: a pull request's check is never
// green while an apply on its target is in flight). A gated environment
// is only ever changed by a deploy attempt that first recorded, in one
// transaction, a hold on every open pull request whose verdict targets the
// environment (BeginDeploy); the attempt may start changing the
// environment only once the holds are recorded (mode recorded) or also
// rendered on the code host (mode rendered) (RunDeploy); Promote refuses a
// gated environment unless the promotion names such an attempt and its
// lease (PromoteParams.Gate); and only the attempt's own settle releases
// its holds (SettleDeploy), after which each held pull request re-plans.

// Sentinels of the merge gate (see GateStore).
var (
	// ErrNotHeld: a promotion of a gated environment named no deploy
	// attempt, or one that is not running on its unexpired lease with its
	// holds recorded (and rendered, in mode rendered). Nothing was written.
	ErrNotHeld = errors.New("the environment is merge-gated and the promotion holds no open gate")
	// ErrGateNotOpen: RunDeploy of an attempt whose holds are not rendered
	// in mode rendered. Nothing was written.
	ErrGateNotOpen = errors.New("the merge gate is not open: the holds are not rendered yet")
	// ErrSettleDeferred: SettleDeploy of an attempt while another attempt
	// holds the environment; that attempt's holds must survive, and this
	// settle is retried once it ends. Nothing was written.
	ErrSettleDeferred = errors.New("settle deferred: another deploy attempt holds the environment")
)

// Gate modes: what RunDeploy waits for before an attempt may change the
// environment.
const (
	// GateRendered: every hold is rendered on the code host and read back
	// (the default).
	GateRendered = "rendered"
	// GateRecorded: the holds are recorded in the state store; their
	// rendering goes on while the apply runs (for code-host outages).
	GateRecorded = "recorded"
)

// The merge gate's deploy attempt states, between pending and running
// (see the Deploy* states): held, the holds are recorded; rendered, they
// are rendered on the code host too.
const (
	DeployHeld     = "held"
	DeployRendered = "rendered"
)

// Settle reasons (SettleDeployParams.By, Hold.ReleaseReason).
const (
	SettledBySettle   = "settle"   // the attempt's own settle job
	SettledBySweep    = "sweep"    // the release sweep, for an attempt that ended unsettled
	SettledByOperator = "operator" // gapless gate settle (an override)
)

// The merge gate's history events, appended by the store in the
// transaction of the transition they name. Environment is the gated
// environment; Data carries the attempt id and the pull requests.
const (
	// EventGateHoldsRecorded: BeginDeploy recorded an attempt's holds
	// (Reason: the gate mode).
	EventGateHoldsRecorded = "gate_holds_recorded"
	// EventGateHoldsRendered: every hold of an attempt was rendered.
	EventGateHoldsRendered = "gate_holds_rendered"
	// EventGateOpened: RunDeploy let an attempt start changing the
	// environment (Reason: the gate mode).
	EventGateOpened = "gate_opened"
	// EventGateSettled: an attempt's holds were released (Reason: settle,
	// sweep or operator).
	EventGateSettled = "gate_settled"
	// EventGateResolved: the sweep resolved an attempt whose lease expired
	// (Reason: promoted or abandoned).
	EventGateResolved = "gate_resolved"
	// EventGateTarget: an environment's gate was configured or its safety
	// changed (Reason: safe or unsafe).
	EventGateTarget = "gate_target"
)

// GateEventKinds returns the merge gate's history event kinds, the closed
// set the store appends.
func GateEventKinds() []string { return slices.Clone(gateEventKinds) }

var gateEventKinds = []string{
	EventGateHoldsRecorded, EventGateHoldsRendered, EventGateOpened,
	EventGateSettled, EventGateResolved, EventGateTarget,
}

// GateTarget is an environment under the merge gate.
type GateTarget struct {
	Env  string `json:"env"`
	Repo string `json:"repo,omitempty"` // the repository whose PRs target it
	// Mode is the default gate mode of its attempts (GateRendered or
	// GateRecorded); an attempt may record another.
	Mode string `json:"mode"`
	// Unsafe, when set, says why the gate cannot be trusted (the aggregate
	// check is not required by branch protection, a merge queue bypasses
	// it...): shown on /healthz, in gate status and on the PRs.
	Unsafe    string    `json:"unsafe,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Hold is one pull request held by one deploy attempt: its aggregate check
// is never green while the hold is unreleased.
type Hold struct {
	AttemptID string `json:"attempt_id"`
	Env       string `json:"env"`
	Repo      string `json:"repo"`
	Number    int    `json:"number"`
	// HeadSHA is the PR's head as the store knew it when the hold was
	// recorded.
	HeadSHA   string    `json:"head_sha"`
	CreatedAt time.Time `json:"created_at"`
	// RenderedAt is when a render of the PR's aggregate check showing the
	// hold was read back from the code host (zero until then); RenderError
	// the last failed render's error, cleared by a successful one.
	RenderedAt  time.Time `json:"rendered_at,omitzero"`
	RenderError string    `json:"render_error,omitempty"`
	// ReleasedAt and ReleaseReason are set by the attempt's settle.
	ReleasedAt    time.Time `json:"released_at,omitzero"`
	ReleaseReason string    `json:"release_reason,omitempty"`
}

// Active reports whether the hold is unreleased.
func (h Hold) Active() bool { return h.ReleasedAt.IsZero() }

// GateFence names the deploy attempt a promotion of a gated environment
// runs under, and its lease.
type GateFence struct {
	AttemptID string
	Token     string
}

// BeginDeployParams are the parameters of BeginDeploy.
type BeginDeployParams struct {
	// ID names the attempt. A pending attempt with this id moves to held;
	// with no attempt recorded, Request (required then) is inserted as one
	// (the CLI's case: there is no pending request before it).
	ID      string
	Request *RequestDeployParams
	Owner   string
	TTL     time.Duration
	// Mode is GateRendered or GateRecorded; "" takes the gate target's.
	Mode string
	// ExpectedGeneration, when not nil, is the generation the environment
	// must be at (0: it must not exist): an error wrapping
	// ErrConflictingPlan otherwise.
	ExpectedGeneration *int64
	// PlanID is the plan the attempt will apply, when known before.
	PlanID string
	Now    time.Time
}

// MarkHoldRenderedParams are the parameters of MarkHoldRendered.
type MarkHoldRenderedParams struct {
	AttemptID string
	Repo      string
	Number    int
	// Error is the render's error: "" records the hold rendered; anything
	// else records RenderError and leaves it unrendered.
	Error string
	Now   time.Time
}

// RunDeployParams are the parameters of RunDeploy.
type RunDeployParams struct {
	ID    string
	Token string
	Now   time.Time
}

// SettleDeployParams are the parameters of SettleDeploy.
type SettleDeployParams struct {
	ID string
	// By is SettledBySettle, SettledBySweep or SettledByOperator.
	By string
	// Force (an operator's override) settles an attempt that has not
	// ended (it is first marked abandoned, with Reason as its error) and
	// does not defer to another active attempt.
	Force  bool
	Reason string
	Now    time.Time
}

// ResolveDeployParams are the parameters of ResolveDeploy.
type ResolveDeployParams struct {
	ID string
	// Grace is how long after its lease expired an attempt is left alone.
	Grace time.Duration
	Now   time.Time
}

// ListHoldsParams select holds; zero fields do not filter.
type ListHoldsParams struct {
	Env       string
	AttemptID string
	Repo      string
	Number    int
	// ActiveOnly keeps the unreleased holds.
	ActiveOnly bool
}

// GateStore keeps the merge gate's state. Every transition is a
// compare-and-swap on an attempt's state and lease token, made in one
// transaction with the holds and the history event it implies.
type GateStore interface {
	// SetGateTarget puts env under the merge gate, or updates its mode,
	// repository and safety; a change of Unsafe appends EventGateTarget.
	SetGateTarget(ctx context.Context, t GateTarget) (GateTarget, error)
	// RemoveGateTarget takes env out of the gate; active holds stay until
	// their attempts settle.
	RemoveGateTarget(ctx context.Context, env string, now time.Time) error
	// GetGateTarget returns env's gate, or ErrNotFound when env is not
	// gated.
	GetGateTarget(ctx context.Context, env string) (GateTarget, error)
	// ListGateTargets returns every gated environment, by name.
	ListGateTargets(ctx context.Context) ([]GateTarget, error)

	// BeginDeploy is the gate's first phase, storage only: in one
	// transaction it checks the environment's generation (when expected),
	// moves the attempt pending -> held (or inserts it held), with Owner, a
	// fresh lease token until Now+TTL, the mode and HoldsRecordedAt Now;
	// inserts one hold per open PR with a check on the environment, except
	// the attempt's own PR; and appends EventGateHoldsRecorded. With no
	// hold to record the attempt is rendered at once. ErrDeployActive when
	// another attempt on the environment is held, rendered or running,
	// even on an expired lease (ResolveDeploy ends that one, after its
	// grace): nothing is written. Of any number of racing BeginDeploys on
	// one environment at most one succeeds.
	BeginDeploy(ctx context.Context, p BeginDeployParams) (DeployAttempt, []Hold, error)
	// MarkHoldRendered records the outcome of rendering one hold (a PR's
	// aggregate check read back showing it). When the last hold of a held
	// attempt is rendered, the attempt moves to rendered with
	// HoldsRenderedAt Now and EventGateHoldsRendered. A released hold, or
	// one already rendered, is left as it is. ErrNotFound for no such
	// hold.
	MarkHoldRendered(ctx context.Context, p MarkHoldRenderedParams) (Hold, error)
	// RunDeploy opens the gate: held or rendered -> running, a
	// compare-and-swap on the token (unexpired at Now). In mode rendered
	// a held attempt is refused with ErrGateNotOpen; appends
	// EventGateOpened. Running again with the same token returns the
	// attempt.
	RunDeploy(ctx context.Context, p RunDeployParams) (DeployAttempt, error)
	// SettleDeploy releases the holds of an ended attempt (promoted,
	// failed, cancelled or abandoned) and no other attempt's, stamps
	// SettledAt, sets the verdict of every PR it released back to pending
	// (each re-plans against the environment as it now is; a new revision)
	// and appends EventGateSettled; it returns the released holds. It
	// refuses with ErrSettleDeferred while another attempt is held,
	// rendered or running on the environment, and with ErrDeployState for
	// an attempt that has not ended (unless Force). A settled attempt
	// returns no holds and writes nothing.
	SettleDeploy(ctx context.Context, p SettleDeployParams) (DeployAttempt, []Hold, error)
	// ResolveDeploy ends an attempt whose lease expired more than Grace
	// before Now (its process died): promoted when its promotion committed
	// (PromotedAt set by Promote's fence), abandoned otherwise, appending
	// EventGateResolved. An attempt that ended, or whose lease is not
	// expired so long, is returned unchanged with resolved=false.
	ResolveDeploy(ctx context.Context, p ResolveDeployParams) (a DeployAttempt, resolved bool, err error)
	// ListHolds returns the holds matching p, by attempt, repo and number.
	ListHolds(ctx context.Context, p ListHoldsParams) ([]Hold, error)
}
