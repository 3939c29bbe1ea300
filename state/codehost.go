package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Sentinels of the code-host store (see CodeHostStore).
var (
	// ErrRevisionConflict: a compare-and-swap on a revision (PutPRCheck)
	// named a revision that is not the stored one; another writer won.
	// Nothing was written.
	ErrRevisionConflict = errors.New("revision conflict")
	// ErrDeployActive: another deploy attempt on the same environment is
	// running on a lease that has not expired. Nothing was written.
	ErrDeployActive = errors.New("another deploy attempt is active on the environment")
	// ErrDeployState: a deploy attempt is not in the state the transition
	// starts from (StartDeploy of an attempt that is not pending, a merge
	// recorded on one that was not promoted...). Nothing was written.
	ErrDeployState = errors.New("deploy attempt is not in the state the transition needs")
)

// Webhook delivery statuses (Delivery.Status).
const (
	// DeliveryReceived: recorded by the intake, not processed yet.
	DeliveryReceived = "received"
	// DeliveryProcessed, DeliveryIgnored and DeliveryFailed are the
	// outcomes FinishDelivery records.
	DeliveryProcessed = "processed"
	DeliveryIgnored   = "ignored"
	DeliveryFailed    = "failed"
)

// PR check verdicts (PRCheck.Verdict).
const (
	VerdictSuccess = "success" // planned: nothing to change in the environment
	VerdictChanges = "changes" // planned: the PR changes the environment
	VerdictFailure = "failure" // the PR does not plan (a project error)
	VerdictError   = "error"   // the bot failed to plan it (its own error)
	// VerdictPending: the head is recorded and its plan is queued or
	// running; never green.
	VerdictPending = "pending"
)

// Deploy attempt states (DeployAttempt.State). An attempt is requested
// pending, started running (at most one running attempt per environment,
// which the schema enforces with a partial unique index), and ends promoted,
// failed, cancelled or abandoned (a running attempt whose lease expired,
// found by the next StartDeploy on its environment). A pending attempt may
// also be cancelled.
//
// The merge gate (GateStore) adds two states between pending and running:
// held (BeginDeploy recorded the holds) and rendered (GitHub shows them);
// the "one active attempt per environment" index counts them with
// running.
const (
	DeployPending   = "pending"
	DeployRunning   = "running"
	DeployPromoted  = "promoted"
	DeployFailed    = "failed"
	DeployCancelled = "cancelled"
	DeployAbandoned = "abandoned"
)

// Deploy triggers (DeployAttempt.Trigger).
const (
	TriggerDeployCommand = "deploy_command" // a /deploy comment on a PR
	TriggerMerge         = "merge"          // a merge to the prod branch (deploy_on_merge)
	TriggerCLI           = "cli"            // gapless apply from a shell
)

// AbandonedLeaseExpired is the Error of an attempt StartDeploy marked
// abandoned because its lease had expired.
const AbandonedLeaseExpired = "lease expired"

// Delivery is one webhook delivery the intake recorded, keyed by the code
// host's delivery id (X-GitHub-Delivery).
type Delivery struct {
	ID          string    `json:"id"`
	Event       string    `json:"event"`
	Action      string    `json:"action,omitempty"`
	Repo        string    `json:"repo,omitempty"`
	Status      string    `json:"status"` // DeliveryReceived until FinishDelivery
	Error       string    `json:"error,omitempty"`
	ReceivedAt  time.Time `json:"received_at"`
	ProcessedAt time.Time `json:"processed_at,omitzero"` // zero until FinishDelivery
}

// RecordDeliveryParams are the parameters of RecordDelivery.
type RecordDeliveryParams struct {
	ID, Event, Action, Repo string
	Now                     time.Time
}

// FinishDeliveryParams are the parameters of FinishDelivery.
type FinishDeliveryParams struct {
	ID     string
	Status string // DeliveryProcessed, DeliveryIgnored or DeliveryFailed
	Error  string
	Now    time.Time
}

// ListDeliveriesParams select deliveries; zero fields do not filter.
type ListDeliveriesParams struct {
	Repo, Event, Status string
	// Limit is the most returned: 0 means DefaultListLimit; negative is an
	// error.
	Limit int
}

// DefaultListLimit is the Limit of ListDeliveries and ListDeploys when
// the caller gives none.
const DefaultListLimit = 100

// PRCheck is the bot's verdict for one pull request against one target
// environment: what it planned, at which head, base and merge commit, and
// against which generation of the target. Revision counts its writes (1
// for the first): every write is a compare-and-swap on it (PutPRCheck).
type PRCheck struct {
	Repo   string `json:"repo"`
	Number int    `json:"number"`
	Env    string `json:"env"` // the target environment (prod)
	// HeadSHA, BaseSHA and MergeSHA are the commits the verdict was planned
	// at: the PR's head, its base, and the test merge the plan was built
	// from.
	HeadSHA  string `json:"head_sha"`
	BaseSHA  string `json:"base_sha,omitempty"`
	MergeSHA string `json:"merge_sha,omitempty"`
	// PREnvironment is the PR's own environment (<name>_<number>).
	PREnvironment string `json:"pr_environment,omitempty"`
	// PlanID and PlannedGeneration are the prod preview's plan and the
	// target's generation it was planned against: a verdict planned at
	// another generation than the target's current one is stale.
	PlanID            string          `json:"plan_id,omitempty"`
	PlannedGeneration int64           `json:"planned_generation,omitempty"`
	Verdict           string          `json:"verdict"`           // VerdictPending, VerdictSuccess, VerdictChanges, VerdictFailure or VerdictError
	Summary           string          `json:"summary,omitempty"` // markdown
	Detail            json.RawMessage `json:"detail,omitempty"`
	Closed            bool            `json:"closed,omitempty"` // the PR is closed or merged
	Revision          int64           `json:"revision"`
	UpdatedAt         time.Time       `json:"updated_at"`
}

// PutPRCheckParams are the parameters of PutPRCheck: the verdict to store
// and the revision the caller read (0: it believes there is none).
type PutPRCheckParams struct {
	Repo              string
	Number            int
	Env               string
	HeadSHA           string
	BaseSHA           string
	MergeSHA          string
	PREnvironment     string
	PlanID            string
	PlannedGeneration int64
	Verdict           string
	Summary           string
	Detail            json.RawMessage
	Closed            bool
	ExpectedRevision  int64
	Now               time.Time
}

// ListPRChecksParams select PR checks; zero fields do not filter.
type ListPRChecksParams struct {
	Repo, Env string
	// OpenOnly keeps the checks of PRs not closed.
	OpenOnly bool
}

// CheckKey names one check run the bot wants on one head of one PR.
type CheckKey struct {
	Repo    string `json:"repo"`
	Number  int    `json:"number"`
	HeadSHA string `json:"head_sha"`
	Name    string `json:"name"`
}

// String formats k for errors and logs.
func (k CheckKey) String() string {
	return fmt.Sprintf("%s#%d@%s %q", k.Repo, k.Number, k.HeadSHA, k.Name)
}

// CheckDesired is what a check run should show. Its JSON form (empty
// fields omitted) is what SetCheckDesired compares.
type CheckDesired struct {
	Status     string `json:"status,omitempty"` // queued, in_progress, completed
	Conclusion string `json:"conclusion,omitempty"`
	Title      string `json:"title,omitempty"`
	Summary    string `json:"summary,omitempty"`
	Text       string `json:"text,omitempty"`
	DetailsURL string `json:"details_url,omitempty"`
	ExternalID string `json:"external_id,omitempty"`
}

// CheckRender is one check run: what the bot wants it to show (Desired, at
// DesiredRevision, which counts its changes from 1) and which revision the
// code host was last confirmed to show (RenderedRevision, 0 before the
// first render; never above DesiredRevision, never moving backward).
// RenderedRevision < DesiredRevision means the code host lags.
type CheckRender struct {
	Key              CheckKey     `json:"key"`
	Desired          CheckDesired `json:"desired"`
	DesiredRevision  int64        `json:"desired_revision"`
	RenderedRevision int64        `json:"rendered_revision"`
	CheckRunID       int64        `json:"check_run_id,omitempty"` // the code host's id, from the last render
	// LastError is the error of the last failed render of a revision not
	// yet rendered; a successful render clears it.
	LastError  string    `json:"last_error,omitempty"`
	UpdatedAt  time.Time `json:"updated_at"`
	RenderedAt time.Time `json:"rendered_at,omitzero"`
}

// Lagging reports whether the code host shows an older revision than the
// desired one.
func (r CheckRender) Lagging() bool { return r.RenderedRevision < r.DesiredRevision }

// SetCheckDesiredParams are the parameters of SetCheckDesired.
type SetCheckDesiredParams struct {
	Key     CheckKey
	Desired CheckDesired
	Now     time.Time
}

// MarkCheckRenderedParams are the parameters of MarkCheckRendered: the
// revision the render showed, read back from the code host, and the check
// run's id there.
type MarkCheckRenderedParams struct {
	Key        CheckKey
	Revision   int64
	CheckRunID int64
	Now        time.Time
}

// MarkCheckRenderFailedParams are the parameters of MarkCheckRenderFailed.
type MarkCheckRenderFailedParams struct {
	Key      CheckKey
	Revision int64
	Error    string
	Now      time.Time
}

// ListCheckRendersParams select check renders; zero fields do not filter.
type ListCheckRendersParams struct {
	Repo    string
	Number  int // 0: every PR
	HeadSHA string
	// LaggingOnly keeps the renders whose RenderedRevision is below their
	// DesiredRevision.
	LaggingOnly bool
}

// CommentClaim is the state of one comment the bot posts once on a PR,
// named by its hidden marker: claimed by one holder at a time for a while,
// then posted (CommentID, for good).
type CommentClaim struct {
	Repo   string `json:"repo"`
	Number int    `json:"number"`
	Marker string `json:"marker"`
	// Owner is the last claimant (for humans and logs), ClaimedAt and
	// ExpiresAt its claim's start and end.
	Owner     string    `json:"owner,omitempty"`
	ClaimedAt time.Time `json:"claimed_at,omitzero"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// Token is set only in the answer to the ClaimComment call that took
	// the claim: it is the right to MarkCommentPosted.
	Token string `json:"-"`
	// Posted is true once MarkCommentPosted recorded CommentID.
	Posted    bool      `json:"posted,omitempty"`
	CommentID int64     `json:"comment_id,omitempty"`
	PostedAt  time.Time `json:"posted_at,omitzero"`
	// Held is set by ClaimComment when another claim, unexpired at its
	// Now, holds the comment: the caller got no token.
	Held bool `json:"held,omitempty"`
}

// ClaimCommentParams are the parameters of ClaimComment.
type ClaimCommentParams struct {
	Repo   string
	Number int
	Marker string
	Owner  string
	TTL    time.Duration
	Now    time.Time
}

// MarkCommentPostedParams are the parameters of MarkCommentPosted.
type MarkCommentPostedParams struct {
	Repo      string
	Number    int
	Marker    string
	Token     string
	CommentID int64
	Now       time.Time
}

// DeployAttempt is one request to deploy to an environment, from a /deploy
// comment, a merge or the CLI, and what became of it (see the Deploy*
// states).
type DeployAttempt struct {
	ID      string `json:"id"` // the caller's (a UUID)
	Env     string `json:"env"`
	Repo    string `json:"repo,omitempty"`
	Number  int    `json:"number,omitempty"`
	HeadSHA string `json:"head_sha,omitempty"` // the head the request pins: only it may be merged
	// Origin says who asked, for humans: pr:<repo>#<n>@<sha> or
	// cli:<user>@<host>.
	Origin      string `json:"origin,omitempty"`
	Trigger     string `json:"trigger"` // TriggerDeployCommand, TriggerMerge or TriggerCLI
	RequestedBy string `json:"requested_by,omitempty"`
	State       string `json:"state"`
	// Owner, LeaseToken and LeaseExpiresAt are the runner's lease, set by
	// StartDeploy and extended by RenewDeploy. The token is the right to
	// RenewDeploy and FinishDeploy.
	Owner          string    `json:"owner,omitempty"`
	LeaseToken     string    `json:"-"`
	LeaseExpiresAt time.Time `json:"lease_expires_at,omitzero"`
	// PlanID and ResultGeneration are the plan applied and the generation
	// the environment reached (promoted).
	PlanID           string `json:"plan_id,omitempty"`
	ResultGeneration int64  `json:"result_generation,omitempty"`
	Error            string `json:"error,omitempty"`
	// MergeSHA is the merge commit of the PR after a promoted deploy, or
	// MergeError why there was none; MergeRecordedAt when it was recorded.
	MergeSHA        string    `json:"merge_sha,omitempty"`
	MergeError      string    `json:"merge_error,omitempty"`
	MergeRecordedAt time.Time `json:"merge_recorded_at,omitzero"`
	// The merge gate (see GateStore): Mode is the gate mode the attempt
	// waits for (GateRendered or GateRecorded; "" for an ungated
	// environment); BaseGeneration the environment's generation when its
	// holds were recorded (HoldsRecordedAt), HoldsRenderedAt when the last
	// was rendered; PromotedAt when a fenced Promote committed under it
	// (with PlanID and ResultGeneration), which tells a dead attempt that
	// promoted from one that did not; SettledAt and SettledBy when its
	// holds were released.
	Mode            string    `json:"mode,omitempty"`
	BaseGeneration  int64     `json:"base_generation,omitempty"`
	HoldsRecordedAt time.Time `json:"holds_recorded_at,omitzero"`
	HoldsRenderedAt time.Time `json:"holds_rendered_at,omitzero"`
	PromotedAt      time.Time `json:"promoted_at,omitzero"`
	SettledAt       time.Time `json:"settled_at,omitzero"`
	SettledBy       string    `json:"settled_by,omitempty"`
	CreatedAt       time.Time `json:"created_at"`
	StartedAt       time.Time `json:"started_at,omitzero"`
	FinishedAt      time.Time `json:"finished_at,omitzero"`
	UpdatedAt       time.Time `json:"updated_at"`
}

// Terminal reports whether the attempt has ended (promoted, failed,
// cancelled or abandoned).
func (a DeployAttempt) Terminal() bool {
	switch a.State {
	case DeployPromoted, DeployFailed, DeployCancelled, DeployAbandoned:
		return true
	}
	return false
}

// RequestDeployParams are the parameters of RequestDeploy.
type RequestDeployParams struct {
	ID          string // the caller's UUID: a request is idempotent by it
	Env         string
	Repo        string
	Number      int
	HeadSHA     string
	Origin      string
	Trigger     string
	RequestedBy string
	Now         time.Time
}

// StartDeployParams are the parameters of StartDeploy.
type StartDeployParams struct {
	ID    string
	Owner string
	TTL   time.Duration
	Now   time.Time
}

// RenewDeployParams are the parameters of RenewDeploy.
type RenewDeployParams struct {
	ID    string
	Token string
	TTL   time.Duration
	Now   time.Time
}

// FinishDeployParams are the parameters of FinishDeploy.
type FinishDeployParams struct {
	ID    string
	Token string
	// State is DeployPromoted (PlanID and ResultGeneration required),
	// DeployFailed (Error required) or DeployCancelled.
	State            string
	PlanID           string
	ResultGeneration int64
	Error            string
	Now              time.Time
}

// RecordDeployMergeParams are the parameters of RecordDeployMerge: exactly
// one of MergeSHA (the merge commit) and MergeError (why there was no
// merge).
type RecordDeployMergeParams struct {
	ID         string
	MergeSHA   string
	MergeError string
	Now        time.Time
}

// CancelDeployParams are the parameters of CancelDeploy.
type CancelDeployParams struct {
	ID     string
	Reason string // stored as the attempt's Error
	Now    time.Time
}

// ListDeploysParams select deploy attempts; zero fields do not filter.
type ListDeploysParams struct {
	Env    string
	Repo   string
	Number int
	States []string
	// Limit is the most returned: 0 means DefaultListLimit; negative is an
	// error.
	Limit int
	// OldestFirst lists in request order (the next pending attempt first)
	// instead of newest first.
	OldestFirst bool
}

// CodeHostStore keeps what the pull-request bot knows: webhook deliveries,
// PR verdicts, the check runs it wants shown and what it has shown,
// sticky-comment claims and deploy attempts. Every transition that depends
// on earlier state is a compare-and-swap on a revision, a state or a lease
// token (Invariant 1): a job that runs twice or late cannot regress it.
//
// Every write requires Now (an error wrapping ErrNoNow otherwise, nothing
// written); times are stored as whole microseconds and returned in UTC.
// Input that names nothing (an empty repo, id or key part, a number below
// 1, an unknown verdict, state or trigger) is refused with an error naming
// it, writing nothing. A deploy method naming an attempt never requested
// fails wrapping ErrNotFound.
type CodeHostStore interface {
	// RecordDelivery inserts a webhook delivery keyed by its id, status
	// DeliveryReceived. A delivery id already recorded returns fresh=false
	// and changes nothing (a replay). It is the one write the intake makes
	// for every delivery, so the SQLite store commits it unsynced by
	// default (like an interval record): a power loss may forget the last
	// deliveries, letting a replay of one through, which idempotent jobs
	// make harmless.
	RecordDelivery(ctx context.Context, p RecordDeliveryParams) (fresh bool, err error)
	// FinishDelivery records the outcome of processing a delivery
	// (DeliveryProcessed, DeliveryIgnored or DeliveryFailed), its error
	// text and Now as ProcessedAt; the last write wins. ErrNotFound for an
	// id never recorded.
	FinishDelivery(ctx context.Context, p FinishDeliveryParams) error
	// ListDeliveries returns deliveries newest first (ReceivedAt
	// descending, then ID), at most p.Limit (default DefaultListLimit).
	ListDeliveries(ctx context.Context, p ListDeliveriesParams) ([]Delivery, error)

	// PutPRCheck writes the bot's verdict for one pull request against one
	// target environment, a compare-and-swap on Revision: ExpectedRevision
	// 0 creates it (ErrRevisionConflict if it exists); otherwise it must
	// equal the stored revision (ErrRevisionConflict if it does not, or if
	// there is no check). On success the revision is the old one plus one
	// (1 for a new check). A refused write changes nothing.
	//
	// The merge gate's write-path guard: when an attempt is held, rendered
	// or running on p.Env and the PR (open) is not its own and has no hold
	// of it, the same transaction inserts one, so a PR opened or pushed
	// during a deploy is held and released by that deploy's settle.
	PutPRCheck(ctx context.Context, p PutPRCheckParams) (PRCheck, error)
	// GetPRCheck returns one check, or ErrNotFound.
	GetPRCheck(ctx context.Context, repo string, number int, env string) (PRCheck, error)
	// ListPRChecks returns the checks matching p, ordered by repo, number
	// and env.
	ListPRChecks(ctx context.Context, p ListPRChecksParams) ([]PRCheck, error)

	// SetCheckDesired stores what one check run on one head should show.
	// A new check starts at DesiredRevision 1; when Desired differs from
	// what is stored (their JSON compared), DesiredRevision increases by
	// one; an identical Desired changes nothing (not even UpdatedAt).
	// Returns the row.
	SetCheckDesired(ctx context.Context, p SetCheckDesiredParams) (CheckRender, error)
	// MarkCheckRendered records that revision p.Revision of the desired run
	// is what the code host shows (read back), with its check run id:
	// applied only when RenderedRevision <= p.Revision <= DesiredRevision,
	// and then it clears LastError; otherwise it returns applied=false and
	// changes nothing (a late or stale render never moves it backward).
	// ErrNotFound when nothing is desired for the key.
	MarkCheckRendered(ctx context.Context, p MarkCheckRenderedParams) (applied bool, err error)
	// MarkCheckRenderFailed records a render attempt's error as LastError
	// without moving RenderedRevision. The failure of a revision already
	// rendered, or above the desired one, is moot: nothing is written.
	// ErrNotFound when nothing is desired for the key.
	MarkCheckRenderFailed(ctx context.Context, p MarkCheckRenderFailedParams) error
	// GetCheckRender returns one check render, or ErrNotFound.
	GetCheckRender(ctx context.Context, k CheckKey) (CheckRender, error)
	// ListCheckRenders returns the renders matching p, ordered by repo,
	// number, head and name.
	ListCheckRenders(ctx context.Context, p ListCheckRendersParams) ([]CheckRender, error)

	// ClaimComment claims the right to post the comment (repo, number,
	// marker) until Now+TTL. It is exclusive: while a claim is unexpired
	// (its ExpiresAt after Now) every other claim gets Held=true and no
	// token; an expired claim is taken over with a fresh token. A claim is
	// re-entrant for its Owner: the same owner (a retried job that lost
	// its token) takes it back at once with a fresh token, which makes the
	// old one stale. Once posted, every claim returns Posted=true, the
	// comment id and no token.
	ClaimComment(ctx context.Context, p ClaimCommentParams) (CommentClaim, error)
	// MarkCommentPosted records the comment the holder of p.Token posted.
	// It succeeds while the token is the last one ClaimComment gave, even
	// if its claim expired (the comment exists; recording it prevents a
	// second), and again, idempotently, when the comment is already
	// recorded posted with the same id. Otherwise (the claim was taken
	// over, or a different comment is recorded) it fails wrapping
	// ErrLeaseLost and writes nothing. ErrNotFound if never claimed.
	MarkCommentPosted(ctx context.Context, p MarkCommentPostedParams) error
	// GetComment returns the comment's claim (Token and Held unset), or
	// ErrNotFound.
	GetComment(ctx context.Context, repo string, number int, marker string) (CommentClaim, error)

	// RequestDeploy records a pending deploy attempt. It is idempotent by
	// ID: an ID already recorded with the same request returns the stored
	// attempt, whatever its state; with a different request it is an
	// error.
	RequestDeploy(ctx context.Context, p RequestDeployParams) (DeployAttempt, error)
	// StartDeploy moves a pending attempt to running, with Owner and a
	// fresh lease token expiring at Now+TTL. It fails with ErrDeployActive
	// when another attempt on the same environment is running on a lease
	// unexpired at Now (a lease expires at LeaseExpiresAt exactly); an
	// attempt running on an expired lease is first marked abandoned (Error
	// AbandonedLeaseExpired, FinishedAt Now) in the same transaction. It is
	// pinned to state pending: ErrDeployState otherwise. Of racing starts
	// on one environment at most one succeeds, also when the check is
	// bypassed: the schema admits one active attempt per environment.
	StartDeploy(ctx context.Context, p StartDeployParams) (DeployAttempt, error)
	// RenewDeploy extends a held, rendered or running attempt's lease to
	// Now+TTL while Token holds it unexpired at Now: ErrLeaseLost
	// otherwise.
	RenewDeploy(ctx context.Context, p RenewDeployParams) (DeployAttempt, error)
	// FinishDeploy ends a held, rendered or running attempt (a gate that
	// timed out ends a held one failed), a compare-and-swap on its id, its
	// token and its state (its lease may have expired, as long as nothing
	// abandoned it): DeployPromoted, DeployFailed or
	// DeployCancelled, with FinishedAt Now. A replay with the same token
	// and outcome returns the stored attempt; anything else fails wrapping
	// ErrLeaseLost and writes nothing.
	FinishDeploy(ctx context.Context, p FinishDeployParams) (DeployAttempt, error)
	// RecordDeployMerge records, once, the merge that followed a promoted
	// deploy (its sha, or the reason there was none): ErrDeployState for
	// an attempt not promoted or whose merge is recorded otherwise; the
	// same record again returns the stored attempt.
	RecordDeployMerge(ctx context.Context, p RecordDeployMergeParams) (DeployAttempt, error)
	// CancelDeploy cancels a pending attempt (e.g. the PR was closed before
	// it started), with p.Reason as its Error: ErrDeployState for an
	// attempt in another state, except one already cancelled, which is
	// returned as stored.
	CancelDeploy(ctx context.Context, p CancelDeployParams) (DeployAttempt, error)
	// GetDeploy returns one attempt, or ErrNotFound.
	GetDeploy(ctx context.Context, id string) (DeployAttempt, error)
	// ListDeploys returns the attempts matching p, newest first (CreatedAt
	// descending, then ID) or oldest first, at most p.Limit (default
	// DefaultListLimit).
	ListDeploys(ctx context.Context, p ListDeploysParams) ([]DeployAttempt, error)
}
