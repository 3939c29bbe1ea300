package githubfake_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/codehost/githubfake"
)

// Scenario: a route fails n times, then answers again; a failed request
// changes nothing. 403 and 429 carry the secondary-rate-limit body and
// Retry-After, 5xx a plain error.
func TestFailAnswersNTimesThenRecovers(t *testing.T) {
	f, _, a := setup(t, githubfake.Options{})
	n := openPR(f, map[string]string{"models/a.sql": "select 1"})
	status, run := a.createRun(object{"name": "gapless", "head_sha": f.PR(testRepo, n).HeadSHA, "status": "in_progress"})
	require.Equal(t, http.StatusCreated, status)
	path := fmt.Sprintf("repos/%s/check-runs/%.0f", testRepo, run["id"].(float64))

	f.Fail(githubfake.RouteUpdateCheckRun, http.StatusBadGateway, 2)
	f.Fail(githubfake.RouteUpdateCheckRun, http.StatusTooManyRequests, 1)
	f.Fail(githubfake.RouteUpdateCheckRun, http.StatusForbidden, 1)
	for i := range 2 {
		resp, body := a.do("PATCH", path, object{"conclusion": "success"})
		require.Equal(t, http.StatusBadGateway, resp.StatusCode, "attempt %d", i)
		require.Equal(t, "Bad Gateway", decode[object](t, body)["message"])
		require.Empty(t, resp.Header.Get("Retry-After"))
	}
	for _, want := range []int{http.StatusTooManyRequests, http.StatusForbidden} {
		resp, body := a.do("PATCH", path, object{"conclusion": "success"})
		require.Equal(t, want, resp.StatusCode)
		require.Equal(t, "1", resp.Header.Get("Retry-After"))
		got := decode[object](t, body)
		require.Contains(t, got["message"], "secondary rate limit")
		require.True(t, strings.HasSuffix(got["documentation_url"].(string), "secondary-rate-limits"))
	}
	require.Equal(t, "in_progress", string(f.CheckRuns(testRepo, f.PR(testRepo, n).HeadSHA)[0].Status), "failed requests changed nothing")

	// Other routes were never affected.
	resp, _ := a.do("GET", path, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, _ = a.do("PATCH", path, object{"conclusion": "success"})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "success", string(f.CheckRuns(testRepo, f.PR(testRepo, n).HeadSHA)[0].Conclusion))

	f.Fail(githubfake.AnyRoute, http.StatusInternalServerError, 1)
	resp, _ = a.do("GET", "repos/"+testRepo, nil)
	require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
	resp, _ = a.do("GET", "repos/"+testRepo, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// Scenario: GitHub acknowledges a check-run update that a reader does not
// see: the PATCH answers 200 with the run unchanged, and a read-back shows
// the old conclusion. The next update lands.
func TestLoseCheckRunUpdatesAnswers200AndChangesNothing(t *testing.T) {
	f, _, a := setup(t, githubfake.Options{})
	n := openPR(f, map[string]string{"models/a.sql": "select 1"})
	head := f.PR(testRepo, n).HeadSHA
	status, run := a.createRun(object{"name": "gapless", "head_sha": head, "status": "completed", "conclusion": "success"})
	require.Equal(t, http.StatusCreated, status)
	path := fmt.Sprintf("repos/%s/check-runs/%.0f", testRepo, run["id"].(float64))

	f.LoseCheckRunUpdates(1)
	resp, body := a.do("PATCH", path, object{"conclusion": "action_required"})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "success", decode[object](t, body)["conclusion"], "the answer shows the run as it stands")
	require.Equal(t, "success", string(f.CheckRuns(testRepo, head)[0].Conclusion), "nothing changed")

	resp, _ = a.do("PATCH", path, object{"conclusion": "action_required"})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "action_required", string(f.CheckRuns(testRepo, head)[0].Conclusion), "the next update lands")
}

// Scenario: GitHub is down: every request answers 503 until it is back.
func TestDownAnswers503(t *testing.T) {
	f, _, a := setup(t, githubfake.Options{})
	f.Down(true)
	for _, path := range []string{"repos/" + testRepo, "repos/" + testRepo + "/pulls", "app", "nowhere"} {
		resp, _ := a.do("GET", path, nil)
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, path)
	}
	f.Down(false)
	resp, _ := a.do("GET", "repos/"+testRepo, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// Scenario: a route is slow on the fake clock: the request completes only
// once the test advances the clock past the latency.
func TestLatencyWaitsOnTheFakeClock(t *testing.T) {
	f, clock, a := setup(t, githubfake.Options{})
	n := openPR(f, map[string]string{"models/a.sql": "select 1"})
	f.Latency(githubfake.RouteGetPull, 5*time.Second)

	req, err := http.NewRequest("GET", fmt.Sprintf("%srepos/%s/pulls/%d", f.URL(), testRepo, n), nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "token "+a.token)
	done := make(chan int, 1)
	go func() {
		resp, err := noRedirects.Do(req)
		if err != nil {
			done <- -1
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, clock.BlockUntilContext(ctx, 1), "the request waits on the fake clock")
	select {
	case <-done:
		t.Fatal("the request completed before the clock moved")
	default:
	}
	clock.Advance(4 * time.Second)
	select {
	case <-done:
		t.Fatal("the request completed before its latency passed")
	default:
	}
	clock.Advance(time.Second)
	select {
	case status := <-done:
		require.Equal(t, http.StatusOK, status)
	case <-ctx.Done():
		t.Fatal("the request did not complete after the clock passed its latency")
	}

	// Other routes are not slowed.
	resp, _ := a.do("GET", "repos/"+testRepo, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	f.Latency(githubfake.RouteGetPull, 0)
	resp, _ = a.do("GET", fmt.Sprintf("repos/%s/pulls/%d", testRepo, n), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// Scenario: the log has every request: method, path, route, query,
// status, arrival on the fake clock, body and actor.
func TestLogRecordsEveryRequest(t *testing.T) {
	f, clock, a := setup(t, githubfake.Options{})
	n := openPR(f, map[string]string{"models/a.sql": "select 1"})
	a.do("GET", fmt.Sprintf("repos/%s/issues/%d/comments?per_page=100&sort=created", testRepo, n), nil)
	clock.Advance(time.Minute)
	a.do("POST", fmt.Sprintf("repos/%s/issues/%d/comments", testRepo, n), object{"body": "hello"})
	a.do("GET", "nowhere", nil)
	a.doAuth("GET", "repos/"+testRepo, nil, "")

	log := f.Log()
	require.Len(t, log, 4)
	require.Equal(t, githubfake.Request{
		Method: "GET", Path: fmt.Sprintf("/repos/%s/issues/%d/comments", testRepo, n), Route: githubfake.RouteListComments,
		Query: url.Values{"per_page": {"100"}, "sort": {"created"}}, Status: http.StatusOK, At: start, Body: []byte{},
		Actor: "ci-bot", RequestID: log[0].RequestID,
	}, log[0])
	require.Equal(t, githubfake.RouteCreateComment, log[1].Route)
	require.Equal(t, http.StatusCreated, log[1].Status)
	require.Equal(t, start.Add(time.Minute), log[1].At)
	require.JSONEq(t, `{"body":"hello"}`, string(log[1].Body))
	require.Equal(t, "", log[2].Route)
	require.Equal(t, http.StatusNotFound, log[2].Status)
	require.Equal(t, http.StatusUnauthorized, log[3].Status)
	require.Empty(t, log[3].Actor)

	require.Len(t, f.Requests(githubfake.RouteCreateComment), 1)
	require.Empty(t, f.Requests(githubfake.RouteMergePull))
}

// Scenario: a test ends while a request waits out its latency on a clock
// nobody advances: Close still returns, and the request is answered.
func TestCloseReleasesRequestsWaitingOutLatency(t *testing.T) {
	clock := clockwork.NewFakeClockAt(start)
	f, err := githubfake.New(githubfake.Options{Clock: clock})
	require.NoError(t, err)
	f.CreateRepo(testRepo, "main")
	f.Latency(githubfake.AnyRoute, time.Hour)
	req, err := http.NewRequest("GET", f.URL()+"repos/"+testRepo, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "token "+f.PersonalToken("ci-bot"))
	done := make(chan int, 1)
	go func() {
		resp, err := noRedirects.Do(req)
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, clock.BlockUntilContext(ctx, 1))
	closed := make(chan struct{})
	go func() {
		f.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("Close waited for a request stuck on the fake clock")
	}
	select {
	case status := <-done:
		require.Contains(t, []int{0, http.StatusServiceUnavailable}, status)
	case <-ctx.Done():
		t.Fatal("the waiting request was never answered")
	}
}
