package github_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/codehost"
	"github.com/gapless-dev/gapless/codehost/codehosttest"
	"github.com/gapless-dev/gapless/codehost/github"
	"github.com/gapless-dev/gapless/codehost/githubfake"
)

// fakeArranger arranges cases through the fake's control API.
type fakeArranger struct{ f *githubfake.Fake }

func (a fakeArranger) Commit(repo, branch string, files map[string]string, message string) string {
	mapped := make(map[string]string, len(files))
	for p, c := range files {
		if c == codehosttest.Deleted {
			c = "" // the fake's Commit deletes a file given empty content
		}
		mapped[p] = c
	}
	return a.f.Commit(repo, branch, mapped, message)
}

func (a fakeArranger) OpenPR(repo string, s codehosttest.PRSpec) int {
	return a.f.OpenPR(repo, githubfake.PRSpec{Title: s.Title, Author: s.Author, Head: s.Head, Base: s.Base, Draft: s.Draft})
}

func (a fakeArranger) AddComment(repo string, n int, author, body string) int64 {
	return a.f.AddComment(repo, n, author, body)
}

func (a fakeArranger) SetPermission(repo, user string, p codehost.Permission) {
	a.f.SetPermission(repo, user, p)
}

func (a fakeArranger) SetRequiredChecks(repo, branch string, names ...string) {
	a.f.SetRequiredChecks(repo, branch, names...)
}

func (a fakeArranger) ClosePR(repo string, n int) { a.f.ClosePR(repo, n) }

// tokenTransport sends a fixed token.
type tokenTransport struct{ token string }

func (t tokenTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "token "+t.token)
	return http.DefaultTransport.RoundTrip(r)
}

// recordingWait records the waits asked for and returns at once.
type recordingWait struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (w *recordingWait) wait(ctx context.Context, d time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.waits = append(w.waits, d)
	return ctx.Err()
}

func (w *recordingWait) got() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Duration(nil), w.waits...)
}

const testRepo = "acme/analytics"

// newFake starts a fake GitHub on a fake clock with testRepo.
func newFake(t *testing.T) (*githubfake.Fake, *clockwork.FakeClock) {
	t.Helper()
	clock := clockwork.NewFakeClock()
	f := githubfake.NewT(t, githubfake.Options{Clock: clock})
	f.CreateRepo(testRepo, "main")
	return f, clock
}

// newAppClient is a Client authenticated as the fake's App.
func newAppClient(t *testing.T, f *githubfake.Fake, clock clockwork.Clock, mod func(*github.Config)) *github.Client {
	t.Helper()
	w := &recordingWait{}
	cfg := github.Config{APIURL: f.URL(), AppID: f.AppID(), PrivateKey: f.AppPrivateKeyPEM(), Clock: clock, Wait: w.wait}
	if mod != nil {
		mod(&cfg)
	}
	c, err := github.New(cfg)
	require.NoError(t, err)
	return c
}

func fakeTarget(t *testing.T, token bool) codehosttest.Target {
	f, clock := newFake(t)
	var host *github.Client
	if token {
		w := &recordingWait{}
		c, err := github.New(github.Config{APIURL: f.URL(), Token: f.PersonalToken("ci-bot"), Clock: clock, Wait: w.wait})
		require.NoError(t, err)
		host = c
	} else {
		host = newAppClient(t, f, clock, nil)
	}
	return codehosttest.Target{
		// Both runs take the page-heavy cases: no case of the suite skips
		// against the fake.
		Host: host, Repo: testRepo, DefaultBranch: "main", Arrange: fakeArranger{f}, Heavy: true,
		RawHTTP: func() (string, *http.Client) {
			return f.URL(), &http.Client{Transport: tokenTransport{f.PersonalToken("reader")}}
		},
	}
}

// TestConformance runs the code-host suite on the client (as a GitHub App)
// talking to the fake GitHub.
func TestConformance(t *testing.T) {
	t.Parallel()
	codehosttest.Run(t, func(t *testing.T) codehosttest.Target { return fakeTarget(t, false) })
}

// TestConformanceToken runs it again with a plain token (GitHub Actions'
// GITHUB_TOKEN): its check runs are the github-actions App's.
func TestConformanceToken(t *testing.T) {
	t.Parallel()
	codehosttest.Run(t, func(t *testing.T) codehosttest.Target { return fakeTarget(t, true) })
}
