package github

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	gh "github.com/google/go-github/v88/github"

	"github.com/gapless-dev/gapless/codehost"
)

// PullRequest returns one pull request, read fresh. While GitHub computes
// the PR's mergeability (mergeable null) MergeCommitSHA is empty: a test
// merge is trusted only once GitHub says it is current.
func (c *Client) PullRequest(ctx context.Context, repo string, number int) (*codehost.PR, error) {
	if number <= 0 {
		return nil, refuse(RoutePull, repo, "the pull request number %d is not positive", number)
	}
	g, err := c.forRepo(ctx, RoutePull, repo)
	if err != nil {
		return nil, err
	}
	owner, name, _ := splitRepo(RoutePull, repo)
	var pr *gh.PullRequest
	err = c.do(ctx, RoutePull, repo, func(ctx context.Context) (*gh.Response, error) {
		var resp *gh.Response
		var err error
		pr, resp, err = g.PullRequests.Get(ctx, owner, name, number)
		return resp, err
	})
	if err != nil {
		return nil, err
	}
	return toPR(repo, pr), nil
}

// OpenPullRequests returns every open pull request on base (every base
// when base is empty), across all pages, ordered by number. A listed PR
// carries no mergeability (GitHub computes it only for a single PR): read
// one with PullRequest for that.
func (c *Client) OpenPullRequests(ctx context.Context, repo, base string) ([]*codehost.PR, error) {
	g, err := c.forRepo(ctx, RoutePulls, repo)
	if err != nil {
		return nil, err
	}
	owner, name, _ := splitRepo(RoutePulls, repo)
	prs, err := pages(ctx, c, RoutePulls, repo, func(ctx context.Context, opt gh.ListOptions) ([]*gh.PullRequest, *gh.Response, error) {
		return g.PullRequests.List(ctx, owner, name, &gh.PullRequestListOptions{
			State: "open", Base: base, Sort: "created", Direction: "asc", ListOptions: opt})
	})
	if err != nil {
		return nil, err
	}
	byNumber := map[int]*codehost.PR{}
	for _, p := range prs {
		pr := toPR(repo, p)
		if !pr.Open() || (base != "" && pr.BaseRef != base) {
			continue
		}
		byNumber[pr.Number] = pr
	}
	out := make([]*codehost.PR, 0, len(byNumber))
	for _, pr := range byNumber {
		out = append(out, pr)
	}
	slices.SortFunc(out, func(a, b *codehost.PR) int { return a.Number - b.Number })
	return out, nil
}

func toPR(repo string, p *gh.PullRequest) *codehost.PR {
	pr := &codehost.PR{
		Repo:           repo,
		Number:         p.GetNumber(),
		Title:          p.GetTitle(),
		URL:            p.GetHTMLURL(),
		Author:         p.GetUser().GetLogin(),
		State:          p.GetState(),
		Merged:         p.GetMerged() || p.MergedAt != nil,
		Draft:          p.GetDraft(),
		HeadSHA:        p.GetHead().GetSHA(),
		HeadRef:        p.GetHead().GetRef(),
		HeadRepo:       p.GetHead().GetRepo().GetFullName(),
		BaseRef:        p.GetBase().GetRef(),
		BaseSHA:        p.GetBase().GetSHA(),
		MergeCommitSHA: p.GetMergeCommitSHA(),
		MergeableState: p.GetMergeableState(),
		UpdatedAt:      p.GetUpdatedAt().Time,
	}
	if p.Mergeable != nil {
		m := *p.Mergeable
		pr.Mergeable = &m
	}
	if pr.Open() && pr.Mergeable == nil {
		pr.MergeCommitSHA = ""
	}
	return pr
}

// checkLength refuses a body over codehost.MaxBodyLength characters before
// any call: the caller truncates, never this client.
func checkLength(route, repo, what, s string) error {
	if n := utf8.RuneCountInString(s); n > codehost.MaxBodyLength {
		return refuse(route, repo, "the %s is %d characters, over GitHub's %d", what, n, codehost.MaxBodyLength)
	}
	return nil
}

// UpsertCheckRun creates the check run (c.HeadSHA, c.Name), or updates in
// place the one this client's identity already has on that head: as an
// App, the newest run with that name its App created; with a plain token,
// the newest with that name, preferring the github-actions App's. It
// returns the run as GitHub's answer reports it. A summary or text over
// codehost.MaxBodyLength characters is refused with ErrInvalid before any
// call. A title is required by GitHub with a summary: an empty Title with
// a Summary or Text is sent as the run's Name. StartedAt is set only when
// the run is created (GitHub's update takes none).
func (c *Client) UpsertCheckRun(ctx context.Context, repo string, run codehost.CheckRun) (codehost.CheckRun, error) {
	route := RouteCreateCheckRun
	switch {
	case run.HeadSHA == "":
		return codehost.CheckRun{}, refuse(route, repo, "a check run needs its head SHA")
	case run.Name == "":
		return codehost.CheckRun{}, refuse(route, repo, "a check run needs its name")
	case run.Status != "" && run.Status != codehost.StatusQueued && run.Status != codehost.StatusInProgress && run.Status != codehost.StatusCompleted:
		return codehost.CheckRun{}, refuse(route, repo, "the check status %q is none of queued, in_progress, completed", run.Status)
	}
	if err := checkLength(route, repo, "check run summary", run.Summary); err != nil {
		return codehost.CheckRun{}, err
	}
	if err := checkLength(route, repo, "check run text", run.Text); err != nil {
		return codehost.CheckRun{}, err
	}
	g, err := c.forRepo(ctx, route, repo)
	if err != nil {
		return codehost.CheckRun{}, err
	}
	owner, name, _ := splitRepo(route, repo)

	existing, err := c.listCheckRuns(ctx, g, repo, run.HeadSHA, run.Name)
	if err != nil {
		return codehost.CheckRun{}, err
	}
	ours, err := c.pickOwnRun(ctx, existing, run.Name)
	if err != nil {
		return codehost.CheckRun{}, err
	}

	var output *gh.CheckRunOutput
	if run.Title != "" || run.Summary != "" || run.Text != "" {
		title := run.Title
		if title == "" {
			title = run.Name
		}
		output = &gh.CheckRunOutput{Title: gh.Ptr(title), Summary: gh.Ptr(run.Summary)}
		if run.Text != "" {
			output.Text = gh.Ptr(run.Text)
		}
	}
	var status, conclusion, details, external *string
	if run.Status != "" {
		status = gh.Ptr(string(run.Status))
	}
	if run.Conclusion != codehost.ConclusionNone {
		conclusion = gh.Ptr(string(run.Conclusion))
	}
	if run.DetailsURL != "" {
		details = gh.Ptr(run.DetailsURL)
	}
	if run.ExternalID != "" {
		external = gh.Ptr(run.ExternalID)
	}
	var completedAt *gh.Timestamp
	if !run.CompletedAt.IsZero() {
		completedAt = &gh.Timestamp{Time: run.CompletedAt}
	}

	var stored *gh.CheckRun
	if ours != nil {
		route = RouteUpdateCheckRun
		err = c.do(ctx, route, repo, func(ctx context.Context) (*gh.Response, error) {
			var resp *gh.Response
			var err error
			stored, resp, err = g.Checks.UpdateCheckRun(ctx, owner, name, ours.GetID(), gh.UpdateCheckRunOptions{
				Name: run.Name, DetailsURL: details, ExternalID: external, Status: status,
				Conclusion: conclusion, CompletedAt: completedAt, Output: output,
			})
			return resp, err
		})
	} else {
		var startedAt *gh.Timestamp
		if !run.StartedAt.IsZero() {
			startedAt = &gh.Timestamp{Time: run.StartedAt}
		}
		err = c.do(ctx, route, repo, func(ctx context.Context) (*gh.Response, error) {
			var resp *gh.Response
			var err error
			stored, resp, err = g.Checks.CreateCheckRun(ctx, owner, name, gh.CreateCheckRunOptions{
				Name: run.Name, HeadSHA: run.HeadSHA, DetailsURL: details, ExternalID: external,
				Status: status, Conclusion: conclusion, StartedAt: startedAt, CompletedAt: completedAt,
				Output: output,
			})
			return resp, err
		})
	}
	if err != nil {
		return codehost.CheckRun{}, err
	}
	return toCheckRun(stored), nil
}

// listCheckRuns lists every run on a commit (with name, only those named
// so), all pages, filter=all.
func (c *Client) listCheckRuns(ctx context.Context, g *gh.Client, repo, sha, checkName string) ([]*gh.CheckRun, error) {
	owner, name, _ := splitRepo(RouteCheckRunsForRef, repo)
	return pages(ctx, c, RouteCheckRunsForRef, repo, func(ctx context.Context, opt gh.ListOptions) ([]*gh.CheckRun, *gh.Response, error) {
		o := &gh.ListCheckRunsOptions{Filter: gh.Ptr("all"), ListOptions: opt}
		if checkName != "" {
			o.CheckName = gh.Ptr(checkName)
		}
		res, resp, err := g.Checks.ListCheckRunsForRef(ctx, owner, name, sha, o)
		if res == nil {
			return nil, resp, err
		}
		return res.CheckRuns, resp, err
	})
}

// pickOwnRun returns the run this client's identity would update among the
// runs named name, or nil: the App's own newest run (its slug), or in
// token mode the newest, the github-actions App's first.
func (c *Client) pickOwnRun(ctx context.Context, runs []*gh.CheckRun, name string) (*gh.CheckRun, error) {
	var candidates []*gh.CheckRun
	for _, r := range runs {
		if r.GetName() == name {
			candidates = append(candidates, r)
		}
	}
	newest := func(rs []*gh.CheckRun) *gh.CheckRun {
		var best *gh.CheckRun
		for _, r := range rs {
			if best == nil || r.GetID() > best.GetID() {
				best = r
			}
		}
		return best
	}
	if c.appGH != nil {
		slug, err := c.AppSlug(ctx)
		if err != nil {
			return nil, err
		}
		var mine []*gh.CheckRun
		for _, r := range candidates {
			if r.GetApp().GetSlug() == slug || (r.GetApp().GetID() != 0 && r.GetApp().GetID() == c.cfg.AppID) {
				mine = append(mine, r)
			}
		}
		return newest(mine), nil
	}
	var actions []*gh.CheckRun
	for _, r := range candidates {
		if r.GetApp().GetSlug() == "github-actions" {
			actions = append(actions, r)
		}
	}
	if len(actions) > 0 {
		return newest(actions), nil
	}
	return newest(candidates), nil
}

// CheckRuns returns every check run on a commit (every App's), across all
// pages, ordered by id.
func (c *Client) CheckRuns(ctx context.Context, repo, sha string) ([]codehost.CheckRun, error) {
	if sha == "" {
		return nil, refuse(RouteCheckRunsForRef, repo, "a commit SHA is required")
	}
	g, err := c.forRepo(ctx, RouteCheckRunsForRef, repo)
	if err != nil {
		return nil, err
	}
	runs, err := c.listCheckRuns(ctx, g, repo, sha, "")
	if err != nil {
		return nil, err
	}
	out := make([]codehost.CheckRun, 0, len(runs))
	seen := map[int64]bool{}
	for _, r := range runs {
		if seen[r.GetID()] {
			continue
		}
		seen[r.GetID()] = true
		out = append(out, toCheckRun(r))
	}
	slices.SortFunc(out, func(a, b codehost.CheckRun) int { return cmpInt64(a.ID, b.ID) })
	return out, nil
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func toCheckRun(r *gh.CheckRun) codehost.CheckRun {
	return codehost.CheckRun{
		ID:          r.GetID(),
		HeadSHA:     r.GetHeadSHA(),
		Name:        r.GetName(),
		ExternalID:  r.GetExternalID(),
		DetailsURL:  r.GetDetailsURL(),
		Status:      codehost.CheckStatus(r.GetStatus()),
		Conclusion:  codehost.Conclusion(r.GetConclusion()),
		Title:       r.GetOutput().GetTitle(),
		Summary:     r.GetOutput().GetSummary(),
		Text:        r.GetOutput().GetText(),
		StartedAt:   r.GetStartedAt().Time,
		CompletedAt: r.GetCompletedAt().Time,
		AppSlug:     r.GetApp().GetSlug(),
	}
}

// RequiredChecks returns the check names branch protection requires on a
// branch (its required_status_checks contexts and checks, deduplicated and
// sorted); none, and no error, when the branch is not protected. Reading
// protection needs the App's administration:read permission (or an admin
// token); without it the error wraps ErrUnauthorized.
func (c *Client) RequiredChecks(ctx context.Context, repo, branch string) ([]string, error) {
	route := RouteBranchProtection
	if branch == "" {
		return nil, refuse(route, repo, "a branch is required")
	}
	g, err := c.forRepo(ctx, route, repo)
	if err != nil {
		return nil, err
	}
	owner, name, _ := splitRepo(route, repo)
	var p *gh.Protection
	err = c.do(ctx, route, repo, func(ctx context.Context) (*gh.Response, error) {
		var resp *gh.Response
		var err error
		p, resp, err = g.Repositories.GetBranchProtection(ctx, owner, name, branch)
		if errors.Is(err, gh.ErrBranchNotProtected) {
			return resp, nil
		}
		return resp, err
	})
	if err != nil {
		return nil, err
	}
	if p == nil || p.RequiredStatusChecks == nil {
		return nil, nil
	}
	set := map[string]bool{}
	if cs := p.RequiredStatusChecks.Contexts; cs != nil {
		for _, s := range *cs {
			set[s] = true
		}
	}
	if cs := p.RequiredStatusChecks.Checks; cs != nil {
		for _, s := range *cs {
			if s != nil {
				set[s.Context] = true
			}
		}
	}
	if len(set) == 0 {
		return nil, nil
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	slices.Sort(out)
	return out, nil
}

// Comments returns every comment on a pull request's conversation, across
// all pages, oldest first (ordered by id, whatever order the pages came
// in). The per-issue endpoint takes no sort or direction; none is sent.
func (c *Client) Comments(ctx context.Context, repo string, number int) ([]codehost.Comment, error) {
	route := RouteIssueComments
	if number <= 0 {
		return nil, refuse(route, repo, "the pull request number %d is not positive", number)
	}
	g, err := c.forRepo(ctx, route, repo)
	if err != nil {
		return nil, err
	}
	owner, name, _ := splitRepo(route, repo)
	list, err := pages(ctx, c, route, repo, func(ctx context.Context, opt gh.ListOptions) ([]*gh.IssueComment, *gh.Response, error) {
		return g.Issues.ListComments(ctx, owner, name, number, &gh.IssueListCommentsOptions{ListOptions: opt})
	})
	if err != nil {
		return nil, err
	}
	out := make([]codehost.Comment, 0, len(list))
	seen := map[int64]bool{}
	for _, ic := range list {
		if seen[ic.GetID()] {
			continue
		}
		seen[ic.GetID()] = true
		out = append(out, toComment(ic))
	}
	slices.SortStableFunc(out, func(a, b codehost.Comment) int { return cmpInt64(a.ID, b.ID) })
	return out, nil
}

// FindComment returns the oldest comment (lowest id) whose body contains
// marker, reading every page; nil and no error when none does.
func (c *Client) FindComment(ctx context.Context, repo string, number int, marker string) (*codehost.Comment, error) {
	if marker == "" {
		return nil, refuse(RouteIssueComments, repo, "an empty marker matches every comment")
	}
	all, err := c.Comments(ctx, repo, number)
	if err != nil {
		return nil, err
	}
	for i := range all {
		if strings.Contains(all[i].Body, marker) {
			found := all[i]
			return &found, nil
		}
	}
	return nil, nil
}

// CreateComment posts a comment; a body over codehost.MaxBodyLength
// characters is refused with ErrInvalid before the call.
func (c *Client) CreateComment(ctx context.Context, repo string, number int, body string) (codehost.Comment, error) {
	route := RouteCreateIssueComment
	if number <= 0 {
		return codehost.Comment{}, refuse(route, repo, "the pull request number %d is not positive", number)
	}
	if body == "" {
		return codehost.Comment{}, refuse(route, repo, "a comment body is required")
	}
	if err := checkLength(route, repo, "comment body", body); err != nil {
		return codehost.Comment{}, err
	}
	g, err := c.forRepo(ctx, route, repo)
	if err != nil {
		return codehost.Comment{}, err
	}
	owner, name, _ := splitRepo(route, repo)
	var ic *gh.IssueComment
	err = c.do(ctx, route, repo, func(ctx context.Context) (*gh.Response, error) {
		var resp *gh.Response
		var err error
		ic, resp, err = g.Issues.CreateComment(ctx, owner, name, number, &gh.IssueComment{Body: gh.Ptr(body)})
		return resp, err
	})
	if err != nil {
		return codehost.Comment{}, err
	}
	return toComment(ic), nil
}

// EditComment replaces a comment's body; a body over
// codehost.MaxBodyLength characters is refused with ErrInvalid before the
// call.
func (c *Client) EditComment(ctx context.Context, repo string, id int64, body string) (codehost.Comment, error) {
	route := RouteEditIssueComment
	if id <= 0 {
		return codehost.Comment{}, refuse(route, repo, "the comment id %d is not positive", id)
	}
	if body == "" {
		return codehost.Comment{}, refuse(route, repo, "a comment body is required")
	}
	if err := checkLength(route, repo, "comment body", body); err != nil {
		return codehost.Comment{}, err
	}
	g, err := c.forRepo(ctx, route, repo)
	if err != nil {
		return codehost.Comment{}, err
	}
	owner, name, _ := splitRepo(route, repo)
	var ic *gh.IssueComment
	err = c.do(ctx, route, repo, func(ctx context.Context) (*gh.Response, error) {
		var resp *gh.Response
		var err error
		ic, resp, err = g.Issues.EditComment(ctx, owner, name, id, &gh.IssueComment{Body: gh.Ptr(body)})
		return resp, err
	})
	if err != nil {
		return codehost.Comment{}, err
	}
	return toComment(ic), nil
}

func toComment(ic *gh.IssueComment) codehost.Comment {
	return codehost.Comment{
		ID:        ic.GetID(),
		Body:      ic.GetBody(),
		Author:    ic.GetUser().GetLogin(),
		URL:       ic.GetHTMLURL(),
		CreatedAt: ic.GetCreatedAt().Time,
		UpdatedAt: ic.GetUpdatedAt().Time,
	}
}

// reactions are the contents GitHub accepts.
var reactions = []string{"+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"}

// React adds a reaction to a comment; adding one the identity already
// added is no error (GitHub answers 200 with the existing one).
func (c *Client) React(ctx context.Context, repo string, commentID int64, content string) error {
	route := RouteIssueCommentReactions
	if commentID <= 0 {
		return refuse(route, repo, "the comment id %d is not positive", commentID)
	}
	if !slices.Contains(reactions, content) {
		return refuse(route, repo, "the reaction %q is none of %s", content, strings.Join(reactions, ", "))
	}
	g, err := c.forRepo(ctx, route, repo)
	if err != nil {
		return err
	}
	owner, name, _ := splitRepo(route, repo)
	return c.do(ctx, route, repo, func(ctx context.Context) (*gh.Response, error) {
		_, resp, err := g.Reactions.CreateIssueCommentReaction(ctx, owner, name, commentID, content)
		return resp, err
	})
}

// Permission returns a user's permission on a repository: the
// collaborator permission's role_name when it is one of GitHub's five
// roles (admin, maintain, write, triage, read), else (a custom role) the
// legacy permission it is based on (admin, write, read, none).
//
// GitHub answers 404 for a login that is no user. Such a user holds no
// permission: when the repository itself exists (checked with
// GET /repos/{owner}/{repo}), the answer is PermissionNone and no error;
// an unknown repository is ErrNotFound.
func (c *Client) Permission(ctx context.Context, repo, user string) (codehost.Permission, error) {
	route := RoutePermission
	if user == "" || strings.ContainsAny(user, "/?#% ") {
		return "", refuse(route, repo, "the user %q is not a login", user)
	}
	g, err := c.forRepo(ctx, route, repo)
	if err != nil {
		return "", err
	}
	owner, name, _ := splitRepo(route, repo)
	var lvl *gh.RepositoryPermissionLevel
	err = c.do(ctx, route, repo, func(ctx context.Context) (*gh.Response, error) {
		var resp *gh.Response
		var err error
		lvl, resp, err = g.Repositories.GetPermissionLevel(ctx, owner, name, user)
		return resp, err
	})
	if errors.Is(err, codehost.ErrNotFound) {
		if rerr := c.do(ctx, RouteRepo, repo, func(ctx context.Context) (*gh.Response, error) {
			_, resp, err := g.Repositories.Get(ctx, owner, name)
			return resp, err
		}); rerr != nil {
			return "", rerr
		}
		return codehost.PermissionNone, nil
	}
	if err != nil {
		return "", err
	}
	switch p := codehost.Permission(lvl.GetRoleName()); p {
	case codehost.PermissionAdmin, codehost.PermissionMaintain, codehost.PermissionWrite,
		codehost.PermissionTriage, codehost.PermissionRead:
		return p, nil
	}
	switch p := codehost.Permission(lvl.GetPermission()); p {
	case codehost.PermissionAdmin, codehost.PermissionMaintain, codehost.PermissionWrite,
		codehost.PermissionTriage, codehost.PermissionRead, codehost.PermissionNone:
		return p, nil
	case "":
		return codehost.PermissionNone, nil
	default:
		return "", &Error{Route: route, Repo: repo, Message: fmt.Sprintf("unknown permission %q", p), Kind: codehost.ErrUnavailable}
	}
}

// Merge merges a pull request pinned to headSHA (GitHub's sha parameter):
// a head that moved is ErrConflict (409), a PR GitHub will not merge
// (conflicts, failing required checks, a draft, already merged) is
// ErrNotMergeable (405). It returns the merge commit's SHA. An empty
// method is a merge commit.
func (c *Client) Merge(ctx context.Context, repo string, number int, headSHA string, method codehost.MergeMethod) (string, error) {
	route := RouteMerge
	switch {
	case number <= 0:
		return "", refuse(route, repo, "the pull request number %d is not positive", number)
	case headSHA == "":
		return "", refuse(route, repo, "a merge is pinned to a head SHA; none was given")
	case method == "":
		method = codehost.MergeMerge
	case method != codehost.MergeMerge && method != codehost.MergeSquash && method != codehost.MergeRebase:
		return "", refuse(route, repo, "the merge method %q is none of merge, squash, rebase", method)
	}
	g, err := c.forRepo(ctx, route, repo)
	if err != nil {
		return "", err
	}
	owner, name, _ := splitRepo(route, repo)
	var res *gh.PullRequestMergeResult
	err = c.do(ctx, route, repo, func(ctx context.Context) (*gh.Response, error) {
		var resp *gh.Response
		var err error
		res, resp, err = g.PullRequests.Merge(ctx, owner, name, number, "", &gh.PullRequestOptions{SHA: headSHA, MergeMethod: string(method)})
		return resp, err
	})
	if err != nil {
		return "", err
	}
	if !res.GetMerged() || res.GetSHA() == "" {
		return "", &Error{Route: route, Repo: repo, Status: 200, Message: "GitHub answered without merging: " + res.GetMessage(), Kind: codehost.ErrNotMergeable}
	}
	return res.GetSHA(), nil
}
