// Package codehost is the boundary between gapless and the code host that
// holds a project's pull requests (GitHub). It holds the Host interface,
// the normalized types it speaks in, and the webhook signature check.
//
// Every Host implementation passes codehost/codehosttest. Every method is
// idempotent or reports enough for its caller to be: an error wraps one of
// the sentinel errors below, so a caller can branch on what happened
// (retry on ErrUnavailable; treat ErrNotFound, ErrConflict, ErrNotMergeable,
// ErrInvalid and ErrUnauthorized as determinate answers).
package codehost

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"time"
)

// Errors every Host wraps, so callers branch with errors.Is.
var (
	// ErrNotFound: the repository, pull request, commit, check run or
	// comment does not exist (GitHub 404).
	ErrNotFound = errors.New("codehost: not found")
	// ErrConflict: the request raced the host's state, e.g. a SHA-pinned
	// merge whose head moved (GitHub 409).
	ErrConflict = errors.New("codehost: conflict")
	// ErrNotMergeable: the pull request cannot be merged now (GitHub 405:
	// a conflict, failing required checks, a draft).
	ErrNotMergeable = errors.New("codehost: not mergeable")
	// ErrInvalid: the host refused the request as invalid (GitHub 422,
	// e.g. a body over MaxBodyLength).
	ErrInvalid = errors.New("codehost: refused as invalid")
	// ErrUnauthorized: credentials missing, wrong or expired, or no
	// permission (GitHub 401 and 403 that is not a rate limit).
	ErrUnauthorized = errors.New("codehost: unauthorized")
	// ErrUnavailable: the host did not answer usefully after the
	// implementation's own retries (5xx, timeouts, rate limits). Retrying
	// later may succeed.
	ErrUnavailable = errors.New("codehost: unavailable")
)

// MaxBodyLength is the longest comment body, check-run summary or text
// GitHub accepts, in characters; longer ones are refused with 422.
const MaxBodyLength = 65535

// PR is a pull request as gapless needs it.
type PR struct {
	Repo   string // owner/name
	Number int
	Title  string
	URL    string // the page a person opens
	Author string // login
	// State is "open" or "closed"; Merged says whether a closed PR was merged.
	State  string
	Merged bool
	Draft  bool
	// HeadSHA is the commit checks run on; HeadRef its branch, in
	// HeadRepo (owner/name): another repository than Repo for a pull
	// request from a fork; empty when the host did not say.
	HeadSHA  string
	HeadRef  string
	HeadRepo string
	// BaseRef is the branch the PR merges into; BaseSHA its commit when the
	// PR was last computed.
	BaseRef string
	BaseSHA string
	// MergeCommitSHA is GitHub's test merge of head into base, recomputed
	// asynchronously; empty while it is computed (then Mergeable is nil).
	MergeCommitSHA string
	// Mergeable is nil while GitHub computes it.
	Mergeable *bool
	// MergeableState is GitHub's mergeable_state: clean, dirty, blocked,
	// behind, unstable, has_hooks, draft or unknown.
	MergeableState string
	UpdatedAt      time.Time
}

// Open reports whether the pull request is open.
func (p *PR) Open() bool { return p.State == "open" }

// FromFork reports whether the pull request's head lives in another
// repository than its base (known only when the host says where).
func (p *PR) FromFork() bool {
	return p.HeadRepo != "" && !strings.EqualFold(p.HeadRepo, p.Repo)
}

// CheckStatus is a check run's status.
type CheckStatus string

// The check-run statuses.
const (
	StatusQueued     CheckStatus = "queued"
	StatusInProgress CheckStatus = "in_progress"
	StatusCompleted  CheckStatus = "completed"
)

// Conclusion is a completed check run's conclusion.
type Conclusion string

// The check-run conclusions. GitHub's branch protection counts success,
// neutral and skipped as passing: a check that must block a merge is
// failure or action_required, never neutral.
const (
	ConclusionNone           Conclusion = ""
	ConclusionSuccess        Conclusion = "success"
	ConclusionFailure        Conclusion = "failure"
	ConclusionNeutral        Conclusion = "neutral"
	ConclusionCancelled      Conclusion = "cancelled"
	ConclusionSkipped        Conclusion = "skipped"
	ConclusionTimedOut       Conclusion = "timed_out"
	ConclusionActionRequired Conclusion = "action_required"
	ConclusionStale          Conclusion = "stale"
)

// Passing reports whether GitHub's branch protection lets a required check
// with this conclusion pass: success, neutral and skipped do.
func (c Conclusion) Passing() bool {
	return c == ConclusionSuccess || c == ConclusionNeutral || c == ConclusionSkipped
}

// CheckRun is one check run on one commit. A host keeps at most one run per
// (HeadSHA, Name) for gapless: UpsertCheckRun updates it in place.
type CheckRun struct {
	ID         int64 // set by the host
	HeadSHA    string
	Name       string
	ExternalID string // gapless's own key (e.g. a render revision)
	DetailsURL string
	Status     CheckStatus
	Conclusion Conclusion // set when Status is completed
	Title      string
	Summary    string // markdown, at most MaxBodyLength characters
	Text       string // markdown, at most MaxBodyLength characters
	// StartedAt and CompletedAt are as the host stored them.
	StartedAt   time.Time
	CompletedAt time.Time
	// AppSlug is the App that created the run (read back only).
	AppSlug string
}

// Comment is one comment on a pull request's conversation.
type Comment struct {
	ID        int64
	Body      string
	Author    string // login
	URL       string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Permission is a user's permission on a repository, as GitHub names it.
type Permission string

// The permissions, weakest first.
const (
	PermissionNone     Permission = "none"
	PermissionRead     Permission = "read"
	PermissionTriage   Permission = "triage"
	PermissionWrite    Permission = "write"
	PermissionMaintain Permission = "maintain"
	PermissionAdmin    Permission = "admin"
)

// CanWrite reports whether the permission lets its holder push (write,
// maintain or admin): what /deploy requires.
func (p Permission) CanWrite() bool {
	return p == PermissionWrite || p == PermissionMaintain || p == PermissionAdmin
}

// MergeMethod is how a pull request is merged.
type MergeMethod string

// The merge methods.
const (
	MergeMerge  MergeMethod = "merge"
	MergeSquash MergeMethod = "squash"
	MergeRebase MergeMethod = "rebase"
)

// Host is the code host as gapless needs it.
type Host interface {
	// PullRequest returns one pull request, read fresh (no cache).
	PullRequest(ctx context.Context, repo string, number int) (*PR, error)
	// OpenPullRequests returns every open pull request whose base is
	// base (every base when base is empty), across all pages, by number.
	OpenPullRequests(ctx context.Context, repo, base string) ([]*PR, error)
	// Files returns the files of a commit (a tarball of the tree), rooted
	// at the repository's root.
	Files(ctx context.Context, repo, sha string) (fs.FS, error)

	// UpsertCheckRun creates the check run (c.HeadSHA, c.Name) or, when the
	// caller's App already has one on that head, updates it in place, and
	// returns it as the host stored it. A run is never created twice for one
	// (head, name) by sequential calls.
	UpsertCheckRun(ctx context.Context, repo string, c CheckRun) (CheckRun, error)
	// CheckRuns returns every check run on a commit, across all pages: the
	// read-back that confirms a render.
	CheckRuns(ctx context.Context, repo, sha string) ([]CheckRun, error)
	// RequiredChecks returns the check names branch protection requires on
	// a branch (none when the branch is unprotected).
	RequiredChecks(ctx context.Context, repo, branch string) ([]string, error)

	// Comments returns every comment on a pull request's conversation,
	// oldest first, across all pages.
	Comments(ctx context.Context, repo string, number int) ([]Comment, error)
	// FindComment returns the oldest comment whose body contains marker,
	// searched across every page; nil and no error when none does.
	FindComment(ctx context.Context, repo string, number int, marker string) (*Comment, error)
	// CreateComment posts a comment and returns it.
	CreateComment(ctx context.Context, repo string, number int, body string) (Comment, error)
	// EditComment replaces a comment's body and returns it.
	EditComment(ctx context.Context, repo string, id int64, body string) (Comment, error)
	// React adds a reaction (e.g. "eyes", "+1", "rocket") to a comment.
	React(ctx context.Context, repo string, commentID int64, content string) error

	// Permission returns a user's permission on a repository.
	Permission(ctx context.Context, repo, user string) (Permission, error)
	// Merge merges a pull request only if its head is still headSHA
	// (ErrConflict otherwise; ErrNotMergeable when GitHub refuses it) and
	// returns the merge commit's SHA.
	Merge(ctx context.Context, repo string, number int, headSHA string, method MergeMethod) (string, error)
}

// EnsureComment keeps exactly one comment carrying marker on a pull
// request: it edits the comment found by FindComment (across every page)
// when its body differs, and creates one only when none carries the
// marker. body must contain marker. It returns the comment and whether it
// was created.
func EnsureComment(ctx context.Context, h Host, repo string, number int, marker, body string) (Comment, bool, error) {
	if marker == "" || !strings.Contains(body, marker) {
		return Comment{}, false, errors.New("codehost: a sticky comment's body must contain its marker")
	}
	found, err := h.FindComment(ctx, repo, number, marker)
	if err != nil {
		return Comment{}, false, err
	}
	if found == nil {
		c, err := h.CreateComment(ctx, repo, number, body)
		return c, err == nil, err
	}
	if found.Body == body {
		return *found, false, nil
	}
	c, err := h.EditComment(ctx, repo, found.ID, body)
	return c, false, err
}
