package bot_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/backend"
	"github.com/gapless-dev/gapless/bot"
	"github.com/gapless-dev/gapless/codehost"
	"github.com/gapless-dev/gapless/codehost/github"
	"github.com/gapless-dev/gapless/codehost/githubfake"
	"github.com/gapless-dev/gapless/config"
	"github.com/gapless-dev/gapless/gate"
	"github.com/gapless-dev/gapless/internal/pgtest"
	"github.com/gapless-dev/gapless/prplan"
	"github.com/gapless-dev/gapless/queue"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse/duckdb"
)

// benchStores are the state stores the benchmarks run on: the embedded
// default (a SQLite state file, the queue's own SQLite file beside it) and
// PostgreSQL (state and queue in one database).
var benchStores = []struct {
	name     string
	postgres bool
}{{"sqlite", false}, {"postgres", true}}

// benchConn is a fresh state store's connection for tb: a SQLite file in
// a temporary folder, or a fresh PostgreSQL database.
func benchConn(tb testing.TB, postgres bool) config.Conn {
	tb.Helper()
	dir := tb.TempDir()
	s := "sqlite://" + filepath.Join(dir, ".gapless", "state.db")
	if postgres {
		s = pgtest.NewDatabase(tb)
	}
	conn, err := config.ParseConn(s, dir)
	require.NoError(tb, err)
	return conn
}

// benchDeliveryIDs returns a generator of fresh X-GitHub-Delivery ids (GUIDs),
// safe for concurrent use.
func benchDeliveryIDs() func() string {
	var n atomic.Uint64
	run := time.Now().UnixNano()
	return func() string {
		i := n.Add(1)
		return fmt.Sprintf("%08x-%04x-4000-a000-%012x", uint32(run), uint16(run>>32), i)
	}
}

// benchIntake is the webhook intake as serve assembles it (bot.OpenServer's
// Intake): the state store, an insert-only queue on the storage serve
// gives it (bot.QueueStorage), GitHub's payload parser and the metrics.
type benchIntake struct {
	intake *bot.Intake
	store  state.Store
	queue  *queue.Queue
	body   []byte
	sig    string
	id     func() string
}

// benchPayload is the pull_request "synchronize" payload the fake
// GitHub sends for a pull request on the benchmarks' project.
func benchPayload(tb testing.TB) []byte {
	tb.Helper()
	fake := githubfake.NewT(tb, githubfake.Options{})
	fake.CreateRepo(repoName, "main")
	fake.Commit(repoName, "main", benchProject(0), "a hundred models")
	fake.Commit(repoName, "leaf", benchLeafChange(1), "change the leaf")
	n := fake.OpenPR(repoName, githubfake.PRSpec{Title: "leaf", Author: writer, Head: "leaf", Base: "main"})
	body := fake.PullRequestPayload(repoName, n, "synchronize")
	require.NotEmpty(tb, body)
	return body
}

func newBenchIntake(b *testing.B, postgres bool, body []byte) *benchIntake {
	b.Helper()
	ctx := b.Context()
	conn := benchConn(b, postgres)
	store, err := backend.OpenStore(ctx, conn)
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, store.Close()) })
	qcfg, closeQ, err := bot.QueueStorage(ctx, conn)
	require.NoError(b, err)
	b.Cleanup(closeQ)
	qcfg.Logger = slog.New(slog.DiscardHandler)
	q, err := queue.Open(ctx, qcfg) // no Workers: insert-only
	require.NoError(b, err)
	cfg := bot.Config{Repositories: []string{repoName}}
	r := &benchIntake{
		intake: &bot.Intake{
			Secret: []byte(secret), Allowed: cfg.Allowed, Parse: github.ParseWebhook,
			Store: store, Queue: q, Clock: clockwork.NewRealClock(),
			Metrics: bot.NewMetrics(prometheus.NewRegistry(), q.Counts),
		},
		store: store, queue: q, body: body, sig: codehost.Sign([]byte(secret), body), id: benchDeliveryIDs(),
	}
	// One delivery untimed: the pools' first connections are made (serve's
	// are warm), so that even -benchtime 1x times a steady delivery.
	require.NoError(b, r.deliver())
	return r
}

// deliver sends one delivery with a fresh id through the intake's
// ServeHTTP; anything but 202 is an error.
func (r *benchIntake) deliver() error {
	req := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(r.body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "pull_request")
	req.Header.Set("X-GitHub-Delivery", r.id())
	req.Header.Set(codehost.SignatureHeader, r.sig)
	w := httptest.NewRecorder()
	r.intake.ServeHTTP(w, req)
	if w.Code != http.StatusAccepted {
		return fmt.Errorf("the intake answered %d, not 202: %s", w.Code, w.Body.String())
	}
	return nil
}

// BenchmarkWebhookIntake measures the webhook intake: verify, record and
// enqueue one signed pull_request "synchronize" delivery (a fresh delivery
// id each time) through bot.Intake.ServeHTTP with httptest, on the
// embedded default (SQLite state and the queue's own SQLite file beside
// it) and on PostgreSQL (state and queue in one database). Targets: under
// 5 ms per delivery on PostgreSQL; 200 deliveries per second sustained on
// the embedded default.
//
// store=*/turns runs, in turns in each iteration, a delivery through the
// intake and then each of its parts alone, each with a fresh id: the
// HMAC check (codehost.VerifySignature), the payload's parse
// (github.ParseWebhook), the store's RecordDelivery and the queue's
// unique insert. ns/op is one turn (all five); ms/delivery and
// deliveries/s are the intake's alone, hmac-ms, parse-ms, record-ms and
// enqueue-ms the parts', and x_parts the intake over the sum of its
// parts (what the HTTP plumbing, logging and metrics add).
//
// store=*/parallel is the sustained rate with GitHub's concurrency:
// deliveries through the intake from 4×GOMAXPROCS goroutines at once
// (b.RunParallel); ns/op is wall time per delivery, deliveries/s its
// inverse.
//
// The queue is insert-only, as when no worker drains it; jobs accumulate
// in it as the benchmark runs.
func BenchmarkWebhookIntake(b *testing.B) {
	body := benchPayload(b)
	for _, st := range benchStores {
		b.Run("store="+st.name+"/turns", func(b *testing.B) {
			r := newBenchIntake(b, st.postgres, body)
			ctx := b.Context()
			ev, err := github.ParseWebhook("pull_request", r.id(), body)
			require.NoError(b, err)
			var intake, hmac, parse, record, enqueue time.Duration
			b.ResetTimer()
			for range b.N {
				t := time.Now()
				err := r.deliver()
				intake += time.Since(t)
				if err != nil {
					b.Fatal(err)
				}

				t = time.Now()
				if err := codehost.VerifySignature([]byte(secret), body, r.sig); err != nil {
					b.Fatal(err)
				}
				hmac += time.Since(t)

				id := r.id()
				t = time.Now()
				if _, err := github.ParseWebhook("pull_request", id, body); err != nil {
					b.Fatal(err)
				}
				parse += time.Since(t)

				t = time.Now()
				fresh, err := r.store.RecordDelivery(ctx, state.RecordDeliveryParams{ID: id, Event: "pull_request", Action: ev.Action, Repo: ev.Repo, Now: t.UTC()})
				record += time.Since(t)
				if err != nil || !fresh {
					b.Fatalf("RecordDelivery: fresh %t, %v", fresh, err)
				}

				ev.DeliveryID = r.id()
				t = time.Now()
				ins, err := r.queue.Insert(ctx, bot.DeliveryJob{Event: ev}, &queue.InsertOpts{Unique: true})
				enqueue += time.Since(t)
				if err != nil || ins.Duplicate {
					b.Fatalf("Insert: duplicate %t, %v", ins.Duplicate, err)
				}
			}
			b.StopTimer()
			n := float64(b.N)
			ms := func(d time.Duration) float64 { return d.Seconds() * 1000 / n }
			b.ReportMetric(ms(intake), "ms/delivery")
			b.ReportMetric(n/intake.Seconds(), "deliveries/s")
			b.ReportMetric(ms(hmac), "hmac-ms")
			b.ReportMetric(ms(parse), "parse-ms")
			b.ReportMetric(ms(record), "record-ms")
			b.ReportMetric(ms(enqueue), "enqueue-ms")
			b.ReportMetric(float64(intake)/float64(hmac+parse+record+enqueue), "x_parts")
			b.ReportMetric(float64(len(body)), "payload-B")
		})
		b.Run("store="+st.name+"/parallel", func(b *testing.B) {
			r := newBenchIntake(b, st.postgres, body)
			b.SetParallelism(4)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := r.deliver(); err != nil {
						b.Error(err) // not Fatal: this is not the benchmark's goroutine
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "deliveries/s")
		})
	}
}

// benchModels, benchLayers: BenchmarkSynchronize100Models' project size.
const (
	benchModels = 100
	benchLayers = 10
)

// benchProject is a repository holding a gapless project of benchModels
// models in benchLayers layers: the first layer's models are daily
// INCREMENTAL_BY_TIME_RANGE over generate_series, every other one a FULL
// model reading one model of the layer above. rev changes the query of
// the last model (a leaf) when it is not zero.
func benchProject(rev int) map[string]string {
	files := map[string]string{
		"README.md":    "# analytics\n",
		"gapless.yaml": "model_defaults:\n  dialect: duckdb\n  start: '2024-01-01'\n",
	}
	per := benchModels / benchLayers
	for i := range benchModels {
		layer, j := i/per, i%per
		src := fmt.Sprintf(`MODEL (
  name bench.m%03d,
  kind INCREMENTAL_BY_TIME_RANGE (time_column ts),
  cron '@daily'
);

SELECT g.ts AS ts, %d AS id, 1 AS v
FROM generate_series(@start_ts, @end_ts, INTERVAL 1 HOUR) AS g(ts)
`, i, j)
		if layer > 0 {
			where := ""
			if i == benchModels-1 && rev > 0 {
				where = fmt.Sprintf("\nWHERE p.v > -%d", rev)
			}
			src = fmt.Sprintf(`MODEL (name bench.m%03d, kind FULL, cron '@daily');

SELECT p.ts, p.id, p.v + 1 AS v
FROM bench.m%03d AS p%s
`, i, (layer-1)*per+j, where)
		}
		files[fmt.Sprintf("models/m%03d.sql", i)] = src
	}
	return files
}

// benchLeafChange is the commit that changes only the last model, to rev.
func benchLeafChange(rev int) map[string]string {
	name := fmt.Sprintf("models/m%03d.sql", benchModels-1)
	return map[string]string{name: benchProject(rev)[name]}
}

// benchServe is gapless serve on the layered project, as the scenario
// harness runs it (the fake GitHub, a real River queue, a DuckDB
// warehouse in memory), but logging nothing and timing its jobs.
type benchServe struct {
	fake  *githubfake.Fake
	srv   *bot.Server
	store state.Store

	mu        sync.Mutex
	changed   chan struct{} // a job ended or a check run was written (capacity 1, never blocks)
	planStart map[string]time.Time
	planned   map[string]time.Time
}

// wake tells waitRendered to look at the fake again.
func (r *benchServe) wake() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// benchTimedStore is the state store, noting when a verdict is stored for a
// head (the plan's end).
type benchTimedStore struct {
	state.Store
	r *benchServe
}

func (s benchTimedStore) PutPRCheck(ctx context.Context, p state.PutPRCheckParams) (state.PRCheck, error) {
	pc, err := s.Store.PutPRCheck(ctx, p)
	if err == nil && p.Verdict != state.VerdictPending {
		s.r.mu.Lock()
		s.r.planned[p.HeadSHA] = time.Now()
		s.r.mu.Unlock()
	}
	return pc, err
}

// benchWakingHost is the code host, waking the waiter after every check run
// written, so that it sees the checks rendered the moment they are.
type benchWakingHost struct {
	codehost.Host
	r *benchServe
}

func (h benchWakingHost) UpsertCheckRun(ctx context.Context, repo string, c codehost.CheckRun) (codehost.CheckRun, error) {
	out, err := h.Host.UpsertCheckRun(ctx, repo, c)
	h.r.wake()
	return out, err
}

func newBenchServe(b *testing.B, postgres bool) *benchServe {
	b.Helper()
	ctx := b.Context()
	clock := clockwork.NewFakeClockAt(t0)
	fake := githubfake.NewT(b, githubfake.Options{Clock: clock})
	fake.CreateRepo(repoName, "main")
	fake.Commit(repoName, "main", benchProject(0), "a hundred models")
	fake.SetPermission(repoName, writer, codehost.PermissionWrite)
	fake.SetRequiredChecks(repoName, "main", gate.CheckAggregate)

	dir := b.TempDir()
	require.NoError(b, os.WriteFile(filepath.Join(dir, "app.pem"), fake.AppPrivateKeyPEM(), 0o600))
	conn := benchConn(b, postgres)
	stateURL := "sqlite://" + conn.DSN
	if postgres {
		stateURL = conn.DSN
	}
	yaml := fmt.Sprintf(`state: %s
warehouse: 'duckdb://:memory:'
github:
  app_id: %d
  private_key_file: app.pem
  webhook_secret: %s
  repositories: [%s]
  api_url: %s
  pr_environment_name: analytics
  pr_start: 1d
`, stateURL, fake.AppID(), secret, repoName, fake.URL())
	require.NoError(b, os.WriteFile(filepath.Join(dir, "gapless.yaml"), []byte(yaml), 0o644))
	cfg, err := config.Load(dir)
	require.NoError(b, err)

	store, err := backend.OpenStore(ctx, cfg.State)
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, store.Close()) })
	engine, err := duckdb.Open(ctx, "", duckdb.Options{})
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, engine.Close()) })

	// prod serves the project, so that a pull request's environment
	// reuses its tables and builds only what the pull request changes.
	root := b.TempDir()
	for name, content := range benchProject(0) {
		require.NoError(b, os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755))
		require.NoError(b, os.WriteFile(filepath.Join(root, name), []byte(content), 0o644))
	}
	_, _, err = prplan.Deploy(ctx, prplan.Params{Store: store, Engine: engine, ProjectRoot: root, Clock: clock})
	require.NoError(b, err)

	r := &benchServe{fake: fake, store: store, changed: make(chan struct{}, 1), planStart: map[string]time.Time{}, planned: map[string]time.Time{}}
	discard := slog.New(slog.DiscardHandler)
	host, err := bot.NewHost(cfg.GitHub, bot.HostParams{Clock: clock, Log: discard, Wait: func(ctx context.Context, d time.Duration) error { return ctx.Err() }})
	require.NoError(b, err)
	srv, closeQ, err := bot.OpenServer(ctx, bot.ServerParams{
		GitHub: cfg.GitHub, StateConn: cfg.State, Store: benchTimedStore{store, r}, Engine: engine, Host: benchWakingHost{host, r},
		Clock: clock, Workers: 4, Log: discard,
		Hooks: &bot.Hooks{BeforePlan: func(_ context.Context, _ string, _ int, head string) error {
			r.mu.Lock()
			r.planStart[head] = time.Now()
			r.mu.Unlock()
			return nil
		}},
		OnJob: func(queue.Event) { r.wake() },
	})
	require.NoError(b, err)
	b.Cleanup(closeQ)
	r.srv = srv
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	require.NoError(b, err)
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stopped := make(chan error, 1)
	go func() { stopped <- srv.Run(runCtx, l) }()
	b.Cleanup(func() {
		cancel()
		require.NoError(b, <-stopped)
	})
	fake.SetWebhook("http://"+l.Addr().String()+"/webhook", []byte(secret))
	r.idle(b)
	return r
}

// idle waits until the queue has nothing running or due and the fake no
// delivery in flight, until both stay quiet (the harness's idle).
func (r *benchServe) idle(b *testing.B) {
	b.Helper()
	ctx, cancel := context.WithTimeout(b.Context(), 60*time.Second)
	defer cancel()
	for {
		before := len(r.fake.Deliveries())
		r.fake.Flush()
		require.NoError(b, r.srv.Queue.WaitIdle(ctx))
		r.fake.Flush()
		if len(r.fake.Deliveries()) == before {
			return
		}
	}
}

// waitRendered waits, on the bot's job events, until the fake shows the
// three checks on head completed, and returns when it first saw them.
// A check that completed other than green fails the benchmark: a broken
// plan is fast and would time nothing.
func (r *benchServe) waitRendered(b *testing.B, head string) time.Time {
	b.Helper()
	ctx, cancel := context.WithTimeout(b.Context(), 60*time.Second)
	defer cancel()
	want := []string{gate.CheckEnvironment, gate.CheckPreview, gate.CheckAggregate}
	for {
		runs := r.fake.CheckRuns(repoName, head)
		done := 0
		for _, run := range runs {
			if slices.Contains(want, run.Name) && run.Status == codehost.StatusCompleted {
				if run.Conclusion != codehost.ConclusionSuccess {
					b.Fatalf("check %q on %s completed %s: %s\n%s", run.Name, head, run.Conclusion, run.Title, run.Summary)
				}
				done++
			}
		}
		if done == len(want) {
			return time.Now()
		}
		select {
		case <-r.changed:
		case <-ctx.Done():
			b.Fatalf("the checks on %s were not rendered completed within 60s; the fake shows %v", head, runs)
		}
	}
}

// BenchmarkSynchronize100Models measures a push to an open pull request
// of a 100-model project (ten layers; the first daily incremental over
// generate_series, the others FULL), with prod serving the project and the
// pull request planned once: each iteration pushes a commit changing the
// last model (a leaf: its PR environment builds that one FULL model) and
// waits, on the bot's job events, until the fake GitHub shows the three
// checks on the new head completed. It runs through gapless serve as a
// user runs it: the fake's signed webhooks, the intake, a real River
// queue with 4 workers, SQLite (embedded default) or PostgreSQL state, and
// a DuckDB warehouse in memory. Target: under 2 s.
//
// ns/op (and s/op) is from the push (the fake delivers push and
// pull_request "synchronize" synchronously) until the fake shows the
// third check completed (a wrapper of the code host wakes the waiter
// after every check run written). The split: webhook-ms is until the plan
// job starts planning (the intake, the delivery job, the plan job's fetch,
// its reads of the store and of the pull request), plan-ms until its
// verdict is stored (the checkout, the PR environment's plan and build,
// the prod preview), and render-ms from there until the checks show
// completed (the render job's fetch and its writes to the fake). What the
// push's other deliveries cause (the comment's edit coming back as a
// webhook) settles between iterations, untimed. The last head's checks
// are asserted to say what was built and previewed, so a plan that
// failed or skipped its work cannot pass for a fast one.
func BenchmarkSynchronize100Models(b *testing.B) {
	for _, st := range benchStores {
		b.Run("store="+st.name, func(b *testing.B) {
			r := newBenchServe(b, st.postgres)
			r.fake.Commit(repoName, "leaf", benchLeafChange(1), "change the leaf")
			n := r.fake.OpenPR(repoName, githubfake.PRSpec{Title: "leaf", Author: writer, Head: "leaf", Base: "main"})
			r.waitRendered(b, r.fake.PR(repoName, n).HeadSHA)
			r.idle(b)

			var total, webhook, planning, render time.Duration
			b.ResetTimer()
			for i := range b.N {
				start := time.Now()
				head := r.fake.Commit(repoName, "leaf", benchLeafChange(i+2), fmt.Sprintf("change the leaf (%d)", i+2))
				end := r.waitRendered(b, head)

				b.StopTimer()
				r.mu.Lock()
				planStart, planEnd := r.planStart[head], r.planned[head]
				r.mu.Unlock()
				require.False(b, planStart.IsZero() || planEnd.IsZero(), "the head %s was rendered without a plan", head)
				total += end.Sub(start)
				webhook += planStart.Sub(start)
				planning += planEnd.Sub(planStart)
				render += end.Sub(planEnd)
				r.idle(b)
				b.StartTimer()
			}
			b.StopTimer()
			n64 := float64(b.N)
			b.ReportMetric(total.Seconds()/n64, "s/op")
			b.ReportMetric(webhook.Seconds()*1000/n64, "webhook-ms")
			b.ReportMetric(planning.Seconds()*1000/n64, "plan-ms")
			b.ReportMetric(render.Seconds()*1000/n64, "render-ms")
			runs := map[string]codehost.CheckRun{}
			for _, run := range r.fake.CheckRuns(repoName, r.fake.PR(repoName, n).HeadSHA) {
				runs[run.Name] = run
			}
			leaf := fmt.Sprintf("bench.m%03d", benchModels-1)
			require.Contains(b, runs[gate.CheckEnvironment].Summary, "| `"+leaf+"` |", "the PR environment built the changed leaf")
			require.Equal(b, "1 model changed, 0 models to backfill", runs[gate.CheckPreview].Title)
			require.Contains(b, runs[gate.CheckPreview].Summary, leaf)
			comments := 0
			for _, c := range r.fake.Comments(repoName, n) {
				if strings.Contains(c.Body, bot.SummaryMarker) {
					comments++
				}
			}
			require.Equal(b, 1, comments, "one summary comment, edited in place")
		})
	}
}
