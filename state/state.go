// Package state defines gapless's state store: snapshots, intervals,
// environments, plans and their application history, leases, and a history
// of structured events.
//
// The Store interface is domain-shaped, not key/value. It has one
// implementation per backend (state/sqlite, the embedded default, and
// state/postgres, for production) and one conformance suite
// (state/statetest) that every implementation must pass.
//
// This package holds only the interface, its records and its sentinels.
// What the two stores share below it lives in state/internal (Go's internal
// rule keeps it theirs), and the settlement of freshness debt, the pure
// logic of which debts a promotion repairs, supersedes or carries, in
// state/debt.
//
// Invariant 1 of the design lives here: every transition that depends on
// earlier state is a compare-and-swap on the generation the caller has
// evidence for — an expected plan id, an environment generation, or a lease
// token — never a filter on a state value alone. A stale actor's write is a
// no-op or a typed error; it never succeeds.
package state

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/snapshot"
)

// Sentinel errors. Implementations wrap them with context; callers branch
// with errors.Is.
var (
	// ErrConflictingPlan: a promotion or finalisation named a plan id that is
	// no longer the environment's current one; another plan won.
	ErrConflictingPlan = errors.New("conflicting plan")
	// ErrLeaseHeld: the lease is held, unexpired, by another token.
	ErrLeaseHeld = errors.New("lease held by another owner")
	// ErrLeaseLost: the caller's token no longer holds the lease (it expired
	// and was taken over, or was released).
	ErrLeaseLost = errors.New("lease lost")
	// ErrFenced: an interval write carried a fence (lease token or
	// environment generation) that is stale. Nothing was written.
	ErrFenced = errors.New("fenced: stale lease token or environment generation")
	// ErrNotFound: the named object does not exist.
	ErrNotFound = errors.New("not found")
	// ErrSchemaTooNew: the store's schema was migrated by a newer gapless.
	ErrSchemaTooNew = errors.New("state schema is newer than this version of gapless supports")
	// ErrNoNow is wrapped when a call that compares with the current time
	// gets no Now: time is injected, and a store never reads a clock of its
	// own.
	ErrNoNow = errors.New("now is required (time is injected; it is never read from a clock)")
)

// SnapshotKey identifies one snapshot: a model name at a fingerprint.
type SnapshotKey struct {
	Name        string `json:"name"`
	Fingerprint string `json:"fingerprint"` // snapshot.Fingerprint.String()
}

// KeyOf returns the key of s.
func KeyOf(s *snapshot.Snapshot) SnapshotKey {
	return SnapshotKey{Name: s.Name, Fingerprint: s.Fingerprint.String()}
}

// VersionKey identifies one interval record: a model name at a version.
// Snapshots that share a version share their intervals.
type VersionKey struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// SourceVersion is the version of a source's interval record (see
// SourceKey). Model versions are hex digests, so no model version is it.
const SourceVersion = "source"

// SourceKey is the interval record where the source name publishes how far
// its data is complete (its watermark, as coverage from its start). Models
// reading the source are due only where it covers; the ingest worker
// (ingest.Pass) writes it.
func SourceKey(name string) VersionKey { return VersionKey{Name: name, Version: SourceVersion} }

// SortVersionKeys sorts keys by name, then version.
func SortVersionKeys(keys []VersionKey) {
	slices.SortFunc(keys, func(a, b VersionKey) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Version, b.Version))
	})
}

// SnapshotRef is what an environment records of each snapshot it serves.
type SnapshotRef struct {
	Name        string `json:"name"`
	Fingerprint string `json:"fingerprint"`
	Version     string `json:"version"`
}

// Key returns the snapshot key of r.
func (r SnapshotRef) Key() SnapshotKey { return SnapshotKey{Name: r.Name, Fingerprint: r.Fingerprint} }

// VersionKey returns the interval record key of r.
func (r SnapshotRef) VersionKey() VersionKey { return VersionKey{Name: r.Name, Version: r.Version} }

// Environment is a name mapped to the snapshots it serves.
//
// Generation changes at every promotion (it is strictly increasing per
// environment name, starting at 1), so a writer that read generation g can
// prove it is still current by pinning its write to g.
type Environment struct {
	Name           string        `json:"name"`
	Generation     int64         `json:"generation"`
	PlanID         string        `json:"plan_id"`
	PreviousPlanID string        `json:"previous_plan_id,omitempty"`
	Snapshots      []SnapshotRef `json:"snapshots"` // sorted by name
	PromotedAt     time.Time     `json:"promoted_at"`
	FinalizedAt    time.Time     `json:"finalized_at,omitzero"` // zero until the current plan is finalised
	ExpiresAt      time.Time     `json:"expires_at,omitzero"`   // zero: never
	Invalidated    bool          `json:"invalidated,omitempty"`
}

// Fence pins an interval write to evidence the writer holds, in one or
// more of three forms:
//   - LeaseKey and LeaseToken: the write succeeds only while that token
//     holds that lease, unexpired at Now;
//   - Environment and Generation: the write succeeds only while that
//     environment is still at that generation (no promotion since);
//   - Source and SourceGeneration: the write succeeds only while that
//     source (defined, not removed) still serves that generation: a
//     watermark computed from a generation that a swap or a removal has
//     since replaced is not published.
//
// With several set, all must hold. The check and the write happen in one
// transaction.
type Fence struct {
	LeaseKey         string `json:"lease_key,omitempty"`
	LeaseToken       string `json:"lease_token,omitempty"`
	Environment      string `json:"environment,omitempty"`
	Generation       int64  `json:"generation,omitempty"`
	Source           string `json:"source,omitempty"`
	SourceGeneration int64  `json:"source_generation,omitempty"`
}

// IntervalsParams are the parameters of AddIntervals and RemoveIntervals.
type IntervalsParams struct {
	Key    VersionKey
	Ranges interval.Set
	// Fence, when set, makes the write conditional (see Fence); a stale
	// fence fails with ErrFenced and writes nothing.
	Fence *Fence
	// Now is required by AddIntervals: it is the repair time of every debt
	// the write completes, and a store refuses an add without it (an error
	// wrapping ErrNoNow), writing nothing. RemoveIntervals needs it only
	// with a lease fence, to compare the lease's expiry with.
	Now time.Time
}

// LastWrite is the last AddIntervals that wrote ranges to one interval
// record (VersionKey): when (the write's IntervalsParams.Now) and what (the
// span of the ranges it wrote, from the first start to the last end). It is
// recorded in the write's transaction, so a write that fails (a stale fence,
// bad input) records nothing; an add of an empty set writes nothing and
// records nothing. RemoveIntervals leaves it; DeleteIntervals removes it.
// A later write replaces it, whatever its time: "last" is the order of the
// writes, not of their Now.
type LastWrite struct {
	At    time.Time      `json:"at"`
	Range interval.Range `json:"range"`
}

// PromoteParams are the parameters of Promote.
type PromoteParams struct {
	Environment string
	// ExpectedPlanID is the plan id the caller believes is current: "" when
	// it believes the environment does not exist yet (or is invalidated).
	ExpectedPlanID string
	PlanID         string
	Snapshots      []SnapshotRef
	ExpiresAt      time.Time // zero: never
	Now            time.Time
	// Check, if set, runs inside the promotion transaction after the
	// environment row is locked and the expected plan id verified, and
	// before anything is written. It sees state as the promotion will
	// commit against. An error aborts the promotion and is returned wrapped.
	// This is where the no-gap check runs, so that no interval or
	// environment change can slip between check and promotion.
	//
	// What Check returns is written in the same transaction as the
	// promotion: the debts a policy accepted (design invariant 2: every
	// accepted gap has a record) and the history events of the acceptance.
	// Check may run more than once (a retried transaction); it must only
	// read through r, and its result replaces any earlier one.
	Check func(ctx context.Context, r Reader) (CheckResult, error)
	// Gate is the deploy attempt the promotion runs under. An environment
	// under the merge gate (GateStore) is refused with ErrNotHeld, writing
	// nothing, unless Gate names an attempt on it that is running, on
	// Token's unexpired lease at Now, with its holds recorded (and
	// rendered, in mode rendered), checked inside the promotion
	// transaction. A fenced promotion (gated or not) stamps the attempt's
	// PlanID, ResultGeneration and PromotedAt in the same transaction.
	Gate *GateFence
}

// CheckResult is what a promotion's Check asks the promotion to write
// atomically with it.
type CheckResult struct {
	// Debts are the gaps accepted by the promotion's policy. The store
	// assigns their IDs and fills Environment, PlanID (from PromoteParams)
	// and AcceptedAt (PromoteParams.Now) when they are empty.
	Debts []Debt
	// Events are appended as with AppendEvents.
	Events []Event
}

// Debt is freshness debt: a range of a model's version that a promotion
// policy accepted serving missing, until the scheduler fills it.
//
// A debt is open until one of:
//   - the range is fully covered by the version's intervals: AddIntervals
//     stamps RepairedAt (its Now) in the transaction that completes the
//     coverage, and appends an EventGapRepaired event;
//   - a later promotion of the environment serves the model at another
//     version, which covers the range: the gap is no longer served, and
//     Promote stamps RepairedAt (its Now), with an EventGapRepaired event
//     whose data names the promotion;
//   - a later promotion serves the model at another version, which misses
//     part of the range: the gap is still served, so Promote stamps
//     SupersededAt and carries the debt to one new open debt on the served
//     version per missing range (CarriedFrom set, the promotion's plan, the
//     same policy, bound and advances), with an EventGapSuperseded event
//     naming them and one EventGapCarried event each. A carried debt is
//     repaired by AddIntervals like any other;
//   - a later promotion no longer serves the model: Promote stamps
//     SupersededAt, with an EventGapSuperseded event;
//   - the environment is invalidated: Invalidate stamps SupersededAt (its
//     Now), with an EventGapSuperseded event whose Reason is
//     ReasonInvalidated;
//   - the environment is removed: RemoveEnvironment stamps SupersededAt
//     (its Now), with an EventGapSuperseded event whose Reason is
//     ReasonRemoved.
//
// Promote does all this in the promotion transaction (see debt.Settle). A
// debt recorded for a range that is already covered when the promotion
// commits is recorded repaired at once. So a gap a policy accepted is never
// served without an open debt (design invariant 2).
type Debt struct {
	ID          int64          `json:"id"` // assigned by the store, increasing
	Environment string         `json:"environment"`
	Model       string         `json:"model"`
	Version     string         `json:"version"`
	Range       interval.Range `json:"range"`
	PlanID      string         `json:"plan_id"`
	Policy      string         `json:"policy"`
	// Bound is the policy's bound, in scheduler advances; Advances is what
	// was counted at acceptance (Advances <= Bound).
	Bound        int       `json:"bound"`
	Advances     int       `json:"advances"`
	AcceptedAt   time.Time `json:"accepted_at"`
	RepairedAt   time.Time `json:"repaired_at,omitzero"`
	SupersededAt time.Time `json:"superseded_at,omitzero"`
	// CarriedFrom is the id of the debt this one was carried from: a
	// promotion superseded that debt but serves the model at this debt's
	// version, which misses this debt's range (see above). Zero for a debt
	// a policy accepted; the store alone sets it.
	CarriedFrom int64 `json:"carried_from,omitempty"`
}

// Open reports whether d is neither repaired nor superseded.
func (d Debt) Open() bool { return d.RepairedAt.IsZero() && d.SupersededAt.IsZero() }

// Key is the interval record the debt waits on.
func (d Debt) Key() VersionKey { return VersionKey{Name: d.Model, Version: d.Version} }

// DebtFilter selects debts; zero fields do not filter. Results are in ID
// order.
type DebtFilter struct {
	Environment string
	Model       string
	PlanID      string
	// OpenOnly keeps only open debts (see Debt).
	OpenOnly bool
}

// FinalizeParams are the parameters of Finalize.
type FinalizeParams struct {
	Environment string
	PlanID      string
	Now         time.Time
}

// RemoveEnvironmentParams are the parameters of RemoveEnvironment.
type RemoveEnvironmentParams struct {
	Name string
	// Generation is the generation the caller read: the removal is a
	// compare-and-swap on it.
	Generation int64
	// Now is when the environment stops serving its snapshots: the last-served
	// time recorded for each of its versions (see Store.LastServed), the time
	// its open debts are superseded at, and the time of the removal event.
	// Required.
	Now time.Time
	// Data is the Data of the EventEnvironmentRemoving event the removal
	// appends (the janitor lists there the views it is about to drop).
	Data json.RawMessage
}

// InvalidateParams are the parameters of Invalidate.
type InvalidateParams struct {
	Environment string
	Now         time.Time
}

// Plan is a saved plan. The store treats Payload as opaque JSON.
type Plan struct {
	ID          string          `json:"id"`
	Environment string          `json:"environment"`
	Payload     json.RawMessage `json:"payload"`
	CreatedAt   time.Time       `json:"created_at"`
}

// PlanFilter selects saved plans; zero fields do not filter. ListPlans
// returns them newest first (CreatedAt descending, then ID ascending), at
// most Limit of them (0: no limit; negative is an error).
type PlanFilter struct {
	Environment string
	// CreatedAfter keeps the plans created strictly after it.
	CreatedAfter time.Time
	Limit        int
}

// DeletePlansParams are the parameters of DeletePlans.
type DeletePlansParams struct {
	// IDs are the plans to delete; an id that names no saved plan is
	// ignored.
	IDs []string
	// Before: a plan created, or with an application record, at or after
	// it is kept. Required: a zero Before is refused, wrapping ErrNoNow,
	// and nothing is deleted.
	Before time.Time
}

// Application is one entry of a plan's application history: a stage of an
// apply, started, finished or failed.
type Application struct {
	ID     int64           `json:"id"` // assigned by the store, increasing
	PlanID string          `json:"plan_id"`
	Stage  string          `json:"stage"`
	Status string          `json:"status"`
	Detail json.RawMessage `json:"detail,omitempty"`
	At     time.Time       `json:"at"`
}

// Lease is a named, expiring claim.
type Lease struct {
	Key        string      `json:"key"`
	Owner      string      `json:"owner"`
	Holder     LeaseHolder `json:"holder"`
	Token      string      `json:"token"`
	AcquiredAt time.Time   `json:"acquired_at"`
	ExpiresAt  time.Time   `json:"expires_at"`
}

// LeaseHolder is the process that holds a lease: its host, its PID there,
// and Start, what tells it from a later process that reuses the PID (see
// lease.Self). The store keeps it as given and never interprets it; a zero
// holder (a lease taken by an older gapless) is unknown.
type LeaseHolder struct {
	Host  string `json:"host,omitempty"`
	PID   int    `json:"pid,omitempty"`
	Start string `json:"start,omitempty"`
}

// IsZero reports whether the holder is unknown.
func (h LeaseHolder) IsZero() bool { return h == LeaseHolder{} }

// AcquireLeaseParams are the parameters of AcquireLease.
type AcquireLeaseParams struct {
	Key    string
	Owner  string      // who holds it, for humans and logs
	Holder LeaseHolder // the acquiring process
	TTL    time.Duration
	Now    time.Time
}

// TakeOverLeaseParams are the parameters of TakeOverLease: the lease Key
// as the caller read it (Token and ExpiresAt), and the new holder's Owner,
// Holder and TTL from Now.
type TakeOverLeaseParams struct {
	Key       string
	Token     string
	ExpiresAt time.Time
	Owner     string
	Holder    LeaseHolder
	TTL       time.Duration
	Now       time.Time
}

// RenewLeaseParams are the parameters of RenewLease.
type RenewLeaseParams struct {
	Key   string
	Token string
	TTL   time.Duration
	Now   time.Time
}

// ReleaseLeaseParams are the parameters of ReleaseLease.
type ReleaseLeaseParams struct {
	Key   string
	Token string
}

// Event is one structured history record.
type Event struct {
	ID          int64           `json:"id"` // assigned by the store, increasing
	At          time.Time       `json:"at"`
	Kind        string          `json:"kind"`
	Environment string          `json:"environment,omitempty"`
	Model       string          `json:"model,omitempty"`
	PlanID      string          `json:"plan_id,omitempty"`
	Reason      string          `json:"reason,omitempty"`
	Data        json.RawMessage `json:"data,omitempty"`
}

// Event kinds recorded by gapless. The set grows; stored kinds never change
// meaning.
const (
	EventPlanApplied       = "plan_applied"
	EventPromotionAccepted = "promotion_accepted"
	EventPromotionRejected = "promotion_rejected"
	EventGapAccepted       = "gap_accepted"
	EventGapRepaired       = "gap_repaired"
	EventGapSuperseded     = "gap_superseded"
	EventCatchUp           = "catch_up"
	EventReplan            = "replan"
	// EventGapCarried records a debt carried from a superseded one to the
	// version a promotion serves instead (see Debt.CarriedFrom).
	EventGapCarried = "gap_carried"
	// EventEnvironmentRemoving is written by RemoveEnvironment in the
	// transaction that deletes an environment's row, listing (in its Data)
	// the views the janitor drops after;
	// EventEnvironmentViewsDropped once they are dropped (or found to
	// belong to the environment created again). A removal without its
	// second event was interrupted: the next janitor finishes it.
	EventEnvironmentRemoving     = "environment_removing"
	EventEnvironmentViewsDropped = "environment_views_dropped"
	// EventAuditPassed and EventAuditFailed record one audit's outcome
	// over one interval (or a whole build) of a model's version: Reason is
	// the audit's name; Data holds the version, the interval, whether it
	// blocks, the count of offending rows and a sample of them.
	EventAuditPassed = "audit_passed"
	EventAuditFailed = "audit_failed"
	// EventEmptyBackfill records intervals an operator had recorded as
	// computed without computing them (plan --empty-backfill): the
	// version's rows for them are not there, by choice. Model is the
	// model; Data holds the version and the ranges.
	EventEmptyBackfill = "empty_backfill"
)

// ReasonInvalidated is the Reason of the gap_superseded event of a debt
// superseded because its environment was invalidated (Invalidate): no plan
// superseded it, so the event's PlanID is empty.
const ReasonInvalidated = "invalidated"

// ReasonRemoved is the Reason of the gap_superseded event of a debt
// superseded because its environment was removed (RemoveEnvironment, the
// janitor's removal of an expired or invalidated environment): no plan
// superseded it, so the event's PlanID is empty.
const ReasonRemoved = "removed"

// EventFilter selects events; zero fields do not filter. Results are in ID
// order, at most Limit (0: no limit), with ID > AfterID.
type EventFilter struct {
	Kinds       []string
	Environment string
	Model       string
	PlanID      string
	AfterID     int64
	Limit       int
}

// Reader is the read side of the store, also offered inside a promotion
// transaction.
type Reader interface {
	GetIntervals(ctx context.Context, keys []VersionKey) (map[VersionKey]interval.Set, error)
	GetEnvironment(ctx context.Context, name string) (*Environment, error)
}

// Store is the state store.
type Store interface {
	Reader
	SourceStore
	BatchQueue
	CodeHostStore
	GateStore

	// PushSnapshots records snapshots. Pushing a snapshot that exists is a
	// no-op (a snapshot is immutable: same key, same content).
	PushSnapshots(ctx context.Context, snaps []*snapshot.Snapshot) error
	// GetSnapshots returns the snapshots found among keys; missing keys are
	// absent from the map, not an error.
	GetSnapshots(ctx context.Context, keys []SnapshotKey) (map[SnapshotKey]*snapshot.Snapshot, error)
	// DeleteSnapshots removes snapshots (the janitor's job). Intervals are
	// keyed by version and are removed separately.
	DeleteSnapshots(ctx context.Context, keys []SnapshotKey) error

	// AddIntervals marks ranges as computed for a version. Stored ranges are
	// merged: overlapping and adjacent ranges compact into one, so storage
	// is proportional to the number of gaps, never to the number of buckets.
	// In the same transaction it stamps repaired, at p.Now, every open debt
	// of the version whose range is now covered. p.Now is required: without
	// it the write is refused with an error wrapping ErrNoNow.
	AddIntervals(ctx context.Context, p IntervalsParams) error
	// RemoveIntervals marks ranges as no longer computed (restatement).
	RemoveIntervals(ctx context.Context, p IntervalsParams) error
	// GetIntervals (from Reader) returns the covered set of every key, in one
	// or a few queries however many keys there are. Keys without intervals
	// map to an empty set.
	// DeleteIntervals removes every interval of the given versions (janitor),
	// their last writes and their last-served times (see LastServed).
	DeleteIntervals(ctx context.Context, keys []VersionKey) error
	// LastWrites returns the last write (see LastWrite) of every key among
	// keys that has one, in one or a few queries however many keys there
	// are; keys never written to (or deleted since) are absent from the map.
	LastWrites(ctx context.Context, keys []VersionKey) (map[VersionKey]LastWrite, error)

	// ListEnvironments returns every environment, sorted by name.
	ListEnvironments(ctx context.Context) ([]*Environment, error)
	// EnvironmentGeneration returns the named environment's generation and
	// whether it is invalidated, as GetEnvironment would, but from one
	// indexed read that decodes nothing else (not the snapshot references,
	// whose size grows with the environment): what a run's circuit breaker
	// re-reads before every model. An environment that does not exist (never
	// promoted, or removed) is an error wrapping ErrNotFound.
	EnvironmentGeneration(ctx context.Context, name string) (generation int64, invalidated bool, err error)
	// Promote points an environment at a new set of snapshots, as a
	// compare-and-swap on ExpectedPlanID: if the environment's current plan
	// id differs, it fails with ErrConflictingPlan and changes nothing.
	// On success the generation is incremented, PreviousPlanID set,
	// FinalizedAt cleared and Invalidated cleared. Promoting an invalidated
	// environment expects "" (it is treated as absent). In the same
	// transaction it records p.Now as the last-served time (see LastServed)
	// of every version the environment served before (invalidated or not)
	// and no longer serves; a refused promotion records nothing.
	Promote(ctx context.Context, p PromoteParams) (*Environment, error)
	// Finalize marks the environment's current plan finalised, pinned to
	// PlanID: ErrConflictingPlan if another plan is current, ErrNotFound if
	// there is no such environment.
	Finalize(ctx context.Context, p FinalizeParams) error
	// Invalidate marks an environment invalidated and expired at Now, for
	// the janitor to remove. ErrNotFound if it does not exist. In the same
	// transaction it supersedes, at Now, every open debt of the environment
	// (nothing it served will be served again), appending one
	// EventGapSuperseded event per debt, in debt ID order, with no plan and
	// Reason ReasonInvalidated (see debt.InvalidatedEvent).
	Invalidate(ctx context.Context, p InvalidateParams) error
	// RemoveEnvironment removes an environment (janitor) in one
	// transaction, pinned to its generation: ErrConflictingPlan if it
	// changed since it was read, ErrNotFound if there is none; a refused
	// removal changes nothing. In the same transaction it records p.Now as
	// the last-served time of every version the environment served,
	// supersedes at p.Now every open debt of the environment (nothing it
	// served will be served again, and the janitor may delete the intervals
	// that would have repaired them) with one EventGapSuperseded event per
	// debt, in debt ID order, with no plan and Reason ReasonRemoved (see
	// debt.RemovedEvent), and then appends the removal's EventEnvironmentRemoving
	// event (At p.Now, the environment, its plan and p.Data), which it
	// returns with its ID. p.Now is required.
	RemoveEnvironment(ctx context.Context, p RemoveEnvironmentParams) (Event, error)
	// LastServed returns, for every key among keys that an environment ever
	// stopped serving, the latest time one did: the Now of the promotion
	// that replaced it (Promote) or of the removal of an environment that
	// served it (RemoveEnvironment). The latest wins whatever the order of
	// the writes. A version that some environment still serves may have one
	// (another environment stopped serving it, or this one served it
	// before); a version never served, or served only before this was
	// recorded, is absent. Times are UTC. It answers in one or a few
	// queries however many keys there are. This is what the janitor's
	// snapshot_ttl is measured from (see janitor.RetainUnserved).
	LastServed(ctx context.Context, keys []VersionKey) (map[VersionKey]time.Time, error)

	// SavePlan stores a plan. Saving an id twice with the same payload is a
	// no-op; with a different payload it is an error.
	SavePlan(ctx context.Context, p Plan) error
	// GetPlan returns a saved plan or ErrNotFound.
	GetPlan(ctx context.Context, id string) (*Plan, error)
	// ListPlans returns the saved plans matching f, newest first (see
	// PlanFilter), each with its id, environment, creation time and
	// payload. A plan is listed from the moment it is saved, whether or not
	// it was ever promoted.
	ListPlans(ctx context.Context, f PlanFilter) ([]Plan, error)
	// DeletePlans deletes saved plans and their application histories (the
	// janitor's pruning of finished plans), in one transaction that keeps,
	// whatever the caller read, every plan an environment serves or served
	// before (its PlanID or PreviousPlanID: a rollback reads it) and every
	// plan with activity at or after p.Before (see DeletePlansParams). It
	// returns the ids it deleted, sorted. Debts and events that name a
	// deleted plan stay.
	DeletePlans(ctx context.Context, p DeletePlansParams) ([]string, error)
	// RecordApplication appends to a plan's application history.
	RecordApplication(ctx context.Context, a Application) (Application, error)
	// ListApplications returns a plan's application history in order.
	ListApplications(ctx context.Context, planID string) ([]Application, error)

	// AcquireLease takes the lease if it is free or expired at Now, with a
	// fresh random token: ErrLeaseHeld otherwise. The check is a
	// compare-and-swap in the write's WHERE clause.
	AcquireLease(ctx context.Context, p AcquireLeaseParams) (Lease, error)
	// TakeOverLease gives the lease, expired or not, a fresh random token
	// for a new holder, when the caller has evidence that the holder it
	// read is gone (lease.Options.HolderGone: a process of this host that
	// no longer runs). The write is a compare-and-swap on the lease as read
	// (WHERE token = $token AND expires_at = $expires_at): if the lease was
	// released, taken over or renewed since (a renewal proves its holder
	// alive), nothing is written and the error wraps ErrLeaseLost. The
	// displaced token can then neither renew, release nor pass a fence.
	TakeOverLease(ctx context.Context, p TakeOverLeaseParams) (Lease, error)
	// RenewLease extends a lease still held by Token and unexpired at Now
	// (WHERE token = $token AND expires_at > $now): ErrLeaseLost otherwise.
	RenewLease(ctx context.Context, p RenewLeaseParams) (Lease, error)
	// ReleaseLease frees a lease held by Token: ErrLeaseLost if the token no
	// longer holds it.
	ReleaseLease(ctx context.Context, p ReleaseLeaseParams) error
	// CheckFence reports, without writing, whether the evidence f names
	// still holds at now: nil, or an error wrapping ErrFenced. A writer
	// calls it before expensive work it would have to throw away (a
	// warehouse batch); the write itself is still fenced, because the
	// evidence can go stale between this check and the write.
	CheckFence(ctx context.Context, f Fence, now time.Time) error
	// GetLease returns the lease row (possibly expired) or ErrNotFound.
	GetLease(ctx context.Context, key string) (Lease, error)

	// ListDebts returns the freshness debts matching f, in ID order. Debts
	// are written only by Promote (through PromoteParams.Check, or carried
	// from a debt it supersedes) and updated only by AddIntervals (repair)
	// and Promote (repair or supersession of the debts of versions it no
	// longer serves; see Debt).
	ListDebts(ctx context.Context, f DebtFilter) ([]Debt, error)

	// AppendEvents records events, assigning their IDs.
	AppendEvents(ctx context.Context, events ...Event) ([]Event, error)
	// ListEvents returns events matching f.
	ListEvents(ctx context.Context, f EventFilter) ([]Event, error)

	// SchemaVersion returns the store's migrated schema version.
	SchemaVersion(ctx context.Context) (int64, error)
	// Close releases the store's connections.
	Close() error
}
