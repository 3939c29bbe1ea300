package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gapless-dev/gapless/config"
	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/queue"
	"github.com/gapless-dev/gapless/state"
)

// QueueFile is the SQLite file of the queue beside a SQLite state store: a
// file of its own, so the queue's writers never make the state store's
// wait (SQLite has one writer at a time).
const QueueFile = "queue.db"

// QueueStorage opens where the queue keeps its jobs for a project whose
// state store is conn: a SQLite file of its own beside a SQLite state
// store, or the state store's PostgreSQL database (River's tables in the
// schema gapless_queue), so several serve processes on one PostgreSQL
// state share one queue. close releases what it opened.
func QueueStorage(ctx context.Context, conn config.Conn) (cfg queue.Config, close func(), err error) {
	switch conn.Driver {
	case config.DriverSQLite:
		if conn.Path == config.Memory {
			return cfg, nil, errors.New("the queue needs a state store on disk, sqlite:// with a file or postgres://, not sqlite://:memory")
		}
		db, err := queue.OpenSQLite(filepath.Join(filepath.Dir(conn.Path), QueueFile))
		if err != nil {
			return cfg, nil, fmt.Errorf("opening the queue beside %s: %w", conn.String(), err)
		}
		return queue.Config{SQLite: db}, func() { _ = db.Close() }, nil
	case config.DriverPostgres:
		pool, err := pgxpool.New(ctx, conn.DSN)
		if err != nil {
			return cfg, nil, fmt.Errorf("opening the queue on %s: %w", conn.String(), err)
		}
		return queue.Config{Postgres: pool, Schema: "gapless_queue"}, pool.Close, nil
	}
	return cfg, nil, fmt.Errorf("the queue cannot live on a %s state store", conn.Driver)
}

// Server is gapless serve: the webhook intake, the queue's workers, the
// periodic reconcile, /healthz and /metrics, in one process. Several may
// run on one PostgreSQL state store: they share the queue, every job runs
// once, and every domain write is a compare-and-swap.
type Server struct {
	Bot      *Bot
	Intake   *Intake
	Queue    *queue.Queue
	Gatherer prometheus.Gatherer
	Clock    clockwork.Clock
	Log      *slog.Logger
	// ReconcileEvery is the period of the reconcile job (default 5m); it
	// also runs once at start.
	ReconcileEvery time.Duration
	// SweepEvery is the period of the merge gate's sweep (default
	// DefaultSweepEvery); it also runs once at start.
	SweepEvery time.Duration
	// Grace bounds how long a stop waits for running jobs before it
	// cancels them (default 30s).
	Grace time.Duration

	readyOnce     sync.Once
	ready         chan struct{}
	mu            sync.Mutex
	started       time.Time
	lastReconcile time.Time
	stopping      bool
}

// Health is what /healthz reports.
type Health struct {
	// Status is "ok" while the server runs and "stopping" after SIGTERM.
	Status        string     `json:"status"`
	Started       time.Time  `json:"started"`
	LastReconcile *time.Time `json:"last_reconcile"`
	Repositories  []string   `json:"repositories"`
	Target        string     `json:"target"`
	// Gate is the merge gate on Target (nil when it is not gated).
	Gate *GateHealth `json:"gate,omitempty"`
}

// GateHealth is the merge gate's part of /healthz.
type GateHealth struct {
	Mode string `json:"mode"`
	// Enforced is false when branch protection does not require the
	// aggregate check (Unsafe says why): the gate then blocks nothing.
	Enforced bool   `json:"enforced"`
	Unsafe   string `json:"unsafe,omitempty"`
	// ActiveHolds and UnrenderedHolds count the unreleased holds and
	// those GitHub does not show yet.
	ActiveHolds     int    `json:"active_holds"`
	UnrenderedHolds int    `json:"unrendered_holds"`
	Error           string `json:"error,omitempty"`
}

// Health returns the server's health report.
func (s *Server) Health() Health {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := Health{Status: "ok", Started: s.started, Repositories: s.Bot.cfg.Repositories, Target: s.Bot.cfg.Target}
	if s.stopping {
		h.Status = "stopping"
	}
	if !s.lastReconcile.IsZero() {
		t := s.lastReconcile
		h.LastReconcile = &t
	}
	if s.Bot.gated() {
		h.Gate = s.gateHealth()
	}
	return h
}

// gateHealth reads the merge gate's state for /healthz.
func (s *Server) gateHealth() *GateHealth {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	g := &GateHealth{Mode: s.Bot.cfg.GateMode, Enforced: true}
	unsafe, err := s.Bot.gateUnsafe(ctx)
	if err != nil {
		g.Error, g.Enforced = err.Error(), false
		return g
	}
	if unsafe != "" {
		g.Enforced, g.Unsafe = false, unsafe
	}
	hs, err := s.Bot.d.Store.ListHolds(ctx, state.ListHoldsParams{Env: s.Bot.cfg.Target, ActiveOnly: true})
	if err != nil {
		g.Error = err.Error()
		return g
	}
	g.ActiveHolds = len(hs)
	for _, h := range hs {
		if h.RenderedAt.IsZero() {
			g.UnrenderedHolds++
		}
	}
	return g
}

// Handler serves POST /webhook, GET /healthz and GET /metrics.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /webhook", s.Intake)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		h := s.Health()
		if h.Status != "ok" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		if err := json.NewEncoder(w).Encode(h); err != nil {
			s.Log.Warn("writing /healthz failed", logkey.Error, err)
		}
	})
	if s.Gatherer != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(s.Gatherer, promhttp.HandlerOpts{}))
	}
	return mux
}

// Run serves on l and runs the queue's workers and the periodic reconcile
// until ctx ends (SIGINT or SIGTERM in the CLI). Then it stops taking
// deliveries, lets running jobs finish within Grace and cancels the rest
// (a cancelled job is retried by the next process: every job is
// idempotent), and returns.
func (s *Server) Run(ctx context.Context, l net.Listener) error {
	if s.Clock == nil {
		s.Clock = clockwork.NewRealClock()
	}
	if s.Log == nil {
		s.Log = slog.New(slog.DiscardHandler)
	}
	if s.ReconcileEvery <= 0 {
		s.ReconcileEvery = 5 * time.Minute
	}
	if s.Grace <= 0 {
		s.Grace = 30 * time.Second
	}
	if s.SweepEvery <= 0 {
		s.SweepEvery = DefaultSweepEvery
	}
	if err := s.Bot.RegisterGate(ctx); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	s.mu.Lock()
	s.started = s.Clock.Now().UTC()
	s.mu.Unlock()
	// The queue outlives ctx by the grace: it is stopped explicitly.
	if err := s.Queue.Start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("serve: starting the queue: %w", err)
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	s.Log.Info("serving", logkey.Addr, l.Addr().String())

	tick := s.Clock.NewTicker(s.ReconcileEvery)
	defer tick.Stop()
	sweep := s.Clock.NewTicker(s.SweepEvery)
	defer sweep.Stop()
	s.reconcile(ctx)
	s.sweep(ctx)
	close(s.readyCh())
	var serveErr error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err := <-errc:
			serveErr = fmt.Errorf("serve: serving on %s: %w", l.Addr(), err)
			break loop
		case <-tick.Chan():
			s.reconcile(ctx)
		case <-sweep.Chan():
			s.sweep(ctx)
		}
	}
	s.mu.Lock()
	s.stopping = true
	s.mu.Unlock()
	s.Log.Info("stopping", logkey.GraceMS, s.Grace.Milliseconds())
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.Grace)
	defer cancel()
	if serveErr == nil {
		if err := srv.Shutdown(shutCtx); err != nil {
			serveErr = fmt.Errorf("serve: shutting the HTTP server down: %w", err)
		} else if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
			serveErr = fmt.Errorf("serve: serving on %s: %w", l.Addr(), err)
		}
	}
	if err := s.Queue.Stop(shutCtx); err != nil {
		serveErr = errors.Join(serveErr, fmt.Errorf("serve: stopping the queue: %w", err))
	}
	return serveErr
}

// Ready is closed once Run serves, its workers run and its first
// reconcile job is enqueued.
func (s *Server) Ready() <-chan struct{} { return s.readyCh() }

func (s *Server) readyCh() chan struct{} {
	s.readyOnce.Do(func() { s.ready = make(chan struct{}) })
	return s.ready
}

// reconcile enqueues one reconcile job for this period (unique, so
// replicas ticking together run it once).
func (s *Server) reconcile(ctx context.Context) {
	now := s.Clock.Now().UTC()
	round := now.UnixNano() / int64(s.ReconcileEvery)
	if _, err := s.Queue.Insert(ctx, ReconcileJob{Round: round}, &queue.InsertOpts{Unique: true}); err != nil {
		s.Log.Warn("enqueueing the reconcile job failed; the next period tries again", logkey.Error, err)
		return
	}
	s.mu.Lock()
	s.lastReconcile = now
	s.mu.Unlock()
}

// sweep enqueues one merge-gate sweep job for this period (unique, so
// replicas ticking together sweep once).
func (s *Server) sweep(ctx context.Context) {
	if !s.Bot.gated() {
		return
	}
	round := s.Clock.Now().UnixNano() / int64(s.SweepEvery)
	if _, err := s.Queue.Insert(ctx, SweepJob{Round: round}, &queue.InsertOpts{Unique: true}); err != nil {
		s.Log.Warn("enqueueing the merge gate's sweep failed; the next period tries again", logkey.Error, err)
	}
}
