package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Health is what /healthz reports.
type Health struct {
	// Status is always "ok": /healthz answers 200 as long as the process
	// serves, before the first tick too (a first tick that backfills for an
	// hour must not get the daemon killed by a liveness probe). Alert on
	// LastTick's age, or on gapless_scheduler_lag_seconds, for staleness.
	Status string `json:"status"`
	// Ticks counts completed ticks.
	Ticks int64 `json:"ticks"`
	// LastTick is when the last tick completed (null before the first).
	LastTick *time.Time `json:"last_tick"`
	// LastError is the last tick's error, "" when it succeeded.
	LastError string `json:"last_error,omitempty"`
	// InTickSince is when the tick in progress started (null between
	// ticks).
	InTickSince *time.Time `json:"in_tick_since,omitempty"`
	// Envs are the environments kept fresh.
	Envs []string `json:"envs"`
}

func (s *Scheduler) setInTick(at time.Time) {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	at = at.UTC()
	s.stats.InTickSince = &at
}

func (s *Scheduler) setTicked(at time.Time, err error) {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	at = at.UTC()
	s.stats.Ticks++
	s.stats.LastTick = &at
	s.stats.InTickSince = nil
	s.stats.LastError = ""
	if err != nil {
		s.stats.LastError = err.Error()
	}
}

// Health returns the daemon's health report.
func (s *Scheduler) Health() Health {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	h := s.stats
	h.Status = "ok"
	h.Envs = s.EnvNames()
	return h
}

// Handler serves /healthz (200 and the Health JSON) and /metrics (the
// daemon's Prometheus metrics, in the registry it registered them in).
func (s *Scheduler) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(s.Health()); err != nil {
			s.emit(HealthWriteFailed{Err: err})
		}
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.gather, promhttp.HandlerOpts{}))
	return mux
}

// Serve listens on addr and serves Handler until ctx ends, then shuts the
// server down (waiting up to five seconds for requests in flight). A listen
// failure is returned at once. ready, if set, is called with the bound
// address (useful with port 0).
func (s *Scheduler) Serve(ctx context.Context, addr string, ready func(net.Addr)) error {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("scheduler: listening on %s: %w", addr, err)
	}
	s.emit(Serving{Addr: l.Addr().String()})
	if ready != nil {
		ready(l.Addr())
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return fmt.Errorf("scheduler: serving on %s: %w", addr, err)
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		return fmt.Errorf("scheduler: shutting the HTTP server down: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("scheduler: serving on %s: %w", addr, err)
	}
	return nil
}
