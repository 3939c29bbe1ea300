package githubfake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	gh "github.com/google/go-github/v88/github"

	"github.com/gapless-dev/gapless/codehost"
)

// number parses the {n} wildcard; false answers 404.
func (c *call) number() (int, bool) {
	n, err := strconv.Atoi(c.param("n"))
	if err != nil || n <= 0 {
		c.errorf(http.StatusNotFound, notFoundMessage)
		return 0, false
	}
	return n, true
}

// getPull answers GET /repos/{owner}/{repo}/pulls/{n}.
func (f *Fake) getPull(c *call) {
	n, ok := c.number()
	if !ok {
		return
	}
	p := c.repo.prs[n]
	if p == nil {
		c.errorf(http.StatusNotFound, notFoundMessage)
		return
	}
	c.status, c.out = http.StatusOK, f.pullJSON(c.repo, p)
}

// listPulls answers GET /repos/{owner}/{repo}/pulls with state (open by
// default; closed; all), base, head ("owner:branch"), sort (created by
// default, or updated), direction (desc by default for created, asc
// otherwise, as GitHub documents) and paging with a Link header. Like
// GitHub's "pull request simple" items, the list leaves out mergeable,
// mergeable_state, merged and merged_by: only GET /pulls/{n} has them.
func (f *Fake) listPulls(c *call) {
	r := c.repo
	q := c.r.URL.Query()
	state := q.Get("state")
	if state == "" {
		state = "open"
	}
	if state != "open" && state != "closed" && state != "all" {
		c.invalid("PullRequest", "invalid", "state", "state must be one of open, closed, all")
		return
	}
	base, head := q.Get("base"), q.Get("head")
	var list []*pull
	for _, n := range r.pullNumbers() {
		p := r.prs[n]
		if state != "all" && p.state != state {
			continue
		}
		if base != "" && p.base != base {
			continue
		}
		if head != "" {
			owner, branch, ok := strings.Cut(head, ":")
			if !ok || !strings.EqualFold(owner, r.owner) || branch != p.head {
				continue
			}
		}
		list = append(list, p)
	}
	sortBy := q.Get("sort")
	if sortBy == "" {
		sortBy = "created"
	}
	direction := q.Get("direction")
	if direction == "" {
		direction = "asc"
		if sortBy == "created" {
			direction = "desc"
		}
	}
	sort.SliceStable(list, func(i, j int) bool {
		a, b := list[i], list[j]
		less := a.number < b.number
		if sortBy == "updated" && !a.updatedAt.Equal(b.updatedAt) {
			less = a.updatedAt.Before(b.updatedAt)
		}
		if direction == "desc" {
			return !less
		}
		return less
	})
	pg := parsePage(q)
	lo, hi := pg.window(len(list))
	items := make([]json.RawMessage, 0, hi-lo)
	for _, p := range list[lo:hi] {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(f.pullJSON(r, p), &m); err != nil {
			c.errorf(http.StatusInternalServerError, err.Error())
			return
		}
		for _, k := range []string{"mergeable", "mergeable_state", "merged", "merged_by", "rebaseable", "comments"} {
			delete(m, k)
		}
		b, err := json.Marshal(m)
		if err != nil {
			c.errorf(http.StatusInternalServerError, err.Error())
			return
		}
		items = append(items, b)
	}
	c.link(pg, len(list))
	c.json(http.StatusOK, items)
}

// mergeRequest is PUT /pulls/{n}/merge's body.
type mergeRequest struct {
	SHA           *string `json:"sha"`
	MergeMethod   *string `json:"merge_method"`
	CommitTitle   *string `json:"commit_title"`
	CommitMessage *string `json:"commit_message"`
}

// mergePull answers PUT /repos/{owner}/{repo}/pulls/{n}/merge as GitHub's
// docs say: 200 {sha, merged: true, message}; 409 "Head branch was
// modified. Review and try the merge again." when sha is given and is not
// the head; 405 when the pull request cannot be merged (closed, a draft, a
// conflict, a SetMergeable override, or a required check not passing:
// "Required status check \"<name>\" is expected."). The base branch moves
// to a new commit, the pull request closes as merged, and every other open
// pull request on that base gets a new test merge.
func (f *Fake) mergePull(c *call) {
	n, ok := c.number()
	if !ok {
		return
	}
	var req mergeRequest
	if !c.decode(&req) {
		return
	}
	method := codehost.MergeMerge
	if req.MergeMethod != nil {
		method = codehost.MergeMethod(*req.MergeMethod)
	}
	switch method {
	case codehost.MergeMerge, codehost.MergeSquash, codehost.MergeRebase:
	default:
		c.errorf(http.StatusUnprocessableEntity, fmt.Sprintf(
			"Invalid request.\n\nFor 'properties/merge_method', %q is not one of [\"merge\", \"squash\", \"rebase\"].", method))
		return
	}
	r := c.repo
	p := r.prs[n]
	if p == nil {
		c.errorf(http.StatusNotFound, notFoundMessage)
		return
	}
	want := ""
	if req.SHA != nil {
		want = *req.SHA
	}
	if status, msg, doc := f.mergeBlock(r, p, want, true); status != 0 {
		c.errorDoc(status, msg, doc)
		return
	}
	title, message := "", ""
	if req.CommitTitle != nil {
		title = *req.CommitTitle
	}
	if req.CommitMessage != nil {
		message = *req.CommitMessage
	}
	sha, events := f.doMerge(r, p, method, title, message, c.actor.login, c.actor.userType)
	if !f.opts.NoAPIEvents {
		c.events = events
	}
	c.json(http.StatusOK, &gh.PullRequestMergeResult{
		SHA: gh.Ptr(sha), Merged: gh.Ptr(true), Message: gh.Ptr("Pull Request successfully merged"),
	})
}

// mergeBlock says why a pull request cannot be merged now: the status
// GitHub answers (0 when it can), its message and documentation_url.
// want, when set, is the SHA the head must still be (409 otherwise).
// checks false skips branch protection (an admin merging in the UI).
// Call with f.mu held.
func (f *Fake) mergeBlock(r *repo, p *pull, want string, checks bool) (int, string, string) {
	mergeDoc := docsBase + "/pulls/pulls#merge-a-pull-request"
	if p.state != "open" {
		return http.StatusMethodNotAllowed, mergeNotMergeable, mergeDoc
	}
	if want != "" && want != p.headSHA {
		return http.StatusConflict, mergeHeadModified, mergeDoc
	}
	if o := p.override; o != nil {
		if (o.mergeable != nil && !*o.mergeable) || o.state == "dirty" || o.state == "draft" ||
			o.state == "behind" || (checks && o.state == "blocked") {
			return http.StatusMethodNotAllowed, mergeNotMergeable, mergeDoc
		}
	}
	if p.draft {
		return http.StatusMethodNotAllowed, mergeNotMergeable, mergeDoc
	}
	// GitHub checks mergeability itself when asked to merge, whether or
	// not the test merge was computed yet.
	if _, conflict := r.threeWay(r.branches[p.base], p.headSHA); conflict {
		return http.StatusMethodNotAllowed, mergeNotMergeable, mergeDoc
	}
	if !checks {
		return 0, "", ""
	}
	if name, why := f.requiredCheckBlocking(r, p); name != "" {
		return http.StatusMethodNotAllowed, fmt.Sprintf("Required status check %q is %s.", name, why), protectedBranchesHelp
	}
	return 0, "", ""
}

// doMerge merges a pull request (it must be mergeable) with method and
// returns the base's new head and the webhooks GitHub sends: the pull
// request "closed" with merged true, the push to the base, and a
// "synchronize" for every open pull request whose head is that base. Call
// with f.mu held.
func (f *Fake) doMerge(r *repo, p *pull, method codehost.MergeMethod, title, message, by, byType string) (string, []*outgoing) {
	baseBefore := r.branches[p.base]
	files, _ := r.threeWay(baseBefore, p.headSHA)
	parents := []string{baseBefore}
	switch method {
	case codehost.MergeSquash:
		if title == "" {
			title = fmt.Sprintf("%s (#%d)", p.title, p.number)
		}
	case codehost.MergeRebase:
		// The fake replays the head's changes as one commit.
		if title == "" {
			title = r.commits[p.headSHA].message
		}
	default:
		parents = append(parents, p.headSHA)
		if title == "" {
			title = fmt.Sprintf("Merge pull request #%d from %s/%s", p.number, r.owner, p.head)
		}
		if message == "" {
			message = p.title
		}
	}
	full := title
	if message != "" {
		full += "\n\n" + message
	}
	mc := f.newCommit(r, parents, files, full, by)
	r.branches[p.base] = mc.sha

	now := f.now()
	p.state = "closed"
	p.merged = true
	p.mergedBy = by
	p.mergeSHA = mc.sha
	p.mergedAt, p.closedAt, p.updatedAt = now, now, now
	p.baseSHA = baseBefore
	p.override = nil

	events := []*outgoing{
		f.pullRequestEventOut(r, p, "closed", by, byType, "", ""),
		f.pushEventOut(r, p.base, baseBefore, mc, by, false),
	}
	events = append(events, f.afterBranchMove(r, p.base, by)...)
	return mc.sha, events
}

// requiredCheckBlocking returns the first required check of the pull
// request's base branch that does not pass on its head, and why
// ("expected": no run, or its latest run has not completed; "failing":
// its latest run completed with a conclusion other than success, neutral
// or skipped). GitHub's branch protection counts neutral and skipped as
// passing (docs: About status checks). "" when every one passes. Call
// with f.mu held.
func (f *Fake) requiredCheckBlocking(r *repo, p *pull) (string, string) {
	for _, name := range r.protected[p.base] {
		var latest *checkRun
		for _, cr := range r.checkRuns {
			if cr.headSHA == p.headSHA && cr.name == name && (latest == nil || cr.id > latest.id) {
				latest = cr
			}
		}
		switch {
		case latest == nil || latest.status != string(codehost.StatusCompleted):
			return name, "expected"
		case !codehost.Conclusion(latest.conclusion).Passing():
			return name, "failing"
		}
	}
	return "", ""
}

// failingCheck is requiredCheckBlocking's name alone.
func (f *Fake) failingCheck(r *repo, p *pull) string {
	name, _ := f.requiredCheckBlocking(r, p)
	return name
}

// afterBranchMove brings the open pull requests of a branch that just
// moved up to date: a pull request whose head it is follows it and gets a
// "synchronize" webhook; one whose base it is gets a new test merge (no
// webhook, as on GitHub). Call with f.mu held.
func (f *Fake) afterBranchMove(r *repo, branch, sender string) []*outgoing {
	var events []*outgoing
	head := r.branches[branch]
	for _, n := range r.pullNumbers() {
		p := r.prs[n]
		if p.state != "open" {
			continue
		}
		if p.head == branch && p.headSHA != head {
			before := p.headSHA
			p.headSHA = head
			p.updatedAt = f.now()
			f.recompute(r, p)
			events = append(events, f.pullRequestEventOut(r, p, "synchronize", sender, "", before, head))
			continue
		}
		if p.base == branch {
			f.recompute(r, p)
		}
	}
	return events
}
