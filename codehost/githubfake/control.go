package githubfake

import (
	"strings"
	"unicode/utf8"

	"github.com/gapless-dev/gapless/codehost"
)

// CreateRepo creates repository repo ("owner/name") with an initial empty
// commit on defaultBranch ("main" when empty) and installs the App on its
// owner (one installation per owner, as on GitHub). Creating an existing
// repository is misuse.
func (f *Fake) CreateRepo(fullName, defaultBranch string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	owner, name, ok := strings.Cut(fullName, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		f.misusef("CreateRepo: %q is not owner/name", fullName)
		return
	}
	if f.lookupRepo(fullName) != nil {
		f.misusef("CreateRepo: %s exists", fullName)
		return
	}
	if defaultBranch == "" {
		defaultBranch = "main"
	}
	r := &repo{
		id: f.nextID("repo"), owner: owner, name: name, defaultBranch: defaultBranch, createdAt: f.now(),
		branches: map[string]string{}, commits: map[string]*commit{}, prs: map[int]*pull{}, next: 1,
		perms: map[string]codehost.Permission{}, protected: map[string][]string{}, testMerges: map[[2]string]string{},
	}
	c := f.newCommit(r, nil, map[string]string{}, "Initial commit", owner)
	r.branches[defaultBranch] = c.sha
	f.repos[repoKey(fullName)] = r
	if _, ok := f.installations[strings.ToLower(owner)]; !ok {
		f.installations[strings.ToLower(owner)] = f.nextID("installation")
	}
}

// Commit pushes a new commit to branch and returns its sha. Its tree is
// its parent's (the branch's head, or the default branch's when branch is
// new) with files overlaid; an empty content deletes a file. GitHub's
// "push" webhook is delivered; every open pull request whose head is
// branch follows it (a new test merge, and a pull_request "synchronize"
// delivered for each); every open pull request whose base is branch gets
// a new test merge. Deliveries are synchronous.
func (f *Fake) Commit(repo, branch string, files map[string]string, message string) string {
	f.mu.Lock()
	r := f.mustRepo(repo)
	if r == nil || branch == "" {
		if r != nil {
			f.misusef("Commit: no branch named")
		}
		f.mu.Unlock()
		return ""
	}
	before, exists := r.branches[branch]
	parent := before
	if !exists {
		parent = r.branches[r.defaultBranch]
	}
	tree := copyFiles(r.commits[parent].files)
	for p, content := range files {
		if content == "" {
			delete(tree, p)
		} else {
			tree[p] = content
		}
	}
	pusher := r.owner
	for _, n := range r.pullNumbers() {
		if p := r.prs[n]; p.state == "open" && p.head == branch {
			pusher = p.author
			break
		}
	}
	c := f.newCommit(r, []string{parent}, tree, message, pusher)
	r.branches[branch] = c.sha
	if !exists {
		before = ""
	}
	events := []*outgoing{f.pushEventOut(r, branch, before, c, pusher, !exists)}
	events = append(events, f.afterBranchMove(r, branch, pusher)...)
	f.mu.Unlock()
	f.deliverSync(events)
	return c.sha
}

// PRSpec describes a pull request to open.
type PRSpec struct {
	Title, Author, Head, Base string
	Draft                     bool
}

// OpenPR opens a pull request from spec.Head into spec.Base (the default
// branch when empty), both existing branches, and returns its number. A
// pull_request "opened" is delivered, sent by the author.
func (f *Fake) OpenPR(repo string, spec PRSpec) int {
	f.mu.Lock()
	r := f.mustRepo(repo)
	if r == nil {
		f.mu.Unlock()
		return 0
	}
	if spec.Base == "" {
		spec.Base = r.defaultBranch
	}
	headSHA, okHead := r.branches[spec.Head]
	_, okBase := r.branches[spec.Base]
	if !okHead || !okBase || spec.Head == spec.Base {
		f.misusef("OpenPR: head %q and base %q must be two existing branches of %s", spec.Head, spec.Base, repo)
		f.mu.Unlock()
		return 0
	}
	if spec.Author == "" {
		spec.Author = r.owner
	}
	if spec.Title == "" {
		spec.Title = "Change " + spec.Head
	}
	now := f.now()
	p := &pull{
		id: f.nextID("pull"), number: r.next, title: spec.Title, author: spec.Author,
		head: spec.Head, base: spec.Base, headSHA: headSHA, draft: spec.Draft,
		state: "open", createdAt: now, updatedAt: now,
	}
	r.next++
	r.prs[p.number] = p
	f.recompute(r, p)
	events := []*outgoing{f.pullRequestEventOut(r, p, "opened", p.author, "", "", "")}
	f.mu.Unlock()
	f.deliverSync(events)
	return p.number
}

// ClosePR closes an open pull request without merging it; a pull_request
// "closed" (merged false) is delivered.
func (f *Fake) ClosePR(repo string, n int) {
	f.mu.Lock()
	r, p := f.mustPull(repo, n)
	if p == nil || p.state != "open" {
		if p != nil {
			f.misusef("ClosePR: %s#%d is not open", repo, n)
		}
		f.mu.Unlock()
		return
	}
	now := f.now()
	p.state, p.closedAt, p.updatedAt = "closed", now, now
	p.baseSHA = r.branches[p.base]
	events := []*outgoing{f.pullRequestEventOut(r, p, "closed", p.author, "", "", "")}
	f.mu.Unlock()
	f.deliverSync(events)
}

// ReopenPR reopens a closed, unmerged pull request at its branch's
// current head; a pull_request "reopened" is delivered.
func (f *Fake) ReopenPR(repo string, n int) {
	f.mu.Lock()
	r, p := f.mustPull(repo, n)
	if p == nil || p.state != "closed" || p.merged {
		if p != nil {
			f.misusef("ReopenPR: %s#%d is not closed and unmerged", repo, n)
		}
		f.mu.Unlock()
		return
	}
	if sha, ok := r.branches[p.head]; ok {
		p.headSHA = sha
	}
	p.state, p.closedAt, p.updatedAt = "open", timeZero, f.now()
	f.recompute(r, p)
	events := []*outgoing{f.pullRequestEventOut(r, p, "reopened", p.author, "", "", "")}
	f.mu.Unlock()
	f.deliverSync(events)
}

// MergeByUser is a person merging a pull request in GitHub's UI with a
// merge commit, as an admin may: branch protection's required checks are
// bypassed, but a closed pull request, a draft or a conflict is misuse.
// The base moves, and a pull_request "closed" (merged true) and a "push"
// to the base are delivered, sent by user. It returns the merge commit's
// sha.
func (f *Fake) MergeByUser(repo string, n int, user string) string {
	f.mu.Lock()
	r, p := f.mustPull(repo, n)
	if p == nil {
		f.mu.Unlock()
		return ""
	}
	if status, msg, _ := f.mergeBlock(r, p, "", false); status != 0 {
		f.misusef("MergeByUser: %s#%d cannot be merged: %s", repo, n, msg)
		f.mu.Unlock()
		return ""
	}
	sha, events := f.doMerge(r, p, codehost.MergeMerge, "", "", user, "")
	f.mu.Unlock()
	f.deliverSync(events)
	return sha
}

// AddComment is author commenting on a pull request's conversation; an
// issue_comment "created" (its issue carrying pull_request links) is
// delivered. It returns the comment's id. A body over
// codehost.MaxBodyLength characters is misuse, as GitHub refuses it.
func (f *Fake) AddComment(repo string, n int, author, body string) int64 {
	f.mu.Lock()
	r, p := f.mustPull(repo, n)
	if p == nil {
		f.mu.Unlock()
		return 0
	}
	if body == "" || utf8.RuneCountInString(body) > codehost.MaxBodyLength {
		f.misusef("AddComment: a body must have 1 to %d characters", codehost.MaxBodyLength)
		f.mu.Unlock()
		return 0
	}
	cm := f.addComment(r, n, author, "", body)
	events := []*outgoing{f.issueCommentEventOut(r, cm, "created", author, "", nil)}
	f.mu.Unlock()
	f.deliverSync(events)
	return cm.id
}

// SetPermission gives user the permission p on repo (what
// collaborators/{user}/permission answers). Users never set have none,
// except the owner, who is admin.
func (f *Fake) SetPermission(repo, user string, p codehost.Permission) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.mustRepo(repo)
	if r == nil {
		return
	}
	switch p {
	case codehost.PermissionNone, codehost.PermissionRead, codehost.PermissionTriage,
		codehost.PermissionWrite, codehost.PermissionMaintain, codehost.PermissionAdmin:
	default:
		f.misusef("SetPermission: unknown permission %q", p)
		return
	}
	r.perms[strings.ToLower(user)] = p
}

// SetRequiredChecks protects branch with branch protection requiring the
// named checks (any App may provide them). No names removes the
// protection (404 "Branch not protected").
func (f *Fake) SetRequiredChecks(repo, branch string, names ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.mustRepo(repo)
	if r == nil {
		return
	}
	if _, ok := r.branches[branch]; !ok {
		f.misusef("SetRequiredChecks: no branch %q in %s", branch, repo)
		return
	}
	if len(names) == 0 {
		delete(r.protected, branch)
		return
	}
	r.protected[branch] = append([]string(nil), names...)
}

// SetMergeable overrides what GitHub reports of a pull request's
// mergeability (e.g. nil and "unknown" while computing, false and
// "dirty", true and "blocked") until the pull request is next recomputed
// (its head or base moves) or SetMergeable(repo, n, nil, "") clears it.
// A merge, and MergeAllowed, refuse while the override says mergeable
// false or the state is dirty, blocked, draft or behind.
func (f *Fake) SetMergeable(repo string, n int, mergeable *bool, state string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, p := f.mustPull(repo, n)
	if p == nil {
		return
	}
	if mergeable == nil && state == "" {
		p.override = nil
		return
	}
	o := &mergeOverride{state: state}
	if mergeable != nil {
		v := *mergeable
		o.mergeable = &v
	}
	p.override = o
}

// SettleMergeability computes every open pull request's pending test
// merge (LazyMergeability): mergeable and merge_commit_sha appear.
func (f *Fake) SettleMergeability() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.repos {
		for _, n := range r.pullNumbers() {
			if p := r.prs[n]; p.state == "open" && !p.computed {
				f.settle(r, p)
			}
		}
	}
}

// PR returns a pull request as GET /pulls/{n} would show it now. Zero
// (and misuse) when it does not exist.
func (f *Fake) PR(repo string, n int) codehost.PR {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, p := f.mustPull(repo, n)
	if p == nil {
		return codehost.PR{}
	}
	mergeable, state, mergeSHA := f.mergeView(r, p)
	baseSHA := r.branches[p.base]
	if p.state != "open" {
		baseSHA = p.baseSHA
	}
	return codehost.PR{
		Repo: r.full(), Number: p.number, Title: p.title,
		URL:    f.htmlURL(r, "/pull/"+itoa(p.number)),
		Author: p.author, State: p.state, Merged: p.merged, Draft: p.draft,
		HeadSHA: p.headSHA, HeadRef: p.head, BaseRef: p.base, BaseSHA: baseSHA,
		MergeCommitSHA: mergeSHA, Mergeable: mergeable, MergeableState: state, UpdatedAt: p.updatedAt,
	}
}

// Comments returns a pull request's comments, oldest first.
func (f *Fake) Comments(repo string, n int) []codehost.Comment {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, p := f.mustPull(repo, n)
	if p == nil {
		return nil
	}
	var out []codehost.Comment
	for _, cm := range r.comments {
		if cm.number == n {
			out = append(out, codehost.Comment{
				ID: cm.id, Body: cm.body, Author: cm.author,
				URL:       f.htmlURL(r, "/pull/"+itoa(n)+"#issuecomment-"+itoa64(cm.id)),
				CreatedAt: cm.createdAt, UpdatedAt: cm.updatedAt,
			})
		}
	}
	return out
}

// CheckRuns returns every check run on a commit (every App's, every run),
// by ascending id.
func (f *Fake) CheckRuns(repo, sha string) []codehost.CheckRun {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.mustRepo(repo)
	if r == nil {
		return nil
	}
	var out []codehost.CheckRun
	for _, cr := range r.checkRuns {
		if cr.headSHA == sha {
			out = append(out, toCheckRun(cr))
		}
	}
	return out
}

// Branch returns a branch's head sha; empty when it does not exist.
func (f *Fake) Branch(repo, branch string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.mustRepo(repo)
	if r == nil {
		return ""
	}
	return r.branches[branch]
}

// Files returns a commit's tree (sha may be any ref); nil when unknown.
func (f *Fake) Files(repo, sha string) map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.mustRepo(repo)
	if r == nil {
		return nil
	}
	full := r.resolveRef(sha)
	if full == "" {
		return nil
	}
	return copyFiles(r.commits[full].files)
}

// MergeAllowed answers as GitHub's merge button would now: the pull
// request is open, not a draft, mergeable (no conflict, no override saying
// otherwise), and every required check of its base branch has, on the
// head, a latest run (the highest id of that name) that completed with
// success, neutral or skipped: GitHub counts neutral and skipped as
// passing; action_required, failure, cancelled, timed_out, a run still
// queued or in progress, or no run at all block.
func (f *Fake) MergeAllowed(repo string, n int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, p := f.mustPull(repo, n)
	if p == nil {
		return false
	}
	status, _, _ := f.mergeBlock(r, p, "", true)
	return status == 0
}
