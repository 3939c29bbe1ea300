package githubfake

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
	"time"

	gh "github.com/google/go-github/v88/github"
)

// withNulls marshals v (a go-github struct, whose omitempty pointers drop
// nil fields) and sets each named top-level key to JSON null when v left
// it out, as GitHub writes "mergeable": null rather than omitting it.
func withNulls(v any, keys ...string) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(`{}`)
	}
	if len(keys) == 0 {
		return b
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return b
	}
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			m[k] = json.RawMessage(`null`)
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		return b
	}
	return out
}

// userID is a stable id for a login.
func userID(login string) int64 {
	h := fnv.New32a()
	h.Write([]byte(strings.ToLower(login)))
	return int64(h.Sum32()%90000000) + 1000000
}

func nodeID(kind string, id int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf("%s:%d", kind, id)))
}

func ts(t time.Time) *gh.Timestamp {
	if t.IsZero() {
		return nil
	}
	return &gh.Timestamp{Time: t.UTC().Truncate(time.Second)}
}

// user renders a login as GitHub's simple user object.
func (f *Fake) user(login, typ string) *gh.User {
	if typ == "" {
		typ = "User"
		if strings.HasSuffix(login, "[bot]") {
			typ = "Bot"
		}
	}
	id := userID(login)
	return &gh.User{
		Login:     gh.Ptr(login),
		ID:        gh.Ptr(id),
		NodeID:    gh.Ptr(nodeID("User", id)),
		Type:      gh.Ptr(typ),
		SiteAdmin: gh.Ptr(false),
		URL:       gh.Ptr(f.URL() + "users/" + login),
		HTMLURL:   gh.Ptr(f.URL() + login),
	}
}

func (f *Fake) htmlURL(r *repo, suffix string) string {
	return f.URL() + r.owner + "/" + r.name + suffix
}

func (f *Fake) apiURL(r *repo, suffix string) string {
	return f.URL() + "repos/" + r.owner + "/" + r.name + suffix
}

// repository renders a repository as GitHub's full repository object.
func (f *Fake) repository(r *repo) *gh.Repository {
	return &gh.Repository{
		ID:            gh.Ptr(r.id),
		NodeID:        gh.Ptr(nodeID("Repository", r.id)),
		Name:          gh.Ptr(r.name),
		FullName:      gh.Ptr(r.full()),
		Owner:         f.user(r.owner, "Organization"),
		Private:       gh.Ptr(true),
		HTMLURL:       gh.Ptr(f.htmlURL(r, "")),
		URL:           gh.Ptr(f.apiURL(r, "")),
		DefaultBranch: gh.Ptr(r.defaultBranch),
		CreatedAt:     ts(r.createdAt),
		Visibility:    gh.Ptr("private"),
	}
}

// installation renders an installation (the short form webhooks carry
// when short is true).
func (f *Fake) installation(id int64, owner string, short bool) *gh.Installation {
	in := &gh.Installation{ID: gh.Ptr(id), NodeID: gh.Ptr(nodeID("Installation", id))}
	if short {
		return in
	}
	in.AppID = gh.Ptr(f.appID)
	in.AppSlug = gh.Ptr(f.appSlug)
	in.TargetType = gh.Ptr("Organization")
	in.Account = f.user(owner, "Organization")
	in.AccessTokensURL = gh.Ptr(fmt.Sprintf("%sapp/installations/%d/access_tokens", f.URL(), id))
	in.RepositorySelection = gh.Ptr("all")
	in.Permissions = f.permissions()
	in.Events = []string{"check_run", "issue_comment", "pull_request", "push"}
	return in
}

// permissions are the App's: what gapless needs.
func (f *Fake) permissions() *gh.InstallationPermissions {
	return &gh.InstallationPermissions{
		Checks:         gh.Ptr("write"),
		Contents:       gh.Ptr("write"),
		Issues:         gh.Ptr("write"),
		PullRequests:   gh.Ptr("write"),
		Metadata:       gh.Ptr("read"),
		Administration: gh.Ptr("read"),
	}
}

// appObject renders the App.
func (f *Fake) appObject() *gh.App {
	return &gh.App{
		ID:          gh.Ptr(f.appID),
		Slug:        gh.Ptr(f.appSlug),
		NodeID:      gh.Ptr(nodeID("App", f.appID)),
		Name:        gh.Ptr("gapless (test)"),
		Owner:       f.user("gapless-dev", "Organization"),
		HTMLURL:     gh.Ptr(f.URL() + "apps/" + f.appSlug),
		ExternalURL: gh.Ptr("https://gapless.invalid"),
		Permissions: f.permissions(),
		Events:      []string{"check_run", "issue_comment", "pull_request", "push"},
	}
}

// checkApp renders the App a check run belongs to.
func (f *Fake) checkApp(appID int64, slug string) *gh.App {
	if appID == f.appID {
		return f.appObject()
	}
	return &gh.App{
		ID:     gh.Ptr(appID),
		Slug:   gh.Ptr(slug),
		NodeID: gh.Ptr(nodeID("App", appID)),
		Name:   gh.Ptr("GitHub Actions"),
		Owner:  f.user("github", "Organization"),
	}
}

// mergeView is what GitHub reports of a pull request's mergeability:
// mergeable (nil while computing), mergeable_state and merge_commit_sha.
// Call with f.mu held.
func (f *Fake) mergeView(r *repo, p *pull) (*bool, string, string) {
	if p.state != "open" {
		if p.merged {
			return nil, "unknown", p.mergeSHA
		}
		return nil, "unknown", p.testMerge
	}
	if p.override != nil {
		state := p.override.state
		if state == "" {
			state = "unknown"
		}
		sha := ""
		if p.computed {
			sha = p.testMerge
		}
		return p.override.mergeable, state, sha
	}
	if !p.computed {
		return nil, "unknown", ""
	}
	yes, no := true, false
	switch {
	case p.conflict:
		return &no, "dirty", ""
	case p.draft:
		return &yes, "draft", p.testMerge
	case f.failingCheck(r, p) != "":
		return &yes, "blocked", p.testMerge
	}
	return &yes, "clean", p.testMerge
}

// pullRequest renders a pull request as GET /pulls/{n} does.
func (f *Fake) pullRequest(r *repo, p *pull) *gh.PullRequest {
	mergeable, state, mergeSHA := f.mergeView(r, p)
	repoObj := f.repository(r)
	headSHA := p.headSHA
	baseSHA := r.branches[p.base]
	if p.merged || p.state != "open" {
		baseSHA = p.baseSHA
	}
	pr := &gh.PullRequest{
		ID:             gh.Ptr(p.id),
		NodeID:         gh.Ptr(nodeID("PullRequest", p.id)),
		Number:         gh.Ptr(p.number),
		State:          gh.Ptr(p.state),
		Locked:         gh.Ptr(false),
		Title:          gh.Ptr(p.title),
		Body:           gh.Ptr(p.body),
		User:           f.user(p.author, ""),
		Draft:          gh.Ptr(p.draft),
		CreatedAt:      ts(p.createdAt),
		UpdatedAt:      ts(p.updatedAt),
		ClosedAt:       ts(p.closedAt),
		MergedAt:       ts(p.mergedAt),
		URL:            gh.Ptr(f.apiURL(r, fmt.Sprintf("/pulls/%d", p.number))),
		HTMLURL:        gh.Ptr(f.htmlURL(r, fmt.Sprintf("/pull/%d", p.number))),
		IssueURL:       gh.Ptr(f.apiURL(r, fmt.Sprintf("/issues/%d", p.number))),
		CommentsURL:    gh.Ptr(f.apiURL(r, fmt.Sprintf("/issues/%d/comments", p.number))),
		StatusesURL:    gh.Ptr(f.apiURL(r, "/statuses/"+headSHA)),
		Merged:         gh.Ptr(p.merged),
		Mergeable:      mergeable,
		MergeableState: gh.Ptr(state),
		Head: &gh.PullRequestBranch{
			Label: gh.Ptr(r.owner + ":" + p.head), Ref: gh.Ptr(p.head), SHA: gh.Ptr(headSHA),
			Repo: repoObj, User: f.user(r.owner, "Organization"),
		},
		Base: &gh.PullRequestBranch{
			Label: gh.Ptr(r.owner + ":" + p.base), Ref: gh.Ptr(p.base), SHA: gh.Ptr(baseSHA),
			Repo: repoObj, User: f.user(r.owner, "Organization"),
		},
	}
	if mergeSHA != "" {
		pr.MergeCommitSHA = gh.Ptr(mergeSHA)
	}
	if p.merged {
		pr.MergedBy = f.user(p.mergedBy, "")
	}
	return pr
}

// pullJSON renders a pull request with GitHub's explicit nulls.
func (f *Fake) pullJSON(r *repo, p *pull) json.RawMessage {
	return withNulls(f.pullRequest(r, p), "mergeable", "merge_commit_sha", "merged_at", "closed_at", "merged_by")
}

// issueComment renders a comment.
func (f *Fake) issueComment(r *repo, c *comment) *gh.IssueComment {
	return &gh.IssueComment{
		ID:        gh.Ptr(c.id),
		NodeID:    gh.Ptr(nodeID("IssueComment", c.id)),
		Body:      gh.Ptr(c.body),
		User:      f.user(c.author, c.authorType),
		CreatedAt: ts(c.createdAt),
		UpdatedAt: ts(c.updatedAt),
		URL:       gh.Ptr(f.apiURL(r, fmt.Sprintf("/issues/comments/%d", c.id))),
		HTMLURL:   gh.Ptr(f.htmlURL(r, fmt.Sprintf("/pull/%d#issuecomment-%d", c.number, c.id))),
		IssueURL:  gh.Ptr(f.apiURL(r, fmt.Sprintf("/issues/%d", c.number))),
	}
}

// checkRunJSON renders a check run with GitHub's explicit nulls
// (conclusion and completed_at while it runs).
func (f *Fake) checkRunJSON(r *repo, cr *checkRun) json.RawMessage {
	out := &gh.CheckRun{
		ID:         gh.Ptr(cr.id),
		NodeID:     gh.Ptr(nodeID("CheckRun", cr.id)),
		HeadSHA:    gh.Ptr(cr.headSHA),
		ExternalID: gh.Ptr(cr.externalID),
		URL:        gh.Ptr(f.apiURL(r, fmt.Sprintf("/check-runs/%d", cr.id))),
		HTMLURL:    gh.Ptr(f.htmlURL(r, fmt.Sprintf("/runs/%d", cr.id))),
		DetailsURL: gh.Ptr(cr.detailsURL),
		Status:     gh.Ptr(cr.status),
		StartedAt:  ts(cr.startedAt),
		Name:       gh.Ptr(cr.name),
		CheckSuite: &gh.CheckSuite{ID: gh.Ptr(cr.suiteID)},
		App:        f.checkApp(cr.appID, cr.appSlug),
		Output: &gh.CheckRunOutput{
			AnnotationsCount: gh.Ptr(0),
			AnnotationsURL:   gh.Ptr(f.apiURL(r, fmt.Sprintf("/check-runs/%d/annotations", cr.id))),
		},
		PullRequests: []*gh.PullRequest{},
	}
	if cr.detailsURL == "" {
		out.DetailsURL = gh.Ptr(f.URL() + "apps/" + cr.appSlug)
	}
	if cr.conclusion != "" {
		out.Conclusion = gh.Ptr(cr.conclusion)
	}
	out.CompletedAt = ts(cr.completedAt)
	if cr.hasOutput {
		out.Output.Title = gh.Ptr(cr.title)
		out.Output.Summary = gh.Ptr(cr.summary)
		out.Output.Text = gh.Ptr(cr.text)
	}
	// pull_requests: the open pull requests whose head is this commit.
	for _, n := range r.pullNumbers() {
		p := r.prs[n]
		if p.state != "open" || p.headSHA != cr.headSHA {
			continue
		}
		out.PullRequests = append(out.PullRequests, &gh.PullRequest{
			URL:    gh.Ptr(f.apiURL(r, fmt.Sprintf("/pulls/%d", p.number))),
			ID:     gh.Ptr(p.id),
			Number: gh.Ptr(p.number),
			Head:   &gh.PullRequestBranch{Ref: gh.Ptr(p.head), SHA: gh.Ptr(p.headSHA)},
			Base:   &gh.PullRequestBranch{Ref: gh.Ptr(p.base), SHA: gh.Ptr(r.branches[p.base])},
		})
	}
	b, err := json.Marshal(out)
	if err != nil {
		return json.RawMessage(`{}`)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return b
	}
	for _, k := range []string{"conclusion", "completed_at"} {
		if _, ok := m[k]; !ok {
			m[k] = json.RawMessage(`null`)
		}
	}
	// output's title, summary and text are null until set.
	var outObj map[string]json.RawMessage
	if err := json.Unmarshal(m["output"], &outObj); err == nil {
		for _, k := range []string{"title", "summary", "text"} {
			if _, ok := outObj[k]; !ok {
				outObj[k] = json.RawMessage(`null`)
			}
		}
		if ob, err := json.Marshal(outObj); err == nil {
			m["output"] = ob
		}
	}
	// pull_requests is [] when empty (go-github's omitempty drops it).
	if _, ok := m["pull_requests"]; !ok {
		m["pull_requests"] = json.RawMessage(`[]`)
	}
	res, err := json.Marshal(m)
	if err != nil {
		return b
	}
	return res
}

// pullNumbers returns a repository's pull request numbers, ascending.
func (r *repo) pullNumbers() []int {
	out := make([]int, 0, len(r.prs))
	for n := range r.prs {
		out = append(out, n)
	}
	sort.Ints(out)
	return out
}
