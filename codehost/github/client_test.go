package github_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/codehost"
	"github.com/gapless-dev/gapless/codehost/github"
	"github.com/gapless-dev/gapless/codehost/githubfake"
)

// observed collects Observe's calls.
type observed struct {
	mu    sync.Mutex
	calls []github.Call
}

func (o *observed) observe(c github.Call) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, c)
}

func (o *observed) of(route string) []github.Call {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []github.Call
	for _, c := range o.calls {
		if c.Route == route {
			out = append(out, c)
		}
	}
	return out
}

func statuses(reqs []githubfake.Request) []int {
	out := make([]int, 0, len(reqs))
	for _, r := range reqs {
		out = append(out, r.Status)
	}
	return out
}

// openPR arranges one pull request on testRepo and returns its number and
// head.
func openPR(t *testing.T, f *githubfake.Fake) (int, string) {
	t.Helper()
	sha := f.Commit(testRepo, "feature", map[string]string{"models/a.sql": "select 1"}, "feature")
	n := f.OpenPR(testRepo, githubfake.PRSpec{Title: "Feature", Author: "alice", Head: "feature", Base: "main"})
	return n, sha
}

// Scenario: GitHub answers 502 three times, then 200: one call, four
// requests in the fake's log, three waits growing from BaseDelay, and four
// observations.
func TestRetriesServerErrorsThenSucceeds(t *testing.T) {
	t.Parallel()
	f, clock := newFake(t)
	n, sha := openPR(t, f)
	w := &recordingWait{}
	obs := &observed{}
	c := newAppClient(t, f, clock, func(cfg *github.Config) { cfg.Wait = w.wait; cfg.Observe = obs.observe })

	f.Fail(githubfake.RouteGetPull, http.StatusBadGateway, 3)
	pr, err := c.PullRequest(t.Context(), testRepo, n)
	require.NoError(t, err)
	require.Equal(t, sha, pr.HeadSHA)
	require.Equal(t, []int{502, 502, 502, 200}, statuses(f.Requests(githubfake.RouteGetPull)))
	require.Equal(t, []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second}, w.got())

	calls := obs.of(github.RoutePull)
	require.Len(t, calls, 4)
	for i, call := range calls {
		require.Equal(t, i+1, call.Attempt)
		require.Equal(t, []int{502, 502, 502, 200}[i], call.Status)
	}
	require.GreaterOrEqual(t, calls[3].RateRemaining, 0, "the rate-limit headers are observed")
	require.Positive(t, calls[3].RateLimit)
	require.Len(t, obs.of(github.RouteInstallationToken), 1, "the token fetch is observed too")
}

// Scenario: a secondary rate limit (429 or 403 with Retry-After: 1) is
// waited out as GitHub asks, through the injected Wait.
func TestRetryAfterIsHonoured(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusTooManyRequests, http.StatusForbidden} {
		f, clock := newFake(t)
		n, _ := openPR(t, f)
		w := &recordingWait{}
		c := newAppClient(t, f, clock, func(cfg *github.Config) { cfg.Wait = w.wait })
		f.Fail(githubfake.RouteCreateComment, status, 1)
		_, err := c.CreateComment(t.Context(), testRepo, n, "hello")
		require.NoError(t, err, "status %d", status)
		require.Equal(t, []time.Duration{time.Second}, w.got(), "status %d", status)
		require.Equal(t, []int{status, 201}, statuses(f.Requests(githubfake.RouteCreateComment)))
		require.Len(t, f.Comments(testRepo, n), 1, "the replayed POST carried its body, once")
	}
}

// Scenario: a 404 is an answer, not a failure: one request, no wait.
func TestNotFoundIsNotRetried(t *testing.T) {
	t.Parallel()
	f, clock := newFake(t)
	w := &recordingWait{}
	c := newAppClient(t, f, clock, func(cfg *github.Config) { cfg.Wait = w.wait })
	_, err := c.PullRequest(t.Context(), testRepo, 42)
	require.ErrorIs(t, err, codehost.ErrNotFound)
	require.Len(t, f.Requests(githubfake.RouteGetPull), 1)
	require.Empty(t, w.got())

	var e *github.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, github.RoutePull, e.Route)
	require.Equal(t, testRepo, e.Repo)
	require.Equal(t, 404, e.Status)
	require.Contains(t, err.Error(), "GET /repos/{owner}/{repo}/pulls/{n} on acme/analytics: 404")

	// Neither is a 422, or a 403 that is no rate limit.
	n, _ := openPR(t, f)
	f.Fail(githubfake.RouteCreateComment, http.StatusUnprocessableEntity, 1)
	_, err = c.CreateComment(t.Context(), testRepo, n, "x")
	require.ErrorIs(t, err, codehost.ErrInvalid)
	require.Len(t, f.Requests(githubfake.RouteCreateComment), 1)
	require.Empty(t, w.got())
}

// Scenario: GitHub is down for longer than MaxAttempts: the call gives up
// after MaxAttempts requests with an error wrapping ErrUnavailable that
// names the route, the repository and the status.
func TestDownLongerThanMaxAttemptsIsUnavailable(t *testing.T) {
	t.Parallel()
	f, clock := newFake(t)
	n, _ := openPR(t, f)
	w := &recordingWait{}
	c := newAppClient(t, f, clock, func(cfg *github.Config) { cfg.Wait = w.wait })
	_, err := c.PullRequest(t.Context(), testRepo, n) // fetch the token first
	require.NoError(t, err)

	f.Down(true)
	_, err = c.PullRequest(t.Context(), testRepo, n)
	require.ErrorIs(t, err, codehost.ErrUnavailable)
	require.Contains(t, err.Error(), "GET /repos/{owner}/{repo}/pulls/{n} on acme/analytics: 503")
	require.Equal(t, []int{200, 503, 503, 503, 503, 503, 503}, statuses(f.Requests(githubfake.RouteGetPull)))
	require.Equal(t, []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}, w.got())

	f.Down(false)
	_, err = c.PullRequest(t.Context(), testRepo, n)
	require.NoError(t, err, "back up, the next call succeeds")
}

// Scenario: the caller's context ends while the client waits to retry: the
// call ends with the context's error, no further request.
func TestCancelledWhileWaitingStops(t *testing.T) {
	t.Parallel()
	f, clock := newFake(t)
	n, _ := openPR(t, f)
	ctx, cancel := context.WithCancel(t.Context())
	c := newAppClient(t, f, clock, func(cfg *github.Config) {
		cfg.Wait = func(ctx context.Context, _ time.Duration) error { cancel(); return ctx.Err() }
	})
	_, err := c.PullRequest(ctx, testRepo, n) // the token
	require.NoError(t, err)
	f.Fail(githubfake.RouteGetPull, http.StatusInternalServerError, 5)
	before := len(f.Requests(githubfake.RouteGetPull))
	_, err = c.PullRequest(ctx, testRepo, n)
	require.ErrorIs(t, err, context.Canceled)
	require.Len(t, f.Requests(githubfake.RouteGetPull), before+1)
}

// Scenario: a primary rate limit (403, X-RateLimit-Remaining: 0) that
// resets within MaxDelay is waited out until its reset; one that resets
// later is not waited for: ErrUnavailable at once, with the wait it asks.
func TestPrimaryRateLimit(t *testing.T) {
	t.Parallel()
	t.Run("ResetTooFar", func(t *testing.T) {
		t.Parallel()
		f, clock := newFake(t)
		n, _ := openPR(t, f)
		w := &recordingWait{}
		c := newAppClient(t, f, clock, func(cfg *github.Config) { cfg.Wait = w.wait })
		_, err := c.PullRequest(t.Context(), testRepo, n)
		require.NoError(t, err)
		f.SetRateLimit(1) // the installation has used its one request
		_, err = c.PullRequest(t.Context(), testRepo, n)
		require.ErrorIs(t, err, codehost.ErrUnavailable)
		require.NotErrorIs(t, err, codehost.ErrUnauthorized, "a rate limit is no refusal")
		var e *github.Error
		require.ErrorAs(t, err, &e)
		require.Equal(t, 403, e.Status)
		require.Greater(t, e.RetryAfter, 50*time.Minute, "the reset an hour away is reported")
		require.Empty(t, w.got(), "an hour is not waited for")
		require.Equal(t, []int{200, 403}, statuses(f.Requests(githubfake.RouteGetPull)))
	})
	t.Run("ResetWithinMaxDelay", func(t *testing.T) {
		t.Parallel()
		f, clock := newFake(t)
		n, _ := openPR(t, f)
		var waits []time.Duration
		c := newAppClient(t, f, clock, func(cfg *github.Config) {
			cfg.Wait = func(_ context.Context, d time.Duration) error {
				waits = append(waits, d)
				clock.Advance(d)
				return nil
			}
		})
		_, err := c.PullRequest(t.Context(), testRepo, n)
		require.NoError(t, err)
		// 10 s before the window resets: the token is refreshed, and the
		// installation's second request of the window is its last.
		clock.Advance(time.Hour - 10*time.Second)
		_, err = c.PullRequest(t.Context(), testRepo, n)
		require.NoError(t, err)
		f.SetRateLimit(2)
		_, err = c.PullRequest(t.Context(), testRepo, n)
		require.NoError(t, err)
		require.Len(t, waits, 1)
		require.InDelta(t, (10 * time.Second).Seconds(), waits[0].Seconds(), 1, "waited until the reset")
		require.Equal(t, []int{200, 200, 403, 200}, statuses(f.Requests(githubfake.RouteGetPull)))
	})
}

// Scenario: GitHub takes the request but sends no headers within
// RequestTimeout (on the fake clock): the attempt is abandoned and
// retried, and the retry, answered at once, succeeds.
func TestSlowAnswerTimesOutAndIsRetried(t *testing.T) {
	t.Parallel()
	f, clock := newFake(t)
	n, sha := openPR(t, f)
	var waits []time.Duration
	obs := &observed{}
	c := newAppClient(t, f, clock, func(cfg *github.Config) {
		cfg.RequestTimeout = 30 * time.Second
		cfg.Observe = obs.observe
		cfg.Wait = func(_ context.Context, d time.Duration) error {
			waits = append(waits, d)
			f.Latency(githubfake.RouteGetPull, 0) // GitHub recovers meanwhile
			return nil
		}
	})
	_, err := c.PullRequest(t.Context(), testRepo, n) // the token, at once
	require.NoError(t, err)

	f.Latency(githubfake.RouteGetPull, time.Minute)
	type result struct {
		pr  *codehost.PR
		err error
	}
	done := make(chan result, 1)
	go func() {
		pr, err := c.PullRequest(t.Context(), testRepo, n)
		done <- result{pr, err}
	}()
	// The fake's one-minute latency and the attempt's 30 s header timer.
	require.NoError(t, clock.BlockUntilContext(t.Context(), 2))
	clock.Advance(30 * time.Second)
	got := <-done
	require.NoError(t, got.err)
	require.Equal(t, sha, got.pr.HeadSHA)
	require.Equal(t, []time.Duration{500 * time.Millisecond}, waits)
	calls := obs.of(github.RoutePull)
	require.Len(t, calls, 3)
	require.Zero(t, calls[1].Status, "the abandoned attempt had no answer")
	require.Equal(t, 200, calls[2].Status)
}

// Scenario: a connection that cannot be made is retried, then reported
// unavailable, naming the route and no URL.
func TestConnectionErrorsAreRetried(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	base := srv.URL + "/"
	srv.Close()
	w := &recordingWait{}
	obs := &observed{}
	c, err := github.New(github.Config{APIURL: base, Token: "ghp_secret", MaxAttempts: 3, Wait: w.wait, Observe: obs.observe})
	require.NoError(t, err)
	_, err = c.PullRequest(t.Context(), testRepo, 1)
	require.ErrorIs(t, err, codehost.ErrUnavailable)
	require.Equal(t, []time.Duration{500 * time.Millisecond, time.Second}, w.got())
	calls := obs.of(github.RoutePull)
	require.Len(t, calls, 3)
	require.Zero(t, calls[0].Status, "no response: status 0")
	require.Equal(t, -1, calls[0].RateRemaining)
	require.NotContains(t, err.Error(), "ghp_secret")
	require.Contains(t, err.Error(), github.RoutePull)
}

// Scenario: as a GitHub App, the client finds the repository's
// installation, fetches its token with the App's JWT once, reuses it, and
// fetches a new one when the fake clock passes its refresh point (a
// minute before the hour it lives).
func TestAppAuthenticationEndToEnd(t *testing.T) {
	t.Parallel()
	f, clock := newFake(t)
	n, _ := openPR(t, f)
	c := newAppClient(t, f, clock, nil)

	_, err := c.PullRequest(t.Context(), testRepo, n)
	require.NoError(t, err)
	_, err = c.Comments(t.Context(), testRepo, n)
	require.NoError(t, err)
	require.Len(t, f.Requests(githubfake.RouteRepoInstallation), 1)
	tokens := f.Requests(githubfake.RouteAccessToken)
	require.Len(t, tokens, 1)
	require.Equal(t, 201, tokens[0].Status)
	require.Contains(t, tokens[0].Path, "/app/installations/")
	for _, r := range f.Requests(githubfake.RouteGetPull) {
		require.Equal(t, f.AppBotLogin(), r.Actor, "API calls act as the App's installation")
	}

	clock.Advance(58 * time.Minute)
	_, err = c.PullRequest(t.Context(), testRepo, n)
	require.NoError(t, err)
	require.Len(t, f.Requests(githubfake.RouteAccessToken), 1, "still fresh")

	clock.Advance(90 * time.Second) // 59m30s: within a minute of its expiry
	_, err = c.PullRequest(t.Context(), testRepo, n)
	require.NoError(t, err)
	require.Len(t, f.Requests(githubfake.RouteAccessToken), 2, "refreshed before it expired")
	require.Len(t, f.Requests(githubfake.RouteRepoInstallation), 1, "the installation is cached")
	for _, r := range f.Requests(githubfake.RouteGetPull) {
		require.Equal(t, 200, r.Status, "no call ever went out with an expired token")
	}

	// The App's check runs carry its slug, and UpsertCheckRun reads it once.
	_, sha := f.PR(testRepo, n).Number, f.PR(testRepo, n).HeadSHA
	run, err := c.UpsertCheckRun(t.Context(), testRepo, codehost.CheckRun{HeadSHA: sha, Name: "gapless", Status: codehost.StatusQueued})
	require.NoError(t, err)
	require.Equal(t, f.AppSlug(), run.AppSlug)
	_, err = c.UpsertCheckRun(t.Context(), testRepo, codehost.CheckRun{HeadSHA: sha, Name: "gapless", Status: codehost.StatusInProgress})
	require.NoError(t, err)
	require.Len(t, f.Requests(githubfake.RouteApp), 1)
	require.Len(t, f.CheckRuns(testRepo, sha), 1)
}

// Scenario: a cached installation token the host refuses (401: revoked, or
// expired by the host's clock) is dropped, a new one fetched, and the
// request sent again once.
func TestRefusedTokenIsRefetchedOnce(t *testing.T) {
	t.Parallel()
	f, clock := newFake(t)
	n, _ := openPR(t, f)
	c := newAppClient(t, f, clock, nil)
	_, err := c.PullRequest(t.Context(), testRepo, n)
	require.NoError(t, err)
	f.Fail(githubfake.RouteGetPull, http.StatusUnauthorized, 1)
	_, err = c.PullRequest(t.Context(), testRepo, n)
	require.NoError(t, err)
	require.Len(t, f.Requests(githubfake.RouteAccessToken), 2)

	// A fresh token refused again is final: ErrUnauthorized, no loop.
	f.Fail(githubfake.RouteGetPull, http.StatusUnauthorized, 3)
	_, err = c.PullRequest(t.Context(), testRepo, n)
	require.ErrorIs(t, err, codehost.ErrUnauthorized)
	require.Len(t, f.Requests(githubfake.RouteAccessToken), 3)
}

// Scenario: a private key that is not the App's makes the token fetch
// fail with ErrUnauthorized, naming the route, never the key.
func TestWrongAppKeyIsUnauthorized(t *testing.T) {
	t.Parallel()
	f, clock := newFake(t)
	n, _ := openPR(t, f)
	key, err := rsa.GenerateKey(rand.Reader, 1024) // small: only its mismatch matters
	require.NoError(t, err)
	other := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	c := newAppClient(t, f, clock, func(cfg *github.Config) { cfg.PrivateKey = other })
	_, err = c.PullRequest(t.Context(), testRepo, n)
	require.ErrorIs(t, err, codehost.ErrUnauthorized)
	require.Contains(t, err.Error(), github.RouteRepoInstallation)
	require.NotContains(t, err.Error(), "PRIVATE KEY")
}

// Scenario: with a plain token (Actions' GITHUB_TOKEN) the client calls
// the API with it directly: no installation, no JWT; its check runs are
// the github-actions App's and are updated in place; a bad token is
// ErrUnauthorized at once.
func TestPlainToken(t *testing.T) {
	t.Parallel()
	f, clock := newFake(t)
	n, sha := openPR(t, f)
	w := &recordingWait{}
	c, err := github.New(github.Config{APIURL: f.URL(), Token: f.PersonalToken("ci-bot"), Clock: clock, Wait: w.wait})
	require.NoError(t, err)
	cm, err := c.CreateComment(t.Context(), testRepo, n, "from actions")
	require.NoError(t, err)
	require.Equal(t, "ci-bot", cm.Author)
	r1, err := c.UpsertCheckRun(t.Context(), testRepo, codehost.CheckRun{HeadSHA: sha, Name: "gapless", Status: codehost.StatusInProgress, Title: "t", Summary: "s"})
	require.NoError(t, err)
	require.Equal(t, "github-actions", r1.AppSlug)
	r2, err := c.UpsertCheckRun(t.Context(), testRepo, codehost.CheckRun{HeadSHA: sha, Name: "gapless", Status: codehost.StatusCompleted, Conclusion: codehost.ConclusionSuccess, Title: "t", Summary: "s"})
	require.NoError(t, err)
	require.Equal(t, r1.ID, r2.ID)
	require.Empty(t, f.Requests(githubfake.RouteAccessToken))
	require.Empty(t, f.Requests(githubfake.RouteRepoInstallation))
	require.Empty(t, f.Requests(githubfake.RouteApp))

	bad, err := github.New(github.Config{APIURL: f.URL(), Token: "ghp_notissued", Clock: clock, Wait: w.wait})
	require.NoError(t, err)
	before := len(f.Requests(githubfake.RouteGetPull))
	_, err = bad.PullRequest(t.Context(), testRepo, n)
	require.ErrorIs(t, err, codehost.ErrUnauthorized)
	require.NotContains(t, err.Error(), "ghp_notissued")
	require.Len(t, f.Requests(githubfake.RouteGetPull), before+1, "a 401 is not retried")
	require.Empty(t, w.got())
}

// Scenario: the App's check run is "ours"; another App's run with the same
// name on the same head is left alone and ours is created beside it.
func TestUpsertLeavesAnotherAppsRun(t *testing.T) {
	t.Parallel()
	f, clock := newFake(t)
	_, sha := openPR(t, f)
	actions, err := github.New(github.Config{APIURL: f.URL(), Token: f.PersonalToken("ci-bot"), Clock: clock})
	require.NoError(t, err)
	theirs, err := actions.UpsertCheckRun(t.Context(), testRepo, codehost.CheckRun{HeadSHA: sha, Name: "gapless", Status: codehost.StatusCompleted, Conclusion: codehost.ConclusionFailure, Title: "t", Summary: "theirs"})
	require.NoError(t, err)

	app := newAppClient(t, f, clock, nil)
	ours, err := app.UpsertCheckRun(t.Context(), testRepo, codehost.CheckRun{HeadSHA: sha, Name: "gapless", Status: codehost.StatusCompleted, Conclusion: codehost.ConclusionSuccess, Title: "t", Summary: "ours"})
	require.NoError(t, err)
	require.NotEqual(t, theirs.ID, ours.ID)
	ours2, err := app.UpsertCheckRun(t.Context(), testRepo, codehost.CheckRun{HeadSHA: sha, Name: "gapless", Status: codehost.StatusCompleted, Conclusion: codehost.ConclusionNeutral, Title: "t", Summary: "ours again"})
	require.NoError(t, err)
	require.Equal(t, ours.ID, ours2.ID)
	runs, err := app.CheckRuns(t.Context(), testRepo, sha)
	require.NoError(t, err)
	require.Len(t, runs, 2)
	require.Equal(t, "theirs", runs[0].Summary, "another App's run is untouched")
	require.Equal(t, "ours again", runs[1].Summary)
}

// Scenario: a tarball's archive host differs from the API host (GitHub
// Enterprise Server behind /api/v3/, github.com's codeload): the client
// follows the redirect without sending it the API credential.
func TestFilesBehindAnEnterprisePathPrefix(t *testing.T) {
	t.Parallel()
	f, clock := newFake(t)
	sha := f.Commit(testRepo, "main", map[string]string{"gapless.yaml": "name: x\n", "models/a.sql": "select 1"}, "files")
	var mu sync.Mutex
	var seen []string
	upstream := strings.TrimSuffix(f.URL(), "/")
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.Path)
		mu.Unlock()
		rest, ok := strings.CutPrefix(r.URL.Path, "/api/v3")
		if !ok {
			http.NotFound(w, r)
			return
		}
		req, err := http.NewRequestWithContext(r.Context(), r.Method, upstream+rest+"?"+r.URL.RawQuery, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		req.Header = r.Header.Clone()
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	t.Cleanup(proxy.Close)

	obs := &observed{}
	c := newAppClient(t, f, clock, func(cfg *github.Config) { cfg.APIURL = proxy.URL + "/api/v3/"; cfg.Observe = obs.observe })
	fsys, err := c.Files(t.Context(), testRepo, sha)
	require.NoError(t, err)
	m, ok := fsys.(interface{ ReadFile(string) ([]byte, error) })
	require.True(t, ok)
	b, err := m.ReadFile("models/a.sql")
	require.NoError(t, err)
	require.Equal(t, "select 1", string(b))

	mu.Lock()
	require.Contains(t, seen, "/api/v3/repos/acme/analytics/tarball/"+sha)
	mu.Unlock()
	// The archive came from the fake's own host (the redirect target), not
	// through the API prefix: the fake served it, so it arrived without the
	// API's credential (the fake's archive route takes only its URL grant).
	archive := f.Requests(githubfake.RouteCodeload)
	require.Len(t, archive, 1)
	require.Equal(t, 200, archive[0].Status)
	require.Empty(t, archive[0].Actor, "no API credential went to the archive host")
	require.Len(t, obs.of(github.RouteTarball), 2, "the API request and the redirect's, both under the tarball's route")
}

// Scenario: a tarball over the files cap is refused, naming the cap.
func TestFilesCap(t *testing.T) {
	t.Parallel()
	f, clock := newFake(t)
	sha := f.Commit(testRepo, "main", map[string]string{"big.sql": strings.Repeat("x", 4096)}, "big")
	c := newAppClient(t, f, clock, func(cfg *github.Config) { cfg.MaxFilesBytes = 1024 })
	_, err := c.Files(t.Context(), testRepo, sha)
	require.ErrorIs(t, err, codehost.ErrInvalid)
	require.ErrorContains(t, err, "more than 1024 bytes")
}

// Scenario: bodies over the limit never reach GitHub: refused before the
// call, nothing in the fake's log.
func TestOverlongBodiesNeverReachTheHost(t *testing.T) {
	t.Parallel()
	f, clock := newFake(t)
	n, sha := openPR(t, f)
	c := newAppClient(t, f, clock, nil)
	long := strings.Repeat("é", codehost.MaxBodyLength+1)
	_, err := c.CreateComment(t.Context(), testRepo, n, long)
	require.ErrorIs(t, err, codehost.ErrInvalid)
	_, err = c.UpsertCheckRun(t.Context(), testRepo, codehost.CheckRun{HeadSHA: sha, Name: "x", Title: "t", Summary: long})
	require.ErrorIs(t, err, codehost.ErrInvalid)
	require.Empty(t, f.Requests(githubfake.RouteCreateComment))
	require.Empty(t, f.Requests(githubfake.RouteCreateCheckRun))
	require.Empty(t, f.Requests(githubfake.RouteListCheckRunsForRef))
}

// Scenario: FindComment never asks the per-issue endpoint for a sort or a
// direction (it ignores them; relying on them was the seed's dedup bug),
// and reads every page.
func TestFindCommentReadsEveryPageWithoutSorting(t *testing.T) {
	t.Parallel()
	f, clock := newFake(t)
	n, _ := openPR(t, f)
	for i := range 230 {
		body := "chatter"
		if i == 205 {
			body = "<!-- gapless:summary --> here"
		}
		f.AddComment(testRepo, n, "bob", body)
	}
	c := newAppClient(t, f, clock, nil)
	got, err := c.FindComment(t.Context(), testRepo, n, "<!-- gapless:summary -->")
	require.NoError(t, err)
	require.NotNil(t, got)
	reqs := f.Requests(githubfake.RouteListComments)
	require.Len(t, reqs, 3, "230 comments, 100 a page")
	for _, r := range reqs {
		require.Empty(t, r.Query.Get("sort"))
		require.Empty(t, r.Query.Get("direction"))
		require.Equal(t, "100", r.Query.Get("per_page"))
	}
}

// Scenario: merge is pinned: the client sends the head SHA GitHub must
// match, and the merge commit it returns is the fake's.
func TestMergeSendsThePinnedSHA(t *testing.T) {
	t.Parallel()
	f, clock := newFake(t)
	n, sha := openPR(t, f)
	c := newAppClient(t, f, clock, nil)
	merged, err := c.Merge(t.Context(), testRepo, n, sha, codehost.MergeRebase)
	require.NoError(t, err)
	reqs := f.Requests(githubfake.RouteMergePull)
	require.Len(t, reqs, 1)
	require.Contains(t, string(reqs[0].Body), `"sha":"`+sha+`"`)
	require.Contains(t, string(reqs[0].Body), `"merge_method":"rebase"`)
	require.Equal(t, f.Branch(testRepo, "main"), merged)

	_, err = c.Merge(t.Context(), testRepo, n, "", codehost.MergeMerge)
	require.ErrorIs(t, err, codehost.ErrInvalid, "an unpinned merge is refused")
}

// Scenario: Permission maps GitHub's role_name (maintain and triage are
// not in the legacy permission field), and the repository's owner is
// admin.
func TestPermissionRoles(t *testing.T) {
	t.Parallel()
	f, clock := newFake(t)
	c := newAppClient(t, f, clock, nil)
	f.SetPermission(testRepo, "mia", codehost.PermissionMaintain)
	f.SetPermission(testRepo, "tom", codehost.PermissionTriage)
	p, err := c.Permission(t.Context(), testRepo, "mia")
	require.NoError(t, err)
	require.Equal(t, codehost.PermissionMaintain, p)
	require.True(t, p.CanWrite())
	p, err = c.Permission(t.Context(), testRepo, "tom")
	require.NoError(t, err)
	require.Equal(t, codehost.PermissionTriage, p)
	require.False(t, p.CanWrite())
	p, err = c.Permission(t.Context(), testRepo, "acme")
	require.NoError(t, err)
	require.Equal(t, codehost.PermissionAdmin, p)
}

// Scenario: a plain token never shows in an error or a log line, retries
// included.
func TestErrorsNeverCarryTheToken(t *testing.T) {
	t.Parallel()
	f, clock := newFake(t)
	tok := f.PersonalToken("ci-bot")
	var logs strings.Builder
	var mu sync.Mutex
	c, err := github.New(github.Config{APIURL: f.URL(), Token: tok, Clock: clock, MaxAttempts: 2,
		Wait:   func(context.Context, time.Duration) error { return nil },
		Logger: newTextLogger(&logs, &mu)})
	require.NoError(t, err)
	f.Down(true)
	_, err = c.OpenPullRequests(t.Context(), testRepo, "main")
	require.ErrorIs(t, err, codehost.ErrUnavailable)
	require.NotContains(t, err.Error(), tok)
	mu.Lock()
	require.NotContains(t, logs.String(), tok)
	require.Contains(t, logs.String(), "github: retrying")
	mu.Unlock()
}

// lockedWriter serialises a logger's writes.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func newTextLogger(w io.Writer, mu *sync.Mutex) *slog.Logger {
	return slog.New(slog.NewTextHandler(lockedWriter{mu: mu, w: w}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Scenario: the App was uninstalled and installed again (a new
// installation id): the token fetch of the cached installation answers
// 404, and the next call looks the repository's installation up again.
func TestGoneInstallationIsLookedUpAgain(t *testing.T) {
	t.Parallel()
	f, clock := newFake(t)
	n, _ := openPR(t, f)
	c := newAppClient(t, f, clock, nil)
	f.Fail(githubfake.RouteAccessToken, http.StatusNotFound, 1)
	_, err := c.PullRequest(t.Context(), testRepo, n)
	require.ErrorIs(t, err, codehost.ErrNotFound)
	require.Contains(t, err.Error(), "the installation token (POST /app/installations/{id}/access_tokens) answered 404")
	_, err = c.PullRequest(t.Context(), testRepo, n)
	require.NoError(t, err)
	require.Len(t, f.Requests(githubfake.RouteRepoInstallation), 2)
}
