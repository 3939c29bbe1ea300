package github_test

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	gh "github.com/google/go-github/v88/github"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/codehost"
	"github.com/gapless-dev/gapless/codehost/codehosttest"
	"github.com/gapless-dev/gapless/codehost/github"
)

// The live suite's settings. GAPLESS_TEST_GITHUB_REPO is a scratch
// repository (owner/name, with at least one commit on its default
// branch) the token may write to: every case makes its own branches and
// files there and deletes its branches when it ends.
const (
	envLiveToken  = "GAPLESS_TEST_GITHUB_TOKEN"
	envLiveRepo   = "GAPLESS_TEST_GITHUB_REPO"
	envLiveAPIURL = "GAPLESS_TEST_GITHUB_API_URL" // optional: GitHub Enterprise Server's API
	envLiveHeavy  = "GAPLESS_TEST_GITHUB_HEAVY"   // optional: "1" runs the cases with over 100 PRs or comments
)

// TestConformanceLive runs the code-host suite against real GitHub when a
// test token and a scratch repository are configured; otherwise it skips
// naming the variables that are missing (under CI=true too: CI has no
// GitHub token, and issue 15 allows this skip).
//
// Check runs need a GitHub App's installation token or Actions'
// GITHUB_TOKEN (a personal token is refused), permissions cannot be
// arranged without a user accepting an invitation, and branch protection
// needs admin: those cases skip saying why when the token cannot arrange
// them.
func TestConformanceLive(t *testing.T) {
	token, repo := os.Getenv(envLiveToken), os.Getenv(envLiveRepo)
	var missing []string
	if token == "" {
		missing = append(missing, envLiveToken)
	}
	if repo == "" {
		missing = append(missing, envLiveRepo+" (a scratch repository, owner/name)")
	}
	if len(missing) > 0 {
		t.Skipf("live GitHub conformance needs %s; set them to run it", strings.Join(missing, " and "))
	}
	apiURL := os.Getenv(envLiveAPIURL)
	if apiURL == "" {
		apiURL = github.DefaultAPIURL
	}
	host, err := github.New(github.Config{APIURL: apiURL, Token: token})
	require.NoError(t, err)
	admin, err := gh.NewClient(gh.WithAuthToken(token), gh.WithURLs(&apiURL, &apiURL))
	require.NoError(t, err)
	owner, name, ok := strings.Cut(repo, "/")
	require.True(t, ok, "%s must be owner/name", envLiveRepo)
	r, _, err := admin.Repositories.Get(t.Context(), owner, name)
	require.NoError(t, err, "reading the scratch repository %s", repo)
	base := apiURL
	if !strings.HasSuffix(base, "/") {
		base += "/"
	}

	codehosttest.Run(t, func(t *testing.T) codehosttest.Target {
		return codehosttest.Target{
			Host: host, Repo: repo, DefaultBranch: r.GetDefaultBranch(),
			Arrange: &liveArranger{t: t, gh: admin, owner: owner, name: name, defaultBranch: r.GetDefaultBranch()},
			RawHTTP: func() (string, *http.Client) {
				return base, &http.Client{Transport: tokenTransport{token}}
			},
			Heavy: os.Getenv(envLiveHeavy) == "1",
			Live:  true,
		}
	})
}

// liveArranger arranges a case on a live repository with go-github: commits
// through the git data API (blobs, trees, commits, refs: one commit for many
// files, deletions and binary content included), pull requests, comments
// and branch protection. The branches it makes are deleted when the case
// ends (which closes their pull requests).
type liveArranger struct {
	t             *testing.T
	gh            *gh.Client
	owner, name   string
	defaultBranch string

	mu        sync.Mutex
	branches  []string
	protected []string
}

func (a *liveArranger) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	a.t.Cleanup(cancel)
	return ctx
}

func (a *liveArranger) Commit(repo, branch string, files map[string]string, message string) string {
	a.t.Helper()
	ctx := a.ctx()
	ref, resp, err := a.gh.Git.GetRef(ctx, a.owner, a.name, "heads/"+branch)
	exists := err == nil
	if err != nil && (resp == nil || resp.StatusCode != http.StatusNotFound) {
		require.NoError(a.t, err, "reading branch %s", branch)
	}
	if !exists {
		ref, _, err = a.gh.Git.GetRef(ctx, a.owner, a.name, "heads/"+a.defaultBranch)
		require.NoError(a.t, err, "reading the default branch")
	}
	parent := ref.GetObject().GetSHA()
	pc, _, err := a.gh.Git.GetCommit(ctx, a.owner, a.name, parent)
	require.NoError(a.t, err)

	var entries []*gh.TreeEntry
	for path, content := range files {
		e := &gh.TreeEntry{Path: gh.Ptr(path), Mode: gh.Ptr("100644"), Type: gh.Ptr("blob")}
		switch {
		case content == codehosttest.Deleted:
			// SHA and Content nil: go-github sends "sha": null, a deletion.
		case utf8.ValidString(content):
			e.Content = gh.Ptr(content)
		default:
			blob, _, err := a.gh.Git.CreateBlob(ctx, a.owner, a.name, gh.Blob{
				Content: gh.Ptr(base64.StdEncoding.EncodeToString([]byte(content))), Encoding: gh.Ptr("base64")})
			require.NoError(a.t, err, "creating a blob for %s", path)
			e.SHA = blob.SHA
		}
		entries = append(entries, e)
	}
	tree, _, err := a.gh.Git.CreateTree(ctx, a.owner, a.name, pc.GetTree().GetSHA(), entries)
	require.NoError(a.t, err)
	c, _, err := a.gh.Git.CreateCommit(ctx, a.owner, a.name, gh.Commit{
		Message: gh.Ptr(message), Tree: tree, Parents: []*gh.Commit{{SHA: gh.Ptr(parent)}}}, nil)
	require.NoError(a.t, err)
	if exists {
		_, _, err = a.gh.Git.UpdateRef(ctx, a.owner, a.name, "heads/"+branch, gh.UpdateRef{SHA: c.GetSHA()})
		require.NoError(a.t, err)
		return c.GetSHA()
	}
	_, _, err = a.gh.Git.CreateRef(ctx, a.owner, a.name, gh.CreateRef{Ref: "refs/heads/" + branch, SHA: c.GetSHA()})
	require.NoError(a.t, err)
	a.mu.Lock()
	first := len(a.branches) == 0
	a.branches = append(a.branches, branch)
	a.mu.Unlock()
	if first {
		a.t.Cleanup(a.cleanup)
	}
	return c.GetSHA()
}

// cleanup removes the case's protections and branches (their pull
// requests close with them).
func (a *liveArranger) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, b := range a.protected {
		if _, err := a.gh.Repositories.RemoveBranchProtection(ctx, a.owner, a.name, b); err != nil {
			a.t.Logf("removing the protection of %s: %v", b, err)
		}
	}
	for _, b := range a.branches {
		if _, err := a.gh.Git.DeleteRef(ctx, a.owner, a.name, "heads/"+b); err != nil {
			a.t.Logf("deleting branch %s: %v", b, err)
		}
	}
}

func (a *liveArranger) OpenPR(repo string, s codehosttest.PRSpec) int {
	a.t.Helper()
	base := s.Base
	if base == "" {
		base = a.defaultBranch
	}
	pr, _, err := a.gh.PullRequests.Create(a.ctx(), a.owner, a.name, &gh.NewPullRequest{
		Title: gh.Ptr(s.Title), Head: gh.Ptr(s.Head), Base: gh.Ptr(base), Draft: gh.Ptr(s.Draft),
		Body: gh.Ptr("gapless codehosttest (live); deleted when the case ends"),
	})
	var er *gh.ErrorResponse
	if s.Draft && errors.As(err, &er) && er.Response.StatusCode == http.StatusUnprocessableEntity {
		a.t.Skipf("the scratch repository cannot have draft pull requests (%s): drafts need a public repository or a paid plan", er.Message)
	}
	require.NoError(a.t, err, "opening a pull request %s <- %s", base, s.Head)
	return pr.GetNumber()
}

func (a *liveArranger) AddComment(repo string, n int, author, body string) int64 {
	a.t.Helper()
	c, _, err := a.gh.Issues.CreateComment(a.ctx(), a.owner, a.name, n, &gh.IssueComment{Body: gh.Ptr(body)})
	require.NoError(a.t, err)
	return c.GetID()
}

func (a *liveArranger) SetPermission(repo, user string, p codehost.Permission) {
	a.t.Skipf("live: giving %s %s on %s needs an invitation the user accepts; permissions are checked on the fake", user, p, repo)
}

func (a *liveArranger) SetRequiredChecks(repo, branch string, names ...string) {
	a.t.Helper()
	_, resp, err := a.gh.Repositories.UpdateBranchProtection(a.ctx(), a.owner, a.name, branch, &gh.ProtectionRequest{
		RequiredStatusChecks: &gh.RequiredStatusChecks{Strict: false, Contexts: &names},
	})
	if err != nil && resp != nil && (resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusNotFound) {
		a.t.Skipf("live: the token may not protect %s (%d: %v): branch protection needs admin on the repository (and, for a private one, a plan that has it)", branch, resp.StatusCode, err)
	}
	require.NoError(a.t, err)
	a.mu.Lock()
	a.protected = append(a.protected, branch)
	a.mu.Unlock()
}

func (a *liveArranger) ClosePR(repo string, n int) {
	a.t.Helper()
	_, _, err := a.gh.PullRequests.Edit(a.ctx(), a.owner, a.name, n, &gh.PullRequest{State: gh.Ptr("closed")})
	require.NoError(a.t, err)
}
