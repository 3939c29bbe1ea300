package bot_test

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/bot"
	"github.com/gapless-dev/gapless/codehost/githubfake"
)

// meteredRateLimit is the fake's primary rate limit in the metrics
// scenario: not GitHub's 5000, so the gauge is seen to come from the
// answers.
const meteredRateLimit = 1000

// get fetches path from the server.
func (m *harness) get(path string) (int, string) {
	m.t.Helper()
	req, err := http.NewRequestWithContext(m.ctx, http.MethodGet, m.url+path, nil)
	require.NoError(m.t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(m.t, err)
	defer func() { require.NoError(m.t, resp.Body.Close()) }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(m.t, err)
	return resp.StatusCode, string(b)
}

func TestScenarioMetricsAfterAPullRequest(t *testing.T) {
	t.Parallel()
	// Scenario: an operator scrapes GET /metrics of a serve that has
	// planned a pull request (one of its check-run writes answered 502 by
	// GitHub and retried), refused three forged deliveries, ignored one
	// redelivery and refused a /deploy from a reader. The deliveries by
	// outcome are exactly what GitHub's delivery log says was answered;
	// the jobs by kind and state are the queue's; every GitHub call is
	// counted by route and status exactly as the fake GitHub logged it,
	// with its latency and its errors; and the rate-limit headroom comes
	// from GitHub's X-RateLimit headers.
	m := newHarness(t, options{rateLimit: meteredRateLimit})
	m.fake.Fail(githubfake.RouteCreateCheckRun, http.StatusBadGateway, 1)
	m.fake.Commit(repoName, "amount", changed(), "change amount")
	n := m.fake.OpenPR(repoName, githubfake.PRSpec{Title: "amount", Author: writer, Head: "amount", Base: "main"})
	m.idle()
	require.True(t, m.fake.MergeAllowed(repoName, n), "the PR was planned green despite the 502")

	payload := m.fake.PullRequestPayload(repoName, n, "synchronize")
	for _, tamper := range []githubfake.Tamper{githubfake.TamperBadSignature, githubfake.TamperNoSignature, githubfake.TamperSHA1Only} {
		status, err := m.fake.DeliverTampered("pull_request", payload, tamper)
		require.NoError(t, err)
		require.Equal(t, http.StatusUnauthorized, status)
	}
	var opened string
	for _, d := range m.fake.Deliveries() {
		if d.Event == "pull_request" && d.Status == http.StatusAccepted {
			opened = d.ID
		}
	}
	require.NotEmpty(t, opened)
	status, err := m.fake.Redeliver(opened)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	m.fake.AddComment(repoName, n, reader, "/deploy")
	m.idle()

	code, body := m.get("/metrics")
	require.Equal(t, http.StatusOK, code)
	samples := parseExposition(t, body)

	// Deliveries by outcome, against what GitHub saw answered.
	var accepted, unauthorized, redelivered, ignored float64
	for _, d := range m.fake.Deliveries() {
		switch {
		case d.Redelivery:
			redelivered++
		case d.Status == http.StatusAccepted:
			accepted++
		case d.Status == http.StatusUnauthorized:
			unauthorized++
		case d.Status == http.StatusOK:
			ignored++
		default:
			t.Fatalf("a delivery answered %d: %+v", d.Status, d)
		}
	}
	outcomes := outcomesOf(samples)
	require.Positive(t, accepted)
	require.Equal(t, map[string]float64{
		bot.OutcomeAccepted: accepted, bot.OutcomeInvalidSignature: 3, bot.OutcomeDuplicate: 1,
		bot.OutcomeIgnored: ignored, bot.OutcomeTooLarge: 0, bot.OutcomeBadRequest: 0,
		bot.OutcomeRepoNotAllowed: 0, bot.OutcomeError: 0,
	}, outcomes)
	require.Equal(t, 3.0, unauthorized)
	require.Equal(t, 1.0, redelivered)

	// Jobs by kind and state: the queue's own counts (it is idle, so they
	// hold still).
	counts, err := m.srv.Queue.Counts(m.ctx)
	require.NoError(t, err)
	require.NotEmpty(t, counts)
	kinds := map[string]bool{}
	for _, c := range counts {
		key := fmt.Sprintf(`gapless_queue_jobs{kind="%s",state="%s"}`, c.Kind, c.State)
		require.Contains(t, samples, key)
		require.Equal(t, float64(c.N), samples[key], key)
		kinds[c.Kind] = true
	}
	for _, k := range []string{bot.KindDelivery, bot.KindPlanPR, bot.KindRenderPR, bot.KindReconcile} {
		require.True(t, kinds[k], "jobs of kind %s are shown", k)
	}
	require.Positive(t, samples[`gapless_queue_jobs{kind="gapless_plan_pr",state="completed"}`])

	// GitHub calls: by route and status as the fake logged them, their
	// latency histogram, their errors.
	// (Whether a check run is created in its final state or created and
	// then updated depends on how the plan and the render interleave: the
	// routes that may go uncalled are checked when called.)
	for _, rc := range []struct {
		route  string
		called bool
	}{
		{githubfake.RouteListPulls, true}, {githubfake.RouteCreateCheckRun, true},
		{githubfake.RouteListComments, true}, {githubfake.RouteCreateComment, true},
		{githubfake.RoutePermission, true}, {githubfake.RouteUpdateCheckRun, false},
		{githubfake.RouteEditComment, false}, {githubfake.RouteListCheckRunsForRef, false},
	} {
		route := rc.route
		byCode := map[int]float64{}
		var total, failed float64
		for _, r := range m.fake.Requests(route) {
			byCode[r.Status]++
			total++
			if r.Status >= 400 {
				failed++
			}
		}
		if rc.called {
			require.Positive(t, total, "the scenario calls %s", route)
		}
		for code, want := range byCode {
			key := fmt.Sprintf(`gapless_github_requests_total{code="%d",route="%s"}`, code, route)
			require.Equal(t, want, samples[key], key)
		}
		var counted float64
		for key, v := range samples {
			if strings.HasPrefix(key, "gapless_github_requests_total{") && hasLabel(key, "route", route) {
				counted += v
			}
		}
		require.Equal(t, total, counted, "every request to %s is counted once", route)
		require.Equal(t, total, samples[fmt.Sprintf(`gapless_github_request_duration_seconds_count{route="%s"}`, route)], route)
		require.Equal(t, total, samples[fmt.Sprintf(`gapless_github_request_duration_seconds_bucket{route="%s",le="+Inf"}`, route)], route)
		require.Contains(t, samples, fmt.Sprintf(`gapless_github_request_duration_seconds_sum{route="%s"}`, route))
		require.Equal(t, failed, samples[fmt.Sprintf(`gapless_github_request_errors_total{route="%s"}`, route)], route)
	}
	require.Equal(t, 1.0, samples[fmt.Sprintf(`gapless_github_requests_total{code="502",route="%s"}`, githubfake.RouteCreateCheckRun)], "the 502")
	require.Equal(t, 1.0, samples[fmt.Sprintf(`gapless_github_request_errors_total{route="%s"}`, githubfake.RouteCreateCheckRun)])

	// Rate-limit headroom, from the answers' headers (-1 until one came).
	require.Equal(t, float64(meteredRateLimit), samples["gapless_github_ratelimit_limit"])
	remaining := samples["gapless_github_ratelimit_remaining"]
	require.GreaterOrEqual(t, remaining, 0.0)
	require.LessOrEqual(t, remaining, float64(meteredRateLimit))

	// /healthz answers beside it.
	code, body = m.get("/healthz")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `"status":"ok"`)
}

// hasLabel reports whether a sample key (name{labels}) carries
// name="value".
func hasLabel(key, name, value string) bool {
	want := name + "=" + strconv.Quote(value)
	return strings.Contains(key, "{"+want) || strings.Contains(key, ","+want)
}
