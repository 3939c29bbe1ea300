package bot_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/backend"
	"github.com/gapless-dev/gapless/bot"
	"github.com/gapless-dev/gapless/codehost"
	"github.com/gapless-dev/gapless/codehost/githubfake"
	"github.com/gapless-dev/gapless/config"
	"github.com/gapless-dev/gapless/gate"
	"github.com/gapless-dev/gapless/internal/pgtest"
	"github.com/gapless-dev/gapless/queue"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse/duckdb"
)

const (
	repoName = "acme/analytics"
	secret   = "s3cret-webhook"
	// t0 is the fake clock's start: PR environments backfill the day
	// before it (pr_start 1d).
	writer = "alice"
	reader = "bob"
)

var t0 = time.Date(2024, 1, 3, 0, 30, 0, 0, time.UTC)

// options adjust a harness.
type options struct {
	postgres bool
	hooks    *bot.Hooks
	// github adds lines to the github: block of gapless.yaml.
	github string
	// replicas is how many serve processes share the state store (and
	// the queue in it), behind a round-robin load balancer; 1 when 0.
	replicas int
	// rateLimit is the fake's primary rate limit (its default when 0).
	rateLimit int
	// required are the checks branch protection of main requires (the
	// aggregate when nil).
	required []string
}

// harness is gapless serve as a user runs it, against the fake GitHub: a
// real SQLite or PostgreSQL state store, a real DuckDB warehouse, a real
// River queue, and the server listening on loopback, with the fake's
// webhook pointed at it.
type harness struct {
	t     *testing.T
	ctx   context.Context
	fake  *githubfake.Fake
	clock *clockwork.FakeClock
	store state.Store
	srv   *bot.Server
	cfg   *config.Config
	url   string
	// servers are the serve processes (replicas); srv is the first.
	servers []*bot.Server
	// dir is the project folder of gapless.yaml.
	dir string
	// engine is the warehouse every replica shares.
	engine *duckdb.Engine
}

// project is the repository's gapless project: an hourly incremental
// model, a daily rollup of it and an independent FULL model.
func project(amount string) map[string]string {
	return map[string]string{
		"README.md": "# analytics\n",
		"gapless.yaml": `model_defaults:
  dialect: duckdb
  start: '2024-01-01'
`,
		"models/events.sql": `MODEL (
  name demo.events,
  kind INCREMENTAL_BY_TIME_RANGE (time_column event_ts, batch_size 24),
  cron '@hourly',
  grain (event_id)
);

SELECT
  epoch(g.ts)::BIGINT / 3600 AS event_id,
  g.ts AS event_ts,
  ` + amount + ` AS amount
FROM generate_series(@start_ts, @end_ts, INTERVAL 1 HOUR) AS g(ts)
`,
		"models/daily.sql": `MODEL (
  name demo.daily,
  kind INCREMENTAL_BY_TIME_RANGE (time_column day),
  cron '@daily'
);

SELECT date_trunc('day', event_ts) AS day, sum(amount) AS revenue
FROM demo.events
WHERE event_ts BETWEEN @start_ts AND @end_ts
GROUP BY ALL
`,
		"models/regions.sql": `MODEL (name ref.regions, kind FULL, cron '@daily');

SELECT * FROM (VALUES (1, 'north'), (2, 'south')) AS t(region_id, name)
`,
	}
}

func newHarness(t *testing.T, o options) *harness {
	t.Helper()
	ctx := t.Context()
	clock := clockwork.NewFakeClockAt(t0)
	fake := githubfake.NewT(t, githubfake.Options{Clock: clock})
	fake.CreateRepo(repoName, "main")
	fake.Commit(repoName, "main", project("10.0"), "initial project")
	fake.SetPermission(repoName, writer, codehost.PermissionWrite)
	fake.SetPermission(repoName, reader, codehost.PermissionRead)
	if o.required == nil {
		o.required = []string{gate.CheckAggregate}
	}
	fake.SetRequiredChecks(repoName, "main", o.required...)
	if o.rateLimit > 0 {
		fake.SetRateLimit(o.rateLimit)
	}

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "app.pem"), fake.AppPrivateKeyPEM(), 0o600))
	stateLine := "state: sqlite://.gapless/state.db\n"
	if o.postgres {
		stateLine = "state: " + pgtest.NewDatabase(t) + "\n"
	}
	yaml := stateLine + "warehouse: 'duckdb://:memory:'\n" + fmt.Sprintf(`github:
  app_id: %d
  private_key_file: app.pem
  webhook_secret: %s
  repositories: [%s]
  api_url: %s
  pr_environment_name: analytics
  merge_method: squash
`, fake.AppID(), secret, repoName, fake.URL()) + o.github
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gapless.yaml"), []byte(yaml), 0o644))
	cfg, err := config.Load(dir)
	require.NoError(t, err)

	store, err := backend.OpenStore(ctx, cfg.State)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, store.Close()) })
	engine, err := duckdb.Open(ctx, "", duckdb.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, engine.Close()) })

	h := &harness{t: t, ctx: ctx, fake: fake, clock: clock, store: store, cfg: cfg, dir: dir, engine: engine}
	replicas := max(o.replicas, 1)
	var handlers []http.Handler
	for i := range replicas {
		st := store
		if i > 0 {
			// Another serve process: its own connection to the shared
			// state store and queue; the warehouse is shared as a
			// PostgreSQL warehouse would be.
			st, err = backend.OpenStore(ctx, cfg.State)
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, st.Close()) })
		}
		srv, closeQ, err := bot.OpenServer(ctx, bot.ServerParams{
			GitHub: cfg.GitHub, StateConn: cfg.State, Store: st, Engine: engine,
			// As serve builds it: the GitHub client reports to the
			// server's metrics; retries wait for nothing.
			HostParams: bot.HostParams{Wait: func(ctx context.Context, d time.Duration) error { return ctx.Err() }},
			Clock:      clock, Workers: 4, Hooks: o.hooks, Log: testLog(t).With("replica", i),
			Queue: func(c *queue.Config) { c.RetryDelay = func(int) time.Duration { return 0 } },
		})
		require.NoError(t, err)
		t.Cleanup(closeQ)
		if i == 0 {
			h.srv = srv
		}
		h.servers = append(h.servers, srv)
		var lc net.ListenConfig
		l, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
		require.NoError(t, err)
		if i == 0 {
			h.url = "http://" + l.Addr().String()
		}
		handlers = append(handlers, srv.Handler())
		runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		stopped := make(chan error, 1)
		go func() { stopped <- srv.Run(runCtx, l) }()
		select {
		case <-srv.Ready():
		case err := <-stopped:
			require.NoError(t, err, "serve stopped before it was ready")
		}
		stop := func() {
			cancel()
			require.NoError(t, <-stopped)
		}
		t.Cleanup(stop)
	}
	if replicas > 1 {
		// GitHub's deliveries go through a load balancer: round robin.
		var next atomic.Int64
		lb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			handlers[int(next.Add(1))%len(handlers)].ServeHTTP(w, r)
		}))
		t.Cleanup(lb.Close)
		h.url = lb.URL
	}
	fake.SetWebhook(h.url+"/webhook", []byte(secret))
	h.idle()
	return h
}

// idle waits until the queue has nothing running or due and the fake
// has no delivery in flight (the bot's own comments and merges come back
// as webhooks, as on GitHub), until both stay quiet.
func (h *harness) idle() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.ctx, 3*time.Minute) // a bound on failure only: a loaded 2-core CI machine needs more than a minute
	defer cancel()
	for {
		before := len(h.fake.Deliveries())
		h.fake.Flush()
		require.NoError(h.t, h.srv.Queue.WaitIdle(ctx))
		h.fake.Flush()
		if len(h.fake.Deliveries()) == before {
			return
		}
	}
}

// openPR pushes a branch with the project changed and opens a PR from it.
func (h *harness) openPR(branch string, files map[string]string) int {
	h.t.Helper()
	h.fake.Commit(repoName, branch, files, "change "+branch)
	n := h.fake.OpenPR(repoName, githubfake.PRSpec{Title: branch, Author: writer, Head: branch, Base: "main"})
	h.idle()
	return n
}

// checks returns the check runs on the PR's head by name.
func (h *harness) checks(n int) map[string]codehost.CheckRun {
	pr := h.fake.PR(repoName, n)
	out := map[string]codehost.CheckRun{}
	for _, r := range h.fake.CheckRuns(repoName, pr.HeadSHA) {
		out[r.Name] = r
	}
	return out
}

// requireGreen asserts the PR's three checks succeeded and GitHub would
// let it merge.
func (h *harness) requireGreen(n int) {
	h.t.Helper()
	runs := h.checks(n)
	for _, name := range []string{gate.CheckEnvironment, gate.CheckPreview, gate.CheckAggregate} {
		r, ok := runs[name]
		require.True(h.t, ok, "check %q missing on PR %d; have %v", name, n, names(runs))
		require.Equal(h.t, codehost.StatusCompleted, r.Status, "%s: %s", name, r.Summary)
		require.Equal(h.t, codehost.ConclusionSuccess, r.Conclusion, "%s: %s\n%s", name, r.Title, r.Summary)
	}
	require.True(h.t, h.fake.MergeAllowed(repoName, n))
}

func names(runs map[string]codehost.CheckRun) []string {
	var out []string
	for k := range runs {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// withMarker returns the PR's comments carrying marker.
func (h *harness) withMarker(n int, marker string) []codehost.Comment {
	var out []codehost.Comment
	for _, c := range h.fake.Comments(repoName, n) {
		if strings.Contains(c.Body, marker) {
			out = append(out, c)
		}
	}
	return out
}

// events returns the history events of kind.
func (h *harness) events(kind string) []state.Event {
	h.t.Helper()
	evs, err := h.store.ListEvents(h.ctx, state.EventFilter{Kinds: []string{kind}, Limit: 1000})
	require.NoError(h.t, err)
	return evs
}

// testLog is a logger writing to the test's log (shown with -v or on
// failure).
func testLog(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tlogWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tlogWriter struct{ t *testing.T }

func (w tlogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
