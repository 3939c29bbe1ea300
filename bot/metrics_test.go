package bot_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/backend"
	"github.com/gapless-dev/gapless/bot"
	"github.com/gapless-dev/gapless/codehost"
	"github.com/gapless-dev/gapless/codehost/githubfake"
	"github.com/gapless-dev/gapless/config"
	"github.com/gapless-dev/gapless/gate"
	"github.com/gapless-dev/gapless/queue"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse/duckdb"
)

// meteredRateLimit is the fake's primary rate limit in the metrics
// scenario: not GitHub's 5000, so the gauge is seen to come from the
// answers.
const meteredRateLimit = 1000

// meteredServe is gapless serve wired as the CLI wires it: one Prometheus
// registry for the bot's metrics (deliveries, jobs by kind and state) and
// the GitHub client's (requests, latency, errors, rate-limit headroom),
// served on /metrics; against the fake GitHub, on SQLite state, DuckDB
// and a real River queue.
type meteredServe struct {
	t     *testing.T
	ctx   context.Context
	fake  *githubfake.Fake
	store state.Store
	srv   *bot.Server
	url   string
}

func newMeteredServe(t *testing.T) *meteredServe {
	t.Helper()
	ctx := t.Context()
	clock := clockwork.NewFakeClockAt(t0)
	fake := githubfake.NewT(t, githubfake.Options{Clock: clock})
	fake.SetRateLimit(meteredRateLimit)
	fake.CreateRepo(repoName, "main")
	fake.Commit(repoName, "main", project("10.0"), "initial project")
	fake.SetPermission(repoName, writer, codehost.PermissionWrite)
	fake.SetPermission(repoName, reader, codehost.PermissionRead)
	fake.SetRequiredChecks(repoName, "main", gate.CheckAggregate)

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "app.pem"), fake.AppPrivateKeyPEM(), 0o600))
	yaml := fmt.Sprintf(`state: sqlite://.gapless/state.db
warehouse: 'duckdb://:memory:'
github:
  app_id: %d
  private_key_file: app.pem
  webhook_secret: %s
  repositories: [%s]
  api_url: %s
  pr_environment_name: analytics
`, fake.AppID(), secret, repoName, fake.URL())
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gapless.yaml"), []byte(yaml), 0o644))
	cfg, err := config.Load(dir)
	require.NoError(t, err)
	store, err := backend.OpenStore(ctx, cfg.State)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, store.Close()) })
	engine, err := duckdb.Open(ctx, "", duckdb.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, engine.Close()) })

	// As cli/serve.go: the metrics exist before the host (which reports
	// its calls to them) and the server (which opens the queue they
	// count).
	reg := prometheus.NewRegistry()
	var srv *bot.Server
	metrics := bot.NewMetrics(reg, func(ctx context.Context) ([]queue.Count, error) { return srv.Queue.Counts(ctx) })
	host, err := bot.NewHost(cfg.GitHub, bot.HostParams{
		Clock: clock, Log: testLog(t), Metrics: metrics,
		Wait: func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
	})
	require.NoError(t, err)
	srv, closeQ, err := bot.OpenServer(ctx, bot.ServerParams{
		GitHub: cfg.GitHub, StateConn: cfg.State, Store: store, Engine: engine, Host: host,
		Clock: clock, Log: testLog(t), Registry: reg, Metrics: metrics, Workers: 4,
		Queue: func(c *queue.Config) { c.RetryDelay = func(int) time.Duration { return 0 } },
	})
	require.NoError(t, err)
	t.Cleanup(closeQ)
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stopped := make(chan error, 1)
	go func() { stopped <- srv.Run(runCtx, l) }()
	select {
	case <-srv.Ready(): // its first reconcile job is in the queue
	case err := <-stopped:
		t.Fatalf("serve stopped before it was ready: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-stopped)
	})
	m := &meteredServe{t: t, ctx: ctx, fake: fake, store: store, srv: srv, url: "http://" + l.Addr().String()}
	fake.SetWebhook(m.url+"/webhook", []byte(secret))
	m.idle()
	return m
}

// idle waits until the queue has nothing running or due and the fake no
// delivery in flight, until both stay quiet (the bot's own comments come
// back as deliveries).
func (m *meteredServe) idle() {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(m.ctx, 60*time.Second)
	defer cancel()
	for {
		before := len(m.fake.Deliveries())
		m.fake.Flush()
		require.NoError(m.t, m.srv.Queue.WaitIdle(ctx))
		m.fake.Flush()
		if len(m.fake.Deliveries()) == before {
			return
		}
	}
}

// get fetches path from the server.
func (m *meteredServe) get(path string) (int, string) {
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
	m := newMeteredServe(t)
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
