// Package codehosttest is the conformance suite every codehost.Host
// passes: the GitHub client against the fake GitHub (codehost/github's
// TestConformance), and against real GitHub when a test token is
// configured (TestConformanceLive).
//
// Each case is a property a Host keeps whatever the host does underneath:
// reads are fresh, lists read every page, a check run is one per (head,
// name) and updated in place, comments are oldest first and a marker is
// found on any page, a merge is pinned to its head, bodies over
// codehost.MaxBodyLength are refused with ErrInvalid and store nothing.
// Run calls newTarget once per case, so a case sees a repository nothing
// else writes to (on a shared live repository, every case works on its
// own branches and files).
package codehosttest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/codehost"
)

// PRSpec is a pull request to open: Head is merged into Base.
type PRSpec struct {
	Title  string
	Author string // a login; a live host opens it as the token's user
	Head   string // branch
	Base   string // branch
	Draft  bool
}

// Deleted, as a file's content in Arranger.Commit, removes that file.
const Deleted = "\x00gapless:codehosttest:deleted\x00"

// Arranger sets up what a case needs on the host: on the fake, through its
// control API; on live GitHub, with the API on a scratch repository. Its
// methods fail the case (t.Fatal) when they cannot, or skip it (t.Skip,
// saying why) when the host cannot be arranged so (a live token that may
// not set permissions).
type Arranger interface {
	// Commit commits files onto branch and returns the new commit's SHA. A
	// branch that does not exist yet starts at the default branch's head.
	// The commit's tree is its parent's with files written (a file whose
	// content is Deleted is removed).
	Commit(repo, branch string, files map[string]string, message string) string
	// OpenPR opens a pull request and returns its number.
	OpenPR(repo string, spec PRSpec) int
	// AddComment posts a comment on a pull request as author (a live host
	// posts as the token's user) and returns its id.
	AddComment(repo string, n int, author, body string) int64
	// SetPermission gives user permission p on repo.
	SetPermission(repo, user string, p codehost.Permission)
	// SetRequiredChecks protects branch, requiring the named checks.
	SetRequiredChecks(repo, branch string, names ...string)
	// ClosePR closes a pull request without merging it.
	ClosePR(repo string, n int)
}

// Target is one Host to check, with a repository to check it on.
type Target struct {
	Host codehost.Host
	// Repo is owner/name, empty but for its default branch (on a shared
	// live repository, whatever other cases left, on other branches).
	Repo string
	// DefaultBranch is Repo's default branch ("main" when empty).
	DefaultBranch string
	Arrange       Arranger
	// RawHTTP gives the API's base URL (with a trailing slash) and an
	// authenticated client, for the wire checks; nil skips them.
	RawHTTP func() (base string, client *http.Client)
	// Heavy runs the cases that need over 100 pull requests, comments or
	// check runs (pages); a live host may leave them off (GitHub's
	// content-creation limits make them slow), and they skip saying so.
	Heavy bool
	// Live marks real GitHub: a case whose arrangement the token is not
	// allowed to make (ErrUnauthorized) skips, saying so, instead of
	// failing.
	Live bool
}

// Run runs the suite. newTarget gives each case its own Target.
func Run(t *testing.T, newTarget func(t *testing.T) Target) {
	t.Run("PullRequests", func(t *testing.T) { t.Parallel(); runPullRequests(t, newTarget) })
	t.Run("Files", func(t *testing.T) { t.Parallel(); runFiles(t, newTarget) })
	t.Run("CheckRuns", func(t *testing.T) { t.Parallel(); runCheckRuns(t, newTarget) })
	t.Run("Comments", func(t *testing.T) { t.Parallel(); runComments(t, newTarget) })
	t.Run("Permission", func(t *testing.T) { t.Parallel(); runPermission(t, newTarget) })
	t.Run("Merge", func(t *testing.T) { t.Parallel(); runMerge(t, newTarget) })
	t.Run("RequiredChecks", func(t *testing.T) { t.Parallel(); runRequiredChecks(t, newTarget) })
	t.Run("Errors", func(t *testing.T) { t.Parallel(); runErrors(t, newTarget) })
	t.Run("Wire", func(t *testing.T) { t.Parallel(); runWire(t, newTarget) })
}

// scope is one case's target, context and unique names.
type scope struct {
	t      *testing.T
	tg     Target
	ctx    context.Context
	prefix string
}

func newScope(t *testing.T, newTarget func(t *testing.T) Target) *scope {
	t.Helper()
	tg := newTarget(t)
	require.NotNil(t, tg.Host, "the target has no Host")
	require.NotNil(t, tg.Arrange, "the target has no Arranger")
	require.NotEmpty(t, tg.Repo, "the target has no repository")
	if tg.DefaultBranch == "" {
		tg.DefaultBranch = "main"
	}
	var b [4]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	name := strings.NewReplacer("/", "-", " ", "-", "#", "").Replace(t.Name())
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return &scope{t: t, tg: tg, ctx: ctx, prefix: "gl-" + strings.Trim(name, "-") + "-" + hex.EncodeToString(b[:])}
}

// branch is a branch name of this case's own.
func (s *scope) branch(name string) string { return s.prefix + "-" + name }

// file is a file path of this case's own (cases sharing a live repository
// never touch one file).
func (s *scope) file(name string) string { return s.prefix + "/" + name }

// pr commits a change on a new head branch off base (itself made off the
// default branch when new) and opens a PR; it returns the number, head
// branch and head SHA.
func (s *scope) pr(base, name string, draft bool) (int, string, string) {
	s.t.Helper()
	head := s.branch(name)
	sha := s.tg.Arrange.Commit(s.tg.Repo, head, map[string]string{s.file(name + ".sql"): "select 1 as " + strings.ReplaceAll(name, "-", "_")}, "change "+name)
	n := s.tg.Arrange.OpenPR(s.tg.Repo, PRSpec{Title: "PR " + name, Author: "alice", Head: head, Base: base, Draft: draft})
	return n, head, sha
}

// base makes a base branch of this case's own, off the default branch.
func (s *scope) base(name string) (string, string) {
	s.t.Helper()
	b := s.branch(name)
	sha := s.tg.Arrange.Commit(s.tg.Repo, b, map[string]string{s.file(name + "/README.md"): "base " + name}, "base "+name)
	return b, sha
}

// skipIfRefused skips a live case whose arrangement the token may not
// make.
func (s *scope) skipIfRefused(err error, what string) {
	s.t.Helper()
	if s.tg.Live && errors.Is(err, codehost.ErrUnauthorized) {
		s.t.Skipf("the live token may not %s (%v): this case needs a GitHub App installation token or Actions' GITHUB_TOKEN", what, err)
	}
}

// eventually waits, on a live host only, until cond holds: GitHub is
// eventually consistent (a push reaches its pull request, and its
// mergeability is computed, within seconds), so a live case checks again
// every 2 s for up to a minute. On any other host it returns at once and
// the assertions that follow check the state as it is: a host that needs
// time there fails them.
func (s *scope) eventually(cond func() bool) {
	s.t.Helper()
	if !s.tg.Live || cond() {
		return
	}
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-deadline.C:
			return
		case <-tick.C:
			if cond() {
				return
			}
		}
	}
}

// headIs reports whether pull request n's head is sha (for eventually).
func (s *scope) headIs(n int, sha string) func() bool {
	return func() bool {
		pr, err := s.tg.Host.PullRequest(s.ctx, s.tg.Repo, n)
		return err == nil && pr.HeadSHA == sha
	}
}

func (s *scope) requireHeavy() {
	s.t.Helper()
	if !s.tg.Heavy {
		s.t.Skip("needs over 100 pull requests, comments or check runs on the host, and the target is not Heavy (a live run sets GAPLESS_TEST_GITHUB_HEAVY=1 for them)")
	}
}

func runPullRequests(t *testing.T, newTarget func(t *testing.T) Target) {
	t.Run("ReadFresh", func(t *testing.T) {
		t.Parallel()
		s := newScope(t, newTarget)
		base, _ := s.base("base")
		n, head, sha := s.pr(base, "feature", false)
		pr, err := s.tg.Host.PullRequest(s.ctx, s.tg.Repo, n)
		require.NoError(t, err)
		require.Equal(t, s.tg.Repo, pr.Repo)
		require.Equal(t, n, pr.Number)
		require.Equal(t, "PR feature", pr.Title)
		require.Equal(t, "open", pr.State)
		require.True(t, pr.Open())
		require.False(t, pr.Merged)
		require.False(t, pr.Draft)
		require.Equal(t, sha, pr.HeadSHA)
		require.Equal(t, head, pr.HeadRef)
		require.Equal(t, s.tg.Repo, pr.HeadRepo, "a branch of the repository itself: not a fork")
		require.False(t, pr.FromFork())
		require.Equal(t, base, pr.BaseRef)
		require.NotEmpty(t, pr.BaseSHA)
		require.NotEmpty(t, pr.Author)
		require.NotEmpty(t, pr.URL)
		require.False(t, pr.UpdatedAt.IsZero())
		if pr.Mergeable == nil {
			require.Empty(t, pr.MergeCommitSHA, "a merge commit is reported only once mergeability is known")
		}

		// A push is seen at once: nothing is cached.
		sha2 := s.tg.Arrange.Commit(s.tg.Repo, head, map[string]string{s.file("feature.sql"): "select 2"}, "push")
		require.NotEqual(t, sha, sha2)
		s.eventually(s.headIs(n, sha2))
		pr, err = s.tg.Host.PullRequest(s.ctx, s.tg.Repo, n)
		require.NoError(t, err)
		require.Equal(t, sha2, pr.HeadSHA)

		// And so is a close.
		s.tg.Arrange.ClosePR(s.tg.Repo, n)
		pr, err = s.tg.Host.PullRequest(s.ctx, s.tg.Repo, n)
		require.NoError(t, err)
		require.Equal(t, "closed", pr.State)
		require.False(t, pr.Open())
		require.False(t, pr.Merged)
	})

	t.Run("Draft", func(t *testing.T) {
		t.Parallel()
		s := newScope(t, newTarget)
		base, _ := s.base("base")
		n, _, _ := s.pr(base, "draft", true)
		pr, err := s.tg.Host.PullRequest(s.ctx, s.tg.Repo, n)
		require.NoError(t, err)
		require.True(t, pr.Draft)
	})

	t.Run("OpenFilteredByBaseClosedAbsent", func(t *testing.T) {
		t.Parallel()
		s := newScope(t, newTarget)
		base, _ := s.base("base")
		other, _ := s.base("other")
		n1, _, _ := s.pr(base, "one", false)
		n2, _, _ := s.pr(base, "two", false)
		n3, _, _ := s.pr(other, "three", false)
		closed, _, _ := s.pr(base, "closed", false)
		s.tg.Arrange.ClosePR(s.tg.Repo, closed)

		prs, err := s.tg.Host.OpenPullRequests(s.ctx, s.tg.Repo, base)
		require.NoError(t, err)
		require.Equal(t, []int{n1, n2}, numbers(prs))
		for _, pr := range prs {
			require.Equal(t, base, pr.BaseRef)
			require.True(t, pr.Open())
		}
		prs, err = s.tg.Host.OpenPullRequests(s.ctx, s.tg.Repo, other)
		require.NoError(t, err)
		require.Equal(t, []int{n3}, numbers(prs))

		// Every base: ours are among them (a shared live repository has
		// others), the closed one is not.
		prs, err = s.tg.Host.OpenPullRequests(s.ctx, s.tg.Repo, "")
		require.NoError(t, err)
		all := numbers(prs)
		require.True(t, slices.IsSorted(all), "ordered by number: %v", all)
		require.Subset(t, all, []int{n1, n2, n3})
		require.NotContains(t, all, closed)
	})

	t.Run("OpenAcrossPages", func(t *testing.T) {
		t.Parallel()
		s := newScope(t, newTarget)
		s.requireHeavy()
		base, _ := s.base("base")
		other, _ := s.base("other")
		var want []int
		for i := range 105 {
			n, _, _ := s.pr(base, fmt.Sprintf("p%03d", i), false)
			want = append(want, n)
		}
		nOther, _, _ := s.pr(other, "elsewhere", false)
		s.tg.Arrange.ClosePR(s.tg.Repo, want[50])
		closed := want[50]
		want = slices.Delete(want, 50, 51)

		prs, err := s.tg.Host.OpenPullRequests(s.ctx, s.tg.Repo, base)
		require.NoError(t, err)
		require.Equal(t, want, numbers(prs), "104 open PRs on the base, across two pages, by number")
		prs, err = s.tg.Host.OpenPullRequests(s.ctx, s.tg.Repo, "")
		require.NoError(t, err)
		all := numbers(prs)
		require.Subset(t, all, append(slices.Clone(want), nOther))
		require.NotContains(t, all, closed)
	})
}

func numbers(prs []*codehost.PR) []int {
	out := make([]int, 0, len(prs))
	for _, p := range prs {
		out = append(out, p.Number)
	}
	return out
}

func runFiles(t *testing.T, newTarget func(t *testing.T) Target) {
	t.Run("TreeOfACommit", func(t *testing.T) {
		t.Parallel()
		s := newScope(t, newTarget)
		branch := s.branch("files")
		binary := string([]byte{0, 1, 2, 0xff, 0xfe, '\n', '\r', '\n', 0x80})
		first := map[string]string{
			s.file("gapless.yaml"):          "name: test\n",
			s.file("models/a.sql"):          "select 1\n",
			s.file("models/sub/deep/b.sql"): "select 2 -- ünïcode ✓\n",
			s.file("data/blob.bin"):         binary,
		}
		sha1 := s.tg.Arrange.Commit(s.tg.Repo, branch, first, "first")
		sha2 := s.tg.Arrange.Commit(s.tg.Repo, branch, map[string]string{
			s.file("models/a.sql"):          Deleted,
			s.file("models/sub/deep/b.sql"): "select 3\n",
		}, "second")

		fsys1, err := s.tg.Host.Files(s.ctx, s.tg.Repo, sha1)
		require.NoError(t, err)
		requireTree(t, fsys1, s.prefix, first)

		fsys2, err := s.tg.Host.Files(s.ctx, s.tg.Repo, sha2)
		require.NoError(t, err)
		second := map[string]string{
			s.file("gapless.yaml"):          "name: test\n",
			s.file("models/sub/deep/b.sql"): "select 3\n",
			s.file("data/blob.bin"):         binary,
		}
		requireTree(t, fsys2, s.prefix, second)
		_, err = fs.Stat(fsys2, s.file("models/a.sql"))
		require.ErrorIs(t, err, fs.ErrNotExist, "a deleted file is absent")
	})

	t.Run("UnknownCommit", func(t *testing.T) {
		t.Parallel()
		s := newScope(t, newTarget)
		_, err := s.tg.Host.Files(s.ctx, s.tg.Repo, "0123456789abcdef0123456789abcdef01234567")
		require.ErrorIs(t, err, codehost.ErrNotFound)
	})
}

// requireTree checks that fsys holds exactly want under prefix (a shared
// live repository has other files elsewhere), byte for byte, and is a
// well-formed fs.FS.
func requireTree(t *testing.T, fsys fs.FS, prefix string, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	err := fs.WalkDir(fsys, prefix, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			b, err := fs.ReadFile(fsys, p)
			if err != nil {
				return err
			}
			got[p] = string(b)
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, want, got)
	paths := make([]string, 0, len(want))
	for p := range want {
		paths = append(paths, p)
	}
	require.NoError(t, fstest.TestFS(fsys, paths...))
}

func runCheckRuns(t *testing.T, newTarget func(t *testing.T) Target) {
	t.Run("UpsertTwiceIsOneRunUpdatedInPlace", func(t *testing.T) {
		t.Parallel()
		s := newScope(t, newTarget)
		head := s.tg.Arrange.Commit(s.tg.Repo, s.branch("head"), map[string]string{s.file("a.sql"): "select 1"}, "head")
		name := "gapless / " + s.prefix
		first, err := s.tg.Host.UpsertCheckRun(s.ctx, s.tg.Repo, codehost.CheckRun{
			HeadSHA: head, Name: name, ExternalID: "rev-1", DetailsURL: "https://gapless.example/runs/1",
			Status: codehost.StatusInProgress, Title: "Planning", Summary: "planning against prod",
		})
		s.skipIfRefused(err, "create check runs")
		require.NoError(t, err)
		require.NotZero(t, first.ID)
		require.Equal(t, head, first.HeadSHA)
		require.Equal(t, name, first.Name)
		require.Equal(t, codehost.StatusInProgress, first.Status)
		require.Equal(t, codehost.ConclusionNone, first.Conclusion)
		require.Equal(t, "Planning", first.Title)
		require.Equal(t, "planning against prod", first.Summary)
		require.Equal(t, "rev-1", first.ExternalID)
		require.Equal(t, "https://gapless.example/runs/1", first.DetailsURL)

		second, err := s.tg.Host.UpsertCheckRun(s.ctx, s.tg.Repo, codehost.CheckRun{
			HeadSHA: head, Name: name, ExternalID: "rev-2", DetailsURL: "https://gapless.example/runs/2",
			Status: codehost.StatusCompleted, Conclusion: codehost.ConclusionActionRequired,
			Title: "Held", Summary: "held: a deploy is changing prod", Text: "details",
		})
		require.NoError(t, err)
		require.Equal(t, first.ID, second.ID, "updated in place, not created again")
		require.Equal(t, codehost.StatusCompleted, second.Status)
		require.Equal(t, codehost.ConclusionActionRequired, second.Conclusion)
		require.Equal(t, "Held", second.Title)
		require.Equal(t, "held: a deploy is changing prod", second.Summary)
		require.Equal(t, "details", second.Text)
		require.Equal(t, "rev-2", second.ExternalID)
		require.False(t, second.CompletedAt.IsZero(), "a completed run has its completion time")

		runs, err := s.tg.Host.CheckRuns(s.ctx, s.tg.Repo, head)
		require.NoError(t, err)
		named := runsNamed(runs, name)
		require.Len(t, named, 1, "one run per (head, name)")
		got := named[0]
		require.Equal(t, second.ID, got.ID)
		require.Equal(t, codehost.StatusCompleted, got.Status)
		require.Equal(t, codehost.ConclusionActionRequired, got.Conclusion)
		require.Equal(t, "Held", got.Title)
		require.Equal(t, "held: a deploy is changing prod", got.Summary)
		require.Equal(t, "details", got.Text)
		require.Equal(t, "rev-2", got.ExternalID)
		require.Equal(t, "https://gapless.example/runs/2", got.DetailsURL)
		require.NotEmpty(t, got.AppSlug, "a run names the App that made it")
	})

	t.Run("AnotherHeadGetsItsOwnRun", func(t *testing.T) {
		t.Parallel()
		s := newScope(t, newTarget)
		h1 := s.tg.Arrange.Commit(s.tg.Repo, s.branch("head"), map[string]string{s.file("a.sql"): "select 1"}, "one")
		h2 := s.tg.Arrange.Commit(s.tg.Repo, s.branch("head"), map[string]string{s.file("a.sql"): "select 2"}, "two")
		name := "gapless"
		r1, err := s.tg.Host.UpsertCheckRun(s.ctx, s.tg.Repo, codehost.CheckRun{HeadSHA: h1, Name: name,
			Status: codehost.StatusCompleted, Conclusion: codehost.ConclusionSuccess, Title: "ok", Summary: "one"})
		s.skipIfRefused(err, "create check runs")
		require.NoError(t, err)
		r2, err := s.tg.Host.UpsertCheckRun(s.ctx, s.tg.Repo, codehost.CheckRun{HeadSHA: h2, Name: name,
			Status: codehost.StatusCompleted, Conclusion: codehost.ConclusionFailure, Title: "no", Summary: "two"})
		require.NoError(t, err)
		require.NotEqual(t, r1.ID, r2.ID)

		runs1, err := s.tg.Host.CheckRuns(s.ctx, s.tg.Repo, h1)
		require.NoError(t, err)
		runs2, err := s.tg.Host.CheckRuns(s.ctx, s.tg.Repo, h2)
		require.NoError(t, err)
		require.Len(t, runsNamed(runs1, name), 1)
		require.Len(t, runsNamed(runs2, name), 1)
		require.Equal(t, codehost.ConclusionSuccess, runsNamed(runs1, name)[0].Conclusion, "the old head's run is untouched")
		require.Equal(t, codehost.ConclusionFailure, runsNamed(runs2, name)[0].Conclusion)
	})

	t.Run("EveryConclusionReadsBack", func(t *testing.T) {
		t.Parallel()
		s := newScope(t, newTarget)
		head := s.tg.Arrange.Commit(s.tg.Repo, s.branch("head"), map[string]string{s.file("a.sql"): "select 1"}, "head")
		for _, c := range []codehost.Conclusion{
			codehost.ConclusionSuccess, codehost.ConclusionFailure, codehost.ConclusionNeutral,
			codehost.ConclusionCancelled, codehost.ConclusionSkipped, codehost.ConclusionTimedOut,
			codehost.ConclusionActionRequired,
		} {
			name := "gapless / " + string(c)
			got, err := s.tg.Host.UpsertCheckRun(s.ctx, s.tg.Repo, codehost.CheckRun{HeadSHA: head, Name: name,
				Status: codehost.StatusCompleted, Conclusion: c, Title: string(c), Summary: "summary of " + string(c),
				DetailsURL: "https://gapless.example/" + string(c)})
			s.skipIfRefused(err, "create check runs")
			require.NoError(t, err, "conclusion %s", c)
			require.Equal(t, c, got.Conclusion)
		}
		runs, err := s.tg.Host.CheckRuns(s.ctx, s.tg.Repo, head)
		require.NoError(t, err)
		require.Len(t, runs, 7)
		for _, r := range runs {
			require.Equal(t, codehost.StatusCompleted, r.Status)
			require.Equal(t, "gapless / "+string(r.Conclusion), r.Name)
			require.Equal(t, "summary of "+string(r.Conclusion), r.Summary)
		}
	})

	t.Run("SummaryOverTheLimitIsRefusedAndStoresNothing", func(t *testing.T) {
		t.Parallel()
		s := newScope(t, newTarget)
		head := s.tg.Arrange.Commit(s.tg.Repo, s.branch("head"), map[string]string{s.file("a.sql"): "select 1"}, "head")
		long := strings.Repeat("x", codehost.MaxBodyLength+1)
		_, err := s.tg.Host.UpsertCheckRun(s.ctx, s.tg.Repo, codehost.CheckRun{HeadSHA: head, Name: "new",
			Status: codehost.StatusCompleted, Conclusion: codehost.ConclusionSuccess, Title: "t", Summary: long})
		require.ErrorIs(t, err, codehost.ErrInvalid)
		_, err = s.tg.Host.UpsertCheckRun(s.ctx, s.tg.Repo, codehost.CheckRun{HeadSHA: head, Name: "new",
			Status: codehost.StatusCompleted, Conclusion: codehost.ConclusionSuccess, Title: "t", Summary: "s", Text: long})
		require.ErrorIs(t, err, codehost.ErrInvalid, "a text over the limit too")

		kept, err := s.tg.Host.UpsertCheckRun(s.ctx, s.tg.Repo, codehost.CheckRun{HeadSHA: head, Name: "kept",
			Status: codehost.StatusCompleted, Conclusion: codehost.ConclusionFailure, Title: "t", Summary: "short"})
		s.skipIfRefused(err, "create check runs")
		require.NoError(t, err)
		_, err = s.tg.Host.UpsertCheckRun(s.ctx, s.tg.Repo, codehost.CheckRun{HeadSHA: head, Name: "kept",
			Status: codehost.StatusCompleted, Conclusion: codehost.ConclusionSuccess, Title: "t2", Summary: long})
		require.ErrorIs(t, err, codehost.ErrInvalid)

		exact, err := s.tg.Host.UpsertCheckRun(s.ctx, s.tg.Repo, codehost.CheckRun{HeadSHA: head, Name: "exact",
			Status: codehost.StatusCompleted, Conclusion: codehost.ConclusionSuccess, Title: "t", Summary: long[:codehost.MaxBodyLength]})
		require.NoError(t, err, "exactly the limit is accepted")
		require.Len(t, exact.Summary, codehost.MaxBodyLength)

		runs, err := s.tg.Host.CheckRuns(s.ctx, s.tg.Repo, head)
		require.NoError(t, err)
		require.Empty(t, runsNamed(runs, "new"), "a refused run is not stored")
		got := runsNamed(runs, "kept")
		require.Len(t, got, 1)
		require.Equal(t, kept.ID, got[0].ID)
		require.Equal(t, "short", got[0].Summary, "a refused update changes nothing")
		require.Equal(t, codehost.ConclusionFailure, got[0].Conclusion)
	})

	t.Run("CheckRunsReadsEveryPage", func(t *testing.T) {
		t.Parallel()
		s := newScope(t, newTarget)
		s.requireHeavy()
		head := s.tg.Arrange.Commit(s.tg.Repo, s.branch("head"), map[string]string{s.file("a.sql"): "select 1"}, "head")
		var want []string
		for i := range 105 {
			name := fmt.Sprintf("check %03d", i)
			_, err := s.tg.Host.UpsertCheckRun(s.ctx, s.tg.Repo, codehost.CheckRun{HeadSHA: head, Name: name,
				Status: codehost.StatusCompleted, Conclusion: codehost.ConclusionSuccess, Title: name, Summary: name})
			s.skipIfRefused(err, "create check runs")
			require.NoError(t, err)
			want = append(want, name)
		}
		runs, err := s.tg.Host.CheckRuns(s.ctx, s.tg.Repo, head)
		require.NoError(t, err)
		var got []string
		for _, r := range runs {
			got = append(got, r.Name)
		}
		slices.Sort(got)
		require.Equal(t, want, got)
	})
}

func runsNamed(runs []codehost.CheckRun, name string) []codehost.CheckRun {
	var out []codehost.CheckRun
	for _, r := range runs {
		if r.Name == name {
			out = append(out, r)
		}
	}
	return out
}

func runComments(t *testing.T, newTarget func(t *testing.T) Target) {
	t.Run("OldestFirstAcrossPagesAndFoundAtEveryBoundary", func(t *testing.T) {
		t.Parallel()
		s := newScope(t, newTarget)
		s.requireHeavy()
		base, _ := s.base("base")
		n, _, _ := s.pr(base, "busy", false)
		var ids []int64
		for i := 1; i <= 150; i++ {
			body := fmt.Sprintf("comment %d <!-- mark:%d -->", i, i)
			if i == 120 {
				body += " <!-- mark:twice -->"
			}
			if i == 7 {
				body += " <!-- mark:twice -->"
			}
			ids = append(ids, s.tg.Arrange.AddComment(s.tg.Repo, n, "bob", body))
		}
		all, err := s.tg.Host.Comments(s.ctx, s.tg.Repo, n)
		require.NoError(t, err)
		require.Len(t, all, 150)
		for i, c := range all {
			require.Equal(t, ids[i], c.ID, "comment %d in posting order", i+1)
			require.True(t, strings.HasPrefix(c.Body, fmt.Sprintf("comment %d ", i+1)))
			require.NotEmpty(t, c.Author)
			require.False(t, c.CreatedAt.IsZero())
		}
		for _, k := range []int{1, 2, 99, 100, 101, 149, 150} {
			got, err := s.tg.Host.FindComment(s.ctx, s.tg.Repo, n, fmt.Sprintf("<!-- mark:%d -->", k))
			require.NoError(t, err)
			require.NotNil(t, got, "the marker of comment %d is found", k)
			require.Equal(t, ids[k-1], got.ID, "comment %d", k)
		}
		got, err := s.tg.Host.FindComment(s.ctx, s.tg.Repo, n, "<!-- mark:twice -->")
		require.NoError(t, err)
		require.NotNil(t, got)
		require.Equal(t, ids[6], got.ID, "the oldest comment carrying the marker")
		got, err = s.tg.Host.FindComment(s.ctx, s.tg.Repo, n, "<!-- mark:none -->")
		require.NoError(t, err)
		require.Nil(t, got)
	})

	t.Run("EnsureCommentThreeTimesLeavesOne", func(t *testing.T) {
		t.Parallel()
		s := newScope(t, newTarget)
		base, _ := s.base("base")
		n, _, _ := s.pr(base, "sticky", false)
		before := 3
		if s.tg.Heavy {
			before = 120 // the sticky comment lands on the second page
		}
		for i := range before {
			s.tg.Arrange.AddComment(s.tg.Repo, n, "bob", fmt.Sprintf("chatter %d", i))
		}
		marker := "<!-- gapless:summary -->"
		c1, created, err := codehost.EnsureComment(s.ctx, s.tg.Host, s.tg.Repo, n, marker, marker+"\nv1")
		require.NoError(t, err)
		require.True(t, created)
		c2, created, err := codehost.EnsureComment(s.ctx, s.tg.Host, s.tg.Repo, n, marker, marker+"\nv2")
		require.NoError(t, err)
		require.False(t, created, "the sticky comment is found (on any page), not posted again")
		require.Equal(t, c1.ID, c2.ID, "edited in place")
		require.Equal(t, marker+"\nv2", c2.Body)
		c3, created, err := codehost.EnsureComment(s.ctx, s.tg.Host, s.tg.Repo, n, marker, marker+"\nv2")
		require.NoError(t, err)
		require.False(t, created, "the sticky comment is found, not posted again")
		require.Equal(t, c1.ID, c3.ID)

		all, err := s.tg.Host.Comments(s.ctx, s.tg.Repo, n)
		require.NoError(t, err)
		require.Len(t, all, before+1)
		var carrying []codehost.Comment
		for _, c := range all {
			if strings.Contains(c.Body, marker) {
				carrying = append(carrying, c)
			}
		}
		require.Len(t, carrying, 1, "exactly one comment carries the marker")
		require.Equal(t, marker+"\nv2", carrying[0].Body)
	})

	t.Run("CreateEditReact", func(t *testing.T) {
		t.Parallel()
		s := newScope(t, newTarget)
		base, _ := s.base("base")
		n, _, _ := s.pr(base, "talk", false)
		c, err := s.tg.Host.CreateComment(s.ctx, s.tg.Repo, n, "hello")
		require.NoError(t, err)
		require.NotZero(t, c.ID)
		require.Equal(t, "hello", c.Body)
		require.NotEmpty(t, c.Author)
		require.NotEmpty(t, c.URL)
		e, err := s.tg.Host.EditComment(s.ctx, s.tg.Repo, c.ID, "hello again")
		require.NoError(t, err)
		require.Equal(t, c.ID, e.ID)
		require.Equal(t, "hello again", e.Body)
		require.NoError(t, s.tg.Host.React(s.ctx, s.tg.Repo, c.ID, "eyes"))
		require.NoError(t, s.tg.Host.React(s.ctx, s.tg.Repo, c.ID, "eyes"), "reacting twice is no error")
		require.ErrorIs(t, s.tg.Host.React(s.ctx, s.tg.Repo, c.ID, "shrug"), codehost.ErrInvalid)

		all, err := s.tg.Host.Comments(s.ctx, s.tg.Repo, n)
		require.NoError(t, err)
		require.Len(t, all, 1)
		require.Equal(t, "hello again", all[0].Body)
	})

	t.Run("BodiesOverTheLimitAreRefused", func(t *testing.T) {
		t.Parallel()
		s := newScope(t, newTarget)
		base, _ := s.base("base")
		n, _, _ := s.pr(base, "long", false)
		long := strings.Repeat("y", codehost.MaxBodyLength+1)
		_, err := s.tg.Host.CreateComment(s.ctx, s.tg.Repo, n, long)
		require.ErrorIs(t, err, codehost.ErrInvalid)
		c, err := s.tg.Host.CreateComment(s.ctx, s.tg.Repo, n, "short")
		require.NoError(t, err)
		_, err = s.tg.Host.EditComment(s.ctx, s.tg.Repo, c.ID, long)
		require.ErrorIs(t, err, codehost.ErrInvalid)
		all, err := s.tg.Host.Comments(s.ctx, s.tg.Repo, n)
		require.NoError(t, err)
		require.Len(t, all, 1, "the refused comment is not stored")
		require.Equal(t, "short", all[0].Body, "the refused edit changes nothing")
		exact, err := s.tg.Host.CreateComment(s.ctx, s.tg.Repo, n, long[:codehost.MaxBodyLength])
		require.NoError(t, err, "exactly the limit is accepted")
		require.Len(t, exact.Body, codehost.MaxBodyLength)
	})
}

func runPermission(t *testing.T, newTarget func(t *testing.T) Target) {
	t.Run("WhoCanWrite", func(t *testing.T) {
		t.Parallel()
		s := newScope(t, newTarget)
		cases := []struct {
			user string
			p    codehost.Permission
		}{
			{"ann-admin", codehost.PermissionAdmin},
			{"mo-maintain", codehost.PermissionMaintain},
			{"wes-write", codehost.PermissionWrite},
			{"tri-triage", codehost.PermissionTriage},
			{"ray-read", codehost.PermissionRead},
		}
		for _, c := range cases {
			s.tg.Arrange.SetPermission(s.tg.Repo, c.user, c.p)
		}
		for _, c := range cases {
			got, err := s.tg.Host.Permission(s.ctx, s.tg.Repo, c.user)
			require.NoError(t, err, c.user)
			require.Equal(t, c.p, got, c.user)
			require.Equal(t, c.p == codehost.PermissionAdmin || c.p == codehost.PermissionMaintain || c.p == codehost.PermissionWrite,
				got.CanWrite(), c.user)
		}
	})

	// GitHub answers 404 for a login that is no user (and, on some
	// setups, for a user who is no collaborator): a Host reports
	// PermissionNone, no error, as long as the repository exists.
	t.Run("UnknownUserHasNone", func(t *testing.T) {
		t.Parallel()
		s := newScope(t, newTarget)
		got, err := s.tg.Host.Permission(s.ctx, s.tg.Repo, "no-such-user-"+s.prefix[len(s.prefix)-8:])
		require.NoError(t, err)
		require.Equal(t, codehost.PermissionNone, got)
		require.False(t, got.CanWrite())
	})
}

func runMerge(t *testing.T, newTarget func(t *testing.T) Target) {
	t.Run("PinnedToTheHead", func(t *testing.T) {
		t.Parallel()
		s := newScope(t, newTarget)
		base, baseSHA := s.base("base")
		n, head, stale := s.pr(base, "ship", false)
		fresh := s.tg.Arrange.Commit(s.tg.Repo, head, map[string]string{s.file("ship.sql"): "select 2"}, "a push after /deploy")
		s.eventually(s.headIs(n, fresh))

		_, err := s.tg.Host.Merge(s.ctx, s.tg.Repo, n, stale, codehost.MergeSquash)
		s.skipIfRefused(err, "merge pull requests")
		require.ErrorIs(t, err, codehost.ErrConflict, "a head that moved is a conflict")
		pr, err := s.tg.Host.PullRequest(s.ctx, s.tg.Repo, n)
		require.NoError(t, err)
		require.True(t, pr.Open(), "nothing merged")
		require.False(t, pr.Merged)
		fsys, err := s.tg.Host.Files(s.ctx, s.tg.Repo, pr.BaseSHA)
		require.NoError(t, err)
		_, err = fs.Stat(fsys, s.file("ship.sql"))
		require.ErrorIs(t, err, fs.ErrNotExist, "the base is untouched")
		require.Equal(t, baseSHA, pr.BaseSHA)

		s.eventually(func() bool {
			pr, err := s.tg.Host.PullRequest(s.ctx, s.tg.Repo, n)
			return err == nil && pr.Mergeable != nil
		})
		sha, err := s.tg.Host.Merge(s.ctx, s.tg.Repo, n, fresh, codehost.MergeSquash)
		require.NoError(t, err)
		require.NotEmpty(t, sha)
		pr, err = s.tg.Host.PullRequest(s.ctx, s.tg.Repo, n)
		require.NoError(t, err)
		require.True(t, pr.Merged)
		require.Equal(t, "closed", pr.State)
		fsys, err = s.tg.Host.Files(s.ctx, s.tg.Repo, sha)
		require.NoError(t, err)
		b, err := fs.ReadFile(fsys, s.file("ship.sql"))
		require.NoError(t, err)
		require.Equal(t, "select 2", string(b), "the merge carries the pinned head")

		// A merged pull request cannot be merged again: GitHub answers 405
		// "Pull Request is not mergeable".
		_, err = s.tg.Host.Merge(s.ctx, s.tg.Repo, n, fresh, codehost.MergeSquash)
		require.ErrorIs(t, err, codehost.ErrNotMergeable)
	})

	t.Run("ClosedIsNotMergeable", func(t *testing.T) {
		t.Parallel()
		s := newScope(t, newTarget)
		base, _ := s.base("base")
		n, _, sha := s.pr(base, "closed", false)
		s.tg.Arrange.ClosePR(s.tg.Repo, n)
		_, err := s.tg.Host.Merge(s.ctx, s.tg.Repo, n, sha, codehost.MergeMerge)
		s.skipIfRefused(err, "merge pull requests")
		require.ErrorIs(t, err, codehost.ErrNotMergeable)
	})
}

func runRequiredChecks(t *testing.T, newTarget func(t *testing.T) Target) {
	t.Run("NoneOnAnUnprotectedBranch", func(t *testing.T) {
		t.Parallel()
		s := newScope(t, newTarget)
		base, _ := s.base("free")
		got, err := s.tg.Host.RequiredChecks(s.ctx, s.tg.Repo, base)
		s.skipIfRefused(err, "read branch protection")
		require.NoError(t, err)
		require.Empty(t, got)
	})
	t.Run("TheConfiguredNames", func(t *testing.T) {
		t.Parallel()
		s := newScope(t, newTarget)
		base, _ := s.base("guarded")
		s.tg.Arrange.SetRequiredChecks(s.tg.Repo, base, "lint", "gapless")
		got, err := s.tg.Host.RequiredChecks(s.ctx, s.tg.Repo, base)
		s.skipIfRefused(err, "read branch protection")
		require.NoError(t, err)
		slices.Sort(got)
		require.Equal(t, []string{"gapless", "lint"}, got)
	})
}

func runErrors(t *testing.T, newTarget func(t *testing.T) Target) {
	t.Run("UnknownPullRequest", func(t *testing.T) {
		t.Parallel()
		s := newScope(t, newTarget)
		_, err := s.tg.Host.PullRequest(s.ctx, s.tg.Repo, 987654)
		require.ErrorIs(t, err, codehost.ErrNotFound)
		_, err = s.tg.Host.Merge(s.ctx, s.tg.Repo, 987654, "0123456789abcdef0123456789abcdef01234567", codehost.MergeMerge)
		require.ErrorIs(t, err, codehost.ErrNotFound)
	})
	t.Run("UnknownRepository", func(t *testing.T) {
		t.Parallel()
		s := newScope(t, newTarget)
		owner, _, _ := strings.Cut(s.tg.Repo, "/")
		missing := owner + "/no-such-repo-" + s.prefix[len(s.prefix)-8:]
		_, err := s.tg.Host.PullRequest(s.ctx, missing, 1)
		require.ErrorIs(t, err, codehost.ErrNotFound)
		_, err = s.tg.Host.OpenPullRequests(s.ctx, missing, "")
		require.ErrorIs(t, err, codehost.ErrNotFound)
		_, err = s.tg.Host.Comments(s.ctx, missing, 1)
		require.ErrorIs(t, err, codehost.ErrNotFound)
		_, err = s.tg.Host.Permission(s.ctx, missing, "someone")
		require.ErrorIs(t, err, codehost.ErrNotFound)
	})
	t.Run("UnknownComment", func(t *testing.T) {
		t.Parallel()
		s := newScope(t, newTarget)
		_, err := s.tg.Host.EditComment(s.ctx, s.tg.Repo, 987654321, "body")
		require.ErrorIs(t, err, codehost.ErrNotFound)
	})
}

func runWire(t *testing.T, newTarget func(t *testing.T) Target) {
	// Finding 2 of the seed's review: the per-issue comments endpoint is
	// oldest first and ignores sort and direction, so reading "the newest
	// page" with sort=created&direction=desc reads the oldest one.
	t.Run("IssueCommentsIgnoreSortAndDirection", func(t *testing.T) {
		t.Parallel()
		s := newScope(t, newTarget)
		if s.tg.RawHTTP == nil {
			t.Skip("the target gives no raw HTTP access to its API")
		}
		base, _ := s.base("base")
		n, _, _ := s.pr(base, "wire", false)
		var ids []int64
		for i := range 5 {
			ids = append(ids, s.tg.Arrange.AddComment(s.tg.Repo, n, "bob", fmt.Sprintf("c%d", i)))
		}
		apiBase, client := s.tg.RawHTTP()
		u := fmt.Sprintf("%srepos/%s/issues/%d/comments?sort=created&direction=desc&per_page=2", apiBase, s.tg.Repo, n)
		var got []int64
		pagesRead := 0
		for u != "" {
			req, err := http.NewRequestWithContext(s.ctx, http.MethodGet, u, nil)
			require.NoError(t, err)
			req.Header.Set("Accept", "application/vnd.github+json")
			resp, err := client.Do(req)
			require.NoError(t, err)
			var page []struct {
				ID int64 `json:"id"`
			}
			err = json.NewDecoder(resp.Body).Decode(&page)
			require.NoError(t, resp.Body.Close())
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.LessOrEqual(t, len(page), 2, "per_page is honoured")
			for _, c := range page {
				got = append(got, c.ID)
			}
			pagesRead++
			u = nextLink(resp.Header.Get("Link"))
			if u != "" {
				require.Contains(t, u, "per_page=2", "the next link keeps per_page")
				parsed, err := url.Parse(u)
				require.NoError(t, err)
				require.NotEmpty(t, parsed.Query().Get("page"))
			}
			require.LessOrEqual(t, pagesRead, 10)
		}
		require.Equal(t, 3, pagesRead, "5 comments, 2 a page")
		require.Equal(t, ids, got, "ascending by id despite direction=desc")
	})
	t.Run("PerPageIsCappedAt100", func(t *testing.T) {
		t.Parallel()
		s := newScope(t, newTarget)
		if s.tg.RawHTTP == nil {
			t.Skip("the target gives no raw HTTP access to its API")
		}
		s.requireHeavy()
		base, _ := s.base("base")
		n, _, _ := s.pr(base, "cap", false)
		for i := range 101 {
			s.tg.Arrange.AddComment(s.tg.Repo, n, "bob", fmt.Sprintf("c%d", i))
		}
		apiBase, client := s.tg.RawHTTP()
		req, err := http.NewRequestWithContext(s.ctx, http.MethodGet,
			fmt.Sprintf("%srepos/%s/issues/%d/comments?per_page=500", apiBase, s.tg.Repo, n), nil)
		require.NoError(t, err)
		resp, err := client.Do(req)
		require.NoError(t, err)
		var page []json.RawMessage
		err = json.NewDecoder(resp.Body).Decode(&page)
		require.NoError(t, resp.Body.Close())
		require.NoError(t, err)
		require.Len(t, page, 100)
		require.NotEmpty(t, nextLink(resp.Header.Get("Link")))
	})
}

// nextLink returns the rel="next" URL of a Link header, or "".
func nextLink(h string) string {
	for _, part := range strings.Split(h, ",") {
		segs := strings.Split(part, ";")
		if len(segs) < 2 {
			continue
		}
		for _, p := range segs[1:] {
			if strings.TrimSpace(p) == `rel="next"` {
				return strings.Trim(strings.TrimSpace(segs[0]), "<>")
			}
		}
	}
	return ""
}
