package scheduler

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the daemon's Prometheus metrics. Their names and labels are
// stable: dashboards and alerts depend on them.
type metrics struct {
	ticks       prometheus.Counter
	runs        *prometheus.CounterVec // env, outcome: ok | fenced | stopped | error
	intervals   *prometheus.CounterVec // env
	deferred    *prometheus.CounterVec // env, reason: leased
	leaseLosses prometheus.Counter
	lag         *prometheus.GaugeVec // env
	fenced      *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		ticks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gapless_scheduler_ticks_total",
			Help: "Scheduler ticks completed (with or without work).",
		}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gapless_scheduler_runs_total",
			Help: "Runs started because an environment had due work, by outcome: ok, fenced (stopped by a promotion and followed), stopped (the daemon was stopping), error.",
		}, []string{"env", "outcome"}),
		intervals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gapless_scheduler_intervals_total",
			Help: "Intervals (buckets of each model's interval unit) computed and recorded.",
		}, []string{"env"}),
		deferred: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gapless_scheduler_deferred_total",
			Help: "Models whose due work was deferred to a later tick, by reason (leased: another daemon or a deploy holds the version's lease).",
		}, []string{"env", "reason"}),
		leaseLosses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gapless_scheduler_lease_losses_total",
			Help: "Version leases found lost (expired and taken over) while their work ran.",
		}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gapless_scheduler_lag_seconds",
			Help: "How far the end of the oldest due interval not yet computed is behind the execution time, after the last tick; 0 when caught up.",
		}, []string{"env"}),
		fenced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gapless_scheduler_fenced_total",
			Help: "Runs stopped because the environment was promoted meanwhile (circuit breaker or a write refused by its fence).",
		}, []string{"env"}),
	}
	for _, c := range []prometheus.Collector{m.ticks, m.runs, m.intervals, m.deferred, m.leaseLosses, m.lag, m.fenced} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, fmt.Errorf("scheduler: metrics already registered (one Scheduler per registry): %w", err)
			}
			return nil, fmt.Errorf("scheduler: registering metrics: %w", err)
		}
	}
	return m, nil
}
