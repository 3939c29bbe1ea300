package storekit

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gapless-dev/gapless/state"
)

// The code-host store's transitions (state.CodeHostStore), shared by both
// stores over CodeHostTx. Each reads the row it changes locked, checks its
// compare-and-swap on it (a revision, a state, a token) and writes, in one
// transaction, so what it checked is what it writes against.

// CodeHostTx is what the code-host transitions need of one store
// transaction. Its read methods lock the row they return until the
// transaction ends (PostgreSQL: FOR UPDATE; SQLite: the transaction holds
// the write lock). Its Insert methods insert a row unless its key exists
// (ON CONFLICT DO NOTHING) and report whether they did: a transition that
// lost an insert race to another transaction reads that one's row next.
type CodeHostTx interface {
	PRCheck(ctx context.Context, repo string, number int, env string) (state.PRCheck, bool, error)
	InsertPRCheck(ctx context.Context, c state.PRCheck) (bool, error)
	UpdatePRCheck(ctx context.Context, c state.PRCheck) error

	CheckRender(ctx context.Context, k state.CheckKey) (state.CheckRender, bool, error)
	InsertCheckRender(ctx context.Context, r state.CheckRender) (bool, error)
	UpdateCheckRender(ctx context.Context, r state.CheckRender) error

	// Comment reads a comment's row, its holder's Token included.
	Comment(ctx context.Context, repo string, number int, marker string) (state.CommentClaim, bool, error)
	InsertComment(ctx context.Context, c state.CommentClaim) (bool, error)
	UpdateComment(ctx context.Context, c state.CommentClaim) error

	Deploy(ctx context.Context, id string) (state.DeployAttempt, bool, error)
	InsertDeploy(ctx context.Context, a state.DeployAttempt) (bool, error)
	// UpdateDeploy rewrites an existing attempt. When the write would make
	// a second active attempt on its environment (the schema's partial
	// unique index refuses it), the error wraps state.ErrDeployActive.
	UpdateDeploy(ctx context.Context, a state.DeployAttempt) error
	// ActiveDeploys reads and locks the attempts of env in an active state
	// (ActiveDeployStates) other than the attempt except.
	ActiveDeploys(ctx context.Context, env, except string) ([]state.DeployAttempt, error)
}

// ActiveDeployStates are the states the schema admits one attempt per
// environment in (the partial unique index deploy_attempts_one_active):
// running, and held and rendered, which the merge gate adds.
var ActiveDeployStates = []string{state.DeployHeld, state.DeployRendered, state.DeployRunning}

// stamp is t as stored: whole microseconds, UTC (the zero time stays zero).
func stamp(t time.Time) time.Time { return FromMicros(Micros(t)) }

// expired reports whether a lease expiring at until is expired at now (a
// lease expires at its expiry exactly), compared as stored.
func expired(until, now time.Time) bool { return Micros(until) <= Micros(now) }

// ListLimit is the row limit of a list with a default (state.DefaultListLimit
// for 0); a negative limit is an error.
func ListLimit(limit int) (int, error) {
	switch {
	case limit < 0:
		return 0, fmt.Errorf("negative limit %d", limit)
	case limit == 0:
		return state.DefaultListLimit, nil
	}
	return limit, nil
}

// CheckRecordDelivery refuses a delivery without an id, an event or a Now.
func CheckRecordDelivery(p state.RecordDeliveryParams) error {
	switch {
	case p.ID == "":
		return errors.New("a delivery id is required")
	case p.Event == "":
		return fmt.Errorf("delivery %q: an event is required", p.ID)
	case p.Now.IsZero():
		return fmt.Errorf("delivery %q: %w", p.ID, state.ErrNoNow)
	}
	return nil
}

// CheckFinishDelivery refuses a delivery outcome without an id, a known
// outcome status or a Now.
func CheckFinishDelivery(p state.FinishDeliveryParams) error {
	switch {
	case p.ID == "":
		return errors.New("a delivery id is required")
	case p.Status != state.DeliveryProcessed && p.Status != state.DeliveryIgnored && p.Status != state.DeliveryFailed:
		return fmt.Errorf("delivery %q: status %q: want %s, %s or %s", p.ID, p.Status,
			state.DeliveryProcessed, state.DeliveryIgnored, state.DeliveryFailed)
	case p.Now.IsZero():
		return fmt.Errorf("delivery %q: %w", p.ID, state.ErrNoNow)
	}
	return nil
}

// checkPR refuses a PR reference without a repository or a positive number.
func checkPR(repo string, number int) error {
	switch {
	case repo == "":
		return errors.New("a repository is required")
	case number < 1:
		return fmt.Errorf("%s: pull request number %d: want 1 or more", repo, number)
	}
	return nil
}

// CheckKey refuses a check key with a part missing.
func CheckKey(k state.CheckKey) error {
	if err := checkPR(k.Repo, k.Number); err != nil {
		return fmt.Errorf("check key: %w", err)
	}
	switch {
	case k.HeadSHA == "":
		return fmt.Errorf("check key %s: a head sha is required", k)
	case k.Name == "":
		return fmt.Errorf("check key %s: a check name is required", k)
	}
	return nil
}

// DesiredJSON is the stored form of a desired check run, which
// SetCheckDesired compares: its JSON, empty fields omitted (so a field
// added later, empty in every stored row, changes no comparison).
func DesiredJSON(d state.CheckDesired) string {
	b, _ := json.Marshal(d) // a struct of strings always encodes (invalid UTF-8 is replaced)
	return string(b)
}

// ParseDesired is DesiredJSON's inverse.
func ParseDesired(s string) (state.CheckDesired, error) {
	var d state.CheckDesired
	if err := json.Unmarshal([]byte(s), &d); err != nil {
		return state.CheckDesired{}, fmt.Errorf("decoding a stored desired check run: %w", err)
	}
	return d, nil
}

// CompactJSON validates raw and returns it without insignificant space;
// empty stays empty.
func CompactJSON(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	return buf.Bytes(), nil
}

var verdicts = []string{state.VerdictPending, state.VerdictSuccess, state.VerdictChanges, state.VerdictFailure, state.VerdictError}

// PutPRCheck writes a PR check, a compare-and-swap on its revision, and
// holds the PR for the gated attempt active on its environment, if any
// (the merge gate's write-path guard, see state.CodeHostStore.PutPRCheck).
// It shares the environment's gate lock from before its read, so that a
// BeginDeploy either reads the check or is seen active by the guard.
func PutPRCheck(ctx context.Context, tx GateTx, p state.PutPRCheckParams) (state.PRCheck, error) {
	if err := checkPR(p.Repo, p.Number); err != nil {
		return state.PRCheck{}, err
	}
	switch {
	case p.Env == "":
		return state.PRCheck{}, errors.New("an environment is required")
	case p.HeadSHA == "":
		return state.PRCheck{}, errors.New("a head sha is required")
	case !slices.Contains(verdicts, p.Verdict):
		return state.PRCheck{}, fmt.Errorf("verdict %q: want one of %v", p.Verdict, verdicts)
	case p.ExpectedRevision < 0:
		return state.PRCheck{}, fmt.Errorf("expected revision %d is negative", p.ExpectedRevision)
	case p.PlannedGeneration < 0:
		return state.PRCheck{}, fmt.Errorf("planned generation %d is negative", p.PlannedGeneration)
	case p.Now.IsZero():
		return state.PRCheck{}, state.ErrNoNow
	}
	detail, err := CompactJSON(p.Detail)
	if err != nil {
		return state.PRCheck{}, fmt.Errorf("detail: %w", err)
	}
	c := state.PRCheck{
		Repo: p.Repo, Number: p.Number, Env: p.Env, HeadSHA: p.HeadSHA, BaseSHA: p.BaseSHA, MergeSHA: p.MergeSHA,
		PREnvironment: p.PREnvironment, PlanID: p.PlanID, PlannedGeneration: p.PlannedGeneration,
		Verdict: p.Verdict, Summary: p.Summary, Detail: detail, Closed: p.Closed, UpdatedAt: stamp(p.Now),
	}
	if err := tx.LockGate(ctx, p.Env, false); err != nil {
		return state.PRCheck{}, fmt.Errorf("taking the gate lock of %q: %w", p.Env, err)
	}
	stored, found, err := tx.PRCheck(ctx, p.Repo, p.Number, p.Env)
	if err != nil {
		return state.PRCheck{}, fmt.Errorf("reading the check: %w", err)
	}
	expected := p.ExpectedRevision
	if found && mutated(MutantPRCheckIgnoresRevision) {
		expected = stored.Revision
	}
	if expected == 0 {
		if found {
			return state.PRCheck{}, fmt.Errorf("%w: a check exists, at revision %d", state.ErrRevisionConflict, stored.Revision)
		}
		c.Revision = 1
		inserted, err := tx.InsertPRCheck(ctx, c)
		if err != nil {
			return state.PRCheck{}, fmt.Errorf("inserting the check: %w", err)
		}
		if !inserted {
			return state.PRCheck{}, fmt.Errorf("%w: another writer created the check meanwhile", state.ErrRevisionConflict)
		}
		if err := guardPRCheck(ctx, tx, c); err != nil {
			return state.PRCheck{}, err
		}
		return c, nil
	}
	if !found {
		return state.PRCheck{}, fmt.Errorf("%w: expected revision %d, but no check is stored", state.ErrRevisionConflict, expected)
	}
	if stored.Revision != expected {
		return state.PRCheck{}, fmt.Errorf("%w: expected revision %d, the stored one is %d", state.ErrRevisionConflict, expected, stored.Revision)
	}
	c.Revision = stored.Revision + 1
	if err := tx.UpdatePRCheck(ctx, c); err != nil {
		return state.PRCheck{}, fmt.Errorf("writing the check: %w", err)
	}
	if err := guardPRCheck(ctx, tx, c); err != nil {
		return state.PRCheck{}, err
	}
	return c, nil
}

// SetCheckDesired stores a desired check run, moving its revision only when
// it changed (see state.CodeHostStore.SetCheckDesired).
func SetCheckDesired(ctx context.Context, tx CodeHostTx, p state.SetCheckDesiredParams) (state.CheckRender, error) {
	if err := CheckKey(p.Key); err != nil {
		return state.CheckRender{}, err
	}
	switch {
	case p.Desired.Status == "":
		return state.CheckRender{}, fmt.Errorf("check %s: a desired status is required", p.Key)
	case p.Now.IsZero():
		return state.CheckRender{}, state.ErrNoNow
	}
	stored, found, err := tx.CheckRender(ctx, p.Key)
	if err != nil {
		return state.CheckRender{}, fmt.Errorf("reading the check render: %w", err)
	}
	if !found {
		r := state.CheckRender{Key: p.Key, Desired: p.Desired, DesiredRevision: 1, UpdatedAt: stamp(p.Now)}
		inserted, err := tx.InsertCheckRender(ctx, r)
		if err != nil {
			return state.CheckRender{}, fmt.Errorf("inserting the check render: %w", err)
		}
		if inserted {
			return r, nil
		}
		if stored, found, err = tx.CheckRender(ctx, p.Key); err != nil || !found {
			return state.CheckRender{}, errors.Join(errors.New("reading the check render another writer inserted"), err)
		}
	}
	if DesiredJSON(stored.Desired) == DesiredJSON(p.Desired) {
		return stored, nil
	}
	stored.Desired = p.Desired
	stored.DesiredRevision++
	stored.UpdatedAt = stamp(p.Now)
	if err := tx.UpdateCheckRender(ctx, stored); err != nil {
		return state.CheckRender{}, fmt.Errorf("writing the check render: %w", err)
	}
	return stored, nil
}

// renderRow reads the locked render of k, or fails wrapping
// state.ErrNotFound.
func renderRow(ctx context.Context, tx CodeHostTx, k state.CheckKey) (state.CheckRender, error) {
	r, found, err := tx.CheckRender(ctx, k)
	if err != nil {
		return state.CheckRender{}, fmt.Errorf("reading the check render: %w", err)
	}
	if !found {
		return state.CheckRender{}, fmt.Errorf("nothing is desired for check %s: %w", k, state.ErrNotFound)
	}
	return r, nil
}

// MarkCheckRendered moves the rendered revision forward, within the
// desired one (see state.CodeHostStore.MarkCheckRendered).
func MarkCheckRendered(ctx context.Context, tx CodeHostTx, p state.MarkCheckRenderedParams) (bool, error) {
	if err := CheckKey(p.Key); err != nil {
		return false, err
	}
	switch {
	case p.Revision < 1:
		return false, fmt.Errorf("check %s: rendered revision %d: want 1 or more", p.Key, p.Revision)
	case p.CheckRunID < 1:
		return false, fmt.Errorf("check %s: check run id %d: want 1 or more", p.Key, p.CheckRunID)
	case p.Now.IsZero():
		return false, state.ErrNoNow
	}
	r, err := renderRow(ctx, tx, p.Key)
	if err != nil {
		return false, err
	}
	floor := r.RenderedRevision
	if mutated(MutantRenderMovesBackward) {
		floor = 0
	}
	if p.Revision < floor || p.Revision > r.DesiredRevision {
		return false, nil
	}
	r.RenderedRevision, r.CheckRunID, r.LastError = p.Revision, p.CheckRunID, ""
	r.RenderedAt, r.UpdatedAt = stamp(p.Now), stamp(p.Now)
	if err := tx.UpdateCheckRender(ctx, r); err != nil {
		return false, fmt.Errorf("writing the check render: %w", err)
	}
	return true, nil
}

// MarkCheckRenderFailed records a render's error for a revision not yet
// rendered (see state.CodeHostStore.MarkCheckRenderFailed).
func MarkCheckRenderFailed(ctx context.Context, tx CodeHostTx, p state.MarkCheckRenderFailedParams) error {
	if err := CheckKey(p.Key); err != nil {
		return err
	}
	switch {
	case p.Revision < 1:
		return fmt.Errorf("check %s: failed revision %d: want 1 or more", p.Key, p.Revision)
	case p.Error == "":
		return fmt.Errorf("check %s: the render's error is required", p.Key)
	case p.Now.IsZero():
		return state.ErrNoNow
	}
	r, err := renderRow(ctx, tx, p.Key)
	if err != nil {
		return err
	}
	if p.Revision <= r.RenderedRevision || p.Revision > r.DesiredRevision {
		return nil
	}
	r.LastError, r.UpdatedAt = p.Error, stamp(p.Now)
	if err := tx.UpdateCheckRender(ctx, r); err != nil {
		return fmt.Errorf("writing the check render: %w", err)
	}
	return nil
}

// checkComment refuses a comment reference with a part missing.
func checkComment(repo string, number int, marker string) error {
	if err := checkPR(repo, number); err != nil {
		return err
	}
	if marker == "" {
		return fmt.Errorf("%s#%d: a comment marker is required", repo, number)
	}
	return nil
}

// PublicComment is c as a caller other than its holder sees it: no token.
func PublicComment(c state.CommentClaim) state.CommentClaim {
	c.Token, c.Held = "", false
	return c
}

// ClaimComment claims a comment, exclusively (see
// state.CodeHostStore.ClaimComment).
func ClaimComment(ctx context.Context, tx CodeHostTx, p state.ClaimCommentParams) (state.CommentClaim, error) {
	if err := checkComment(p.Repo, p.Number, p.Marker); err != nil {
		return state.CommentClaim{}, err
	}
	switch {
	case p.TTL < time.Microsecond:
		return state.CommentClaim{}, fmt.Errorf("claim TTL %s: want at least a microsecond", p.TTL)
	case p.Now.IsZero():
		return state.CommentClaim{}, state.ErrNoNow
	}
	token, err := NewLeaseToken()
	if err != nil {
		return state.CommentClaim{}, err
	}
	now := stamp(p.Now)
	mine := state.CommentClaim{
		Repo: p.Repo, Number: p.Number, Marker: p.Marker, Owner: p.Owner,
		ClaimedAt: now, ExpiresAt: now.Add(p.TTL.Truncate(time.Microsecond)), Token: token,
	}
	stored, found, err := tx.Comment(ctx, p.Repo, p.Number, p.Marker)
	if err != nil {
		return state.CommentClaim{}, fmt.Errorf("reading the comment: %w", err)
	}
	if !found {
		inserted, err := tx.InsertComment(ctx, mine)
		if err != nil {
			return state.CommentClaim{}, fmt.Errorf("inserting the claim: %w", err)
		}
		if inserted {
			return mine, nil
		}
		if stored, found, err = tx.Comment(ctx, p.Repo, p.Number, p.Marker); err != nil || !found {
			return state.CommentClaim{}, errors.Join(errors.New("reading the claim another writer inserted"), err)
		}
	}
	if stored.Posted {
		return PublicComment(stored), nil
	}
	// A claim is re-entrant for its owner: an owner that lost its token
	// (a retried job, named the same) takes its own claim back at once.
	reentry := p.Owner != "" && stored.Owner == p.Owner
	if !reentry && !expired(stored.ExpiresAt, now) && !mutated(MutantCommentClaimIgnoresHolder) {
		held := PublicComment(stored)
		held.Held = true
		return held, nil
	}
	stored.Owner, stored.ClaimedAt, stored.ExpiresAt, stored.Token = mine.Owner, mine.ClaimedAt, mine.ExpiresAt, mine.Token
	if err := tx.UpdateComment(ctx, stored); err != nil {
		return state.CommentClaim{}, fmt.Errorf("writing the claim: %w", err)
	}
	return stored, nil
}

// MarkCommentPosted records the comment its claim's holder posted (see
// state.CodeHostStore.MarkCommentPosted).
func MarkCommentPosted(ctx context.Context, tx CodeHostTx, p state.MarkCommentPostedParams) error {
	if err := checkComment(p.Repo, p.Number, p.Marker); err != nil {
		return err
	}
	switch {
	case p.Token == "":
		return errors.New("the claim's token is required")
	case p.CommentID < 1:
		return fmt.Errorf("comment id %d: want 1 or more", p.CommentID)
	case p.Now.IsZero():
		return state.ErrNoNow
	}
	stored, found, err := tx.Comment(ctx, p.Repo, p.Number, p.Marker)
	if err != nil {
		return fmt.Errorf("reading the comment: %w", err)
	}
	if !found {
		return fmt.Errorf("the comment was never claimed: %w", state.ErrNotFound)
	}
	if stored.Posted {
		if stored.CommentID == p.CommentID {
			return nil
		}
		return fmt.Errorf("%w: the comment is already recorded posted, as comment %d", state.ErrLeaseLost, stored.CommentID)
	}
	if stored.Token != p.Token {
		return fmt.Errorf("%w: the claim was taken over (by %q, until %s)", state.ErrLeaseLost,
			stored.Owner, stored.ExpiresAt.Format(time.RFC3339Nano))
	}
	stored.Posted, stored.CommentID, stored.PostedAt = true, p.CommentID, stamp(p.Now)
	if err := tx.UpdateComment(ctx, stored); err != nil {
		return fmt.Errorf("writing the comment: %w", err)
	}
	return nil
}

var triggers = []string{state.TriggerDeployCommand, state.TriggerMerge, state.TriggerCLI}

// deployRow reads the locked attempt id, or fails wrapping
// state.ErrNotFound.
func deployRow(ctx context.Context, tx CodeHostTx, id string) (state.DeployAttempt, error) {
	if id == "" {
		return state.DeployAttempt{}, errors.New("a deploy attempt id is required")
	}
	a, found, err := tx.Deploy(ctx, id)
	if err != nil {
		return state.DeployAttempt{}, fmt.Errorf("reading the attempt: %w", err)
	}
	if !found {
		return state.DeployAttempt{}, fmt.Errorf("no such deploy attempt: %w", state.ErrNotFound)
	}
	return a, nil
}

// sameRequest reports whether stored was requested as p asks.
func sameRequest(stored state.DeployAttempt, p state.RequestDeployParams) bool {
	return stored.Env == p.Env && stored.Repo == p.Repo && stored.Number == p.Number && stored.HeadSHA == p.HeadSHA &&
		stored.Origin == p.Origin && stored.Trigger == p.Trigger && stored.RequestedBy == p.RequestedBy
}

// RequestDeploy records a pending attempt, idempotently by id (see
// state.CodeHostStore.RequestDeploy).
func RequestDeploy(ctx context.Context, tx CodeHostTx, p state.RequestDeployParams) (state.DeployAttempt, error) {
	switch {
	case p.ID == "":
		return state.DeployAttempt{}, errors.New("a deploy attempt id is required")
	case p.Env == "":
		return state.DeployAttempt{}, errors.New("an environment is required")
	case !slices.Contains(triggers, p.Trigger):
		return state.DeployAttempt{}, fmt.Errorf("trigger %q: want one of %v", p.Trigger, triggers)
	case p.Number < 0:
		return state.DeployAttempt{}, fmt.Errorf("pull request number %d is negative", p.Number)
	case p.Now.IsZero():
		return state.DeployAttempt{}, state.ErrNoNow
	}
	if p.Trigger == state.TriggerDeployCommand {
		if err := checkPR(p.Repo, p.Number); err != nil {
			return state.DeployAttempt{}, fmt.Errorf("a %s deploy: %w", p.Trigger, err)
		}
		if p.HeadSHA == "" {
			return state.DeployAttempt{}, fmt.Errorf("a %s deploy: the head sha it pins is required", p.Trigger)
		}
	}
	now := stamp(p.Now)
	a := state.DeployAttempt{
		ID: p.ID, Env: p.Env, Repo: p.Repo, Number: p.Number, HeadSHA: p.HeadSHA, Origin: p.Origin,
		Trigger: p.Trigger, RequestedBy: p.RequestedBy, State: state.DeployPending, CreatedAt: now, UpdatedAt: now,
	}
	inserted, err := tx.InsertDeploy(ctx, a)
	if err != nil {
		return state.DeployAttempt{}, fmt.Errorf("inserting the attempt: %w", err)
	}
	if inserted {
		return a, nil
	}
	stored, err := deployRow(ctx, tx, p.ID)
	if err != nil {
		return state.DeployAttempt{}, err
	}
	if !sameRequest(stored, p) {
		return state.DeployAttempt{}, fmt.Errorf("the id is already requested for another deploy (%s of %s#%d@%s by %s on %q)",
			stored.Trigger, stored.Repo, stored.Number, stored.HeadSHA, stored.RequestedBy, stored.Env)
	}
	return stored, nil
}

// checkLease refuses a lease TTL under a microsecond and a missing Now.
func checkLease(ttl time.Duration, now time.Time) error {
	switch {
	case ttl < time.Microsecond:
		return fmt.Errorf("lease TTL %s: want at least a microsecond", ttl)
	case now.IsZero():
		return state.ErrNoNow
	}
	return nil
}

// StartDeploy moves a pending attempt to running, alone on its environment
// (see state.CodeHostStore.StartDeploy).
func StartDeploy(ctx context.Context, tx CodeHostTx, p state.StartDeployParams) (state.DeployAttempt, error) {
	if err := checkLease(p.TTL, p.Now); err != nil {
		return state.DeployAttempt{}, err
	}
	a, err := deployRow(ctx, tx, p.ID)
	if err != nil {
		return state.DeployAttempt{}, err
	}
	if a.State != state.DeployPending {
		return state.DeployAttempt{}, fmt.Errorf("%w: it is %s, not %s", state.ErrDeployState, a.State, state.DeployPending)
	}
	now := stamp(p.Now)
	if !mutated(MutantDeployStartIgnoresActive) {
		active, err := tx.ActiveDeploys(ctx, a.Env, a.ID)
		if err != nil {
			return state.DeployAttempt{}, fmt.Errorf("reading the active attempts of %q: %w", a.Env, err)
		}
		for _, other := range active {
			if !expired(other.LeaseExpiresAt, now) {
				return state.DeployAttempt{}, fmt.Errorf("%w: attempt %s is %s on %q (owner %q) until %s", state.ErrDeployActive,
					other.ID, other.State, other.Env, other.Owner, other.LeaseExpiresAt.Format(time.RFC3339Nano))
			}
		}
		for _, other := range active {
			other.State, other.Error, other.FinishedAt, other.UpdatedAt = state.DeployAbandoned, state.AbandonedLeaseExpired, now, now
			if err := tx.UpdateDeploy(ctx, other); err != nil {
				return state.DeployAttempt{}, fmt.Errorf("abandoning attempt %s, whose lease expired: %w", other.ID, err)
			}
		}
	}
	token, err := NewLeaseToken()
	if err != nil {
		return state.DeployAttempt{}, err
	}
	a.State, a.Owner, a.LeaseToken, a.LeaseExpiresAt = state.DeployRunning, p.Owner, token, now.Add(p.TTL.Truncate(time.Microsecond))
	a.StartedAt, a.UpdatedAt = now, now
	if err := tx.UpdateDeploy(ctx, a); err != nil {
		return state.DeployAttempt{}, fmt.Errorf("starting the attempt: %w", err)
	}
	return a, nil
}

// RenewDeploy extends a held, rendered or running attempt's unexpired
// lease (see state.CodeHostStore.RenewDeploy).
func RenewDeploy(ctx context.Context, tx CodeHostTx, p state.RenewDeployParams) (state.DeployAttempt, error) {
	if err := checkLease(p.TTL, p.Now); err != nil {
		return state.DeployAttempt{}, err
	}
	if p.Token == "" {
		return state.DeployAttempt{}, errors.New("the attempt's lease token is required")
	}
	a, err := deployRow(ctx, tx, p.ID)
	if err != nil {
		return state.DeployAttempt{}, err
	}
	now := stamp(p.Now)
	switch {
	case !slices.Contains(ActiveDeployStates, a.State):
		return state.DeployAttempt{}, fmt.Errorf("%w: the attempt is %s", state.ErrLeaseLost, a.State)
	case a.LeaseToken != p.Token:
		return state.DeployAttempt{}, fmt.Errorf("%w: the token is not the attempt's", state.ErrLeaseLost)
	case expired(a.LeaseExpiresAt, now):
		return state.DeployAttempt{}, fmt.Errorf("%w: the lease expired at %s", state.ErrLeaseLost, a.LeaseExpiresAt.Format(time.RFC3339Nano))
	}
	a.LeaseExpiresAt, a.UpdatedAt = now.Add(p.TTL.Truncate(time.Microsecond)), now
	if err := tx.UpdateDeploy(ctx, a); err != nil {
		return state.DeployAttempt{}, fmt.Errorf("renewing the attempt's lease: %w", err)
	}
	return a, nil
}

// FinishDeploy ends a held, rendered or running attempt, pinned to its
// token (see state.CodeHostStore.FinishDeploy). A failed or cancelled
// finish that names no plan or result generation keeps the ones stored
// (BeginDeploy's plan, or a fenced promotion's stamp, which a failure
// after the promotion must not erase).
func FinishDeploy(ctx context.Context, tx CodeHostTx, p state.FinishDeployParams) (state.DeployAttempt, error) {
	switch p.State {
	case state.DeployPromoted:
		if p.PlanID == "" || p.ResultGeneration < 1 {
			return state.DeployAttempt{}, fmt.Errorf("a promoted attempt needs its plan id and a result generation of 1 or more (got %q, %d)",
				p.PlanID, p.ResultGeneration)
		}
	case state.DeployFailed:
		if p.Error == "" {
			return state.DeployAttempt{}, errors.New("a failed attempt needs its error")
		}
	case state.DeployCancelled:
	default:
		return state.DeployAttempt{}, fmt.Errorf("final state %q: want %s, %s or %s", p.State,
			state.DeployPromoted, state.DeployFailed, state.DeployCancelled)
	}
	switch {
	case p.Token == "":
		return state.DeployAttempt{}, errors.New("the attempt's lease token is required")
	case p.ResultGeneration < 0:
		return state.DeployAttempt{}, fmt.Errorf("result generation %d is negative", p.ResultGeneration)
	case p.Now.IsZero():
		return state.DeployAttempt{}, state.ErrNoNow
	}
	a, err := deployRow(ctx, tx, p.ID)
	if err != nil {
		return state.DeployAttempt{}, err
	}
	plan, gen := p.PlanID, p.ResultGeneration
	if p.State != state.DeployPromoted {
		plan, gen = cmp.Or(plan, a.PlanID), cmp.Or(gen, a.ResultGeneration)
	}
	if a.LeaseToken == p.Token && a.State == p.State && a.PlanID == plan &&
		a.ResultGeneration == gen && a.Error == p.Error {
		return a, nil // a replay of the finish that committed
	}
	switch {
	case !slices.Contains(ActiveDeployStates, a.State):
		return state.DeployAttempt{}, fmt.Errorf("%w: the attempt is %s, not held, rendered or running", state.ErrLeaseLost, a.State)
	case a.LeaseToken != p.Token && !mutated(MutantDeployFinishIgnoresToken):
		return state.DeployAttempt{}, fmt.Errorf("%w: the token is not the attempt's", state.ErrLeaseLost)
	}
	now := stamp(p.Now)
	a.State, a.PlanID, a.ResultGeneration, a.Error = p.State, plan, gen, p.Error
	a.FinishedAt, a.UpdatedAt = now, now
	if err := tx.UpdateDeploy(ctx, a); err != nil {
		return state.DeployAttempt{}, fmt.Errorf("finishing the attempt: %w", err)
	}
	return a, nil
}

// RecordDeployMerge records, once, the merge after a promoted attempt (see
// state.CodeHostStore.RecordDeployMerge).
func RecordDeployMerge(ctx context.Context, tx CodeHostTx, p state.RecordDeployMergeParams) (state.DeployAttempt, error) {
	switch {
	case (p.MergeSHA == "") == (p.MergeError == ""):
		return state.DeployAttempt{}, errors.New("exactly one of a merge sha and a merge error is required")
	case p.Now.IsZero():
		return state.DeployAttempt{}, state.ErrNoNow
	}
	a, err := deployRow(ctx, tx, p.ID)
	if err != nil {
		return state.DeployAttempt{}, err
	}
	if !a.MergeRecordedAt.IsZero() {
		if a.MergeSHA == p.MergeSHA && a.MergeError == p.MergeError {
			return a, nil
		}
		return state.DeployAttempt{}, fmt.Errorf("%w: its merge is already recorded (sha %q, error %q)", state.ErrDeployState, a.MergeSHA, a.MergeError)
	}
	if a.State != state.DeployPromoted {
		return state.DeployAttempt{}, fmt.Errorf("%w: it is %s, not %s", state.ErrDeployState, a.State, state.DeployPromoted)
	}
	now := stamp(p.Now)
	a.MergeSHA, a.MergeError, a.MergeRecordedAt, a.UpdatedAt = p.MergeSHA, p.MergeError, now, now
	if err := tx.UpdateDeploy(ctx, a); err != nil {
		return state.DeployAttempt{}, fmt.Errorf("recording the merge: %w", err)
	}
	return a, nil
}

// CancelDeploy cancels a pending attempt (see
// state.CodeHostStore.CancelDeploy).
func CancelDeploy(ctx context.Context, tx CodeHostTx, p state.CancelDeployParams) (state.DeployAttempt, error) {
	if p.Now.IsZero() {
		return state.DeployAttempt{}, state.ErrNoNow
	}
	a, err := deployRow(ctx, tx, p.ID)
	if err != nil {
		return state.DeployAttempt{}, err
	}
	switch a.State {
	case state.DeployCancelled:
		return a, nil
	case state.DeployPending:
	default:
		return state.DeployAttempt{}, fmt.Errorf("%w: it is %s, not %s", state.ErrDeployState, a.State, state.DeployPending)
	}
	now := stamp(p.Now)
	a.State, a.Error, a.FinishedAt, a.UpdatedAt = state.DeployCancelled, p.Reason, now, now
	if err := tx.UpdateDeploy(ctx, a); err != nil {
		return state.DeployAttempt{}, fmt.Errorf("cancelling the attempt: %w", err)
	}
	return a, nil
}

// CheckListDeploys refuses a list of deploys naming an unknown state, and
// returns its limit.
func CheckListDeploys(p state.ListDeploysParams) (int, error) {
	for _, s := range p.States {
		if !slices.Contains(deployStates, s) {
			return 0, fmt.Errorf("deploy state %q: want one of %v", s, deployStates)
		}
	}
	return ListLimit(p.Limit)
}

// deployStates are the states an attempt can be in, the merge gate's
// included.
var deployStates = []string{
	state.DeployPending, state.DeployHeld, state.DeployRendered, state.DeployRunning,
	state.DeployPromoted, state.DeployFailed, state.DeployCancelled, state.DeployAbandoned,
}
