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

	// The sources' metrics, filled after each tick's ingest pass (see
	// observeSources); label source is the source's name.
	sourceState      *prometheus.GaugeVec   // source, state: 1 for its state, 0 for the others
	sourceBatches    *prometheus.CounterVec // source
	sourceRows       *prometheus.CounterVec // source, step: chunk | batch
	sourceBlocked    *prometheus.GaugeVec   // source
	sourceBlockedAge *prometheus.GaugeVec   // source
	sourceLag        *prometheus.GaugeVec   // source
	sourceWMLag      *prometheus.GaugeVec   // source
	sourceFenced     *prometheus.CounterVec // source
	sourceReplayed   *prometheus.CounterVec // source
	sourceLateRows   *prometheus.CounterVec // source
	sourceSkipped    *prometheus.CounterVec // source
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
		sourceState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gapless_source_state",
			Help: "A source's state after the last ingest pass: 1 for its state (PENDING_BACKFILL, BACKFILLING, PRIMED, NEEDS_RESYNC), 0 for the others.",
		}, []string{"source", "state"}),
		sourceBatches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gapless_source_batches_applied_total",
			Help: "Live batches applied to a source's serving generation.",
		}, []string{"source"}),
		sourceRows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gapless_source_rows_applied_total",
			Help: "Rows written into a source's generation tables, by step: chunk (a build's snapshot) or batch (a live or catch-up batch).",
		}, []string{"source", "step"}),
		sourceBlocked: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gapless_source_blocked_batches",
			Help: "Staged batches held back by a batch that failed to apply (it included), after the last ingest pass; 0 when none failed.",
		}, []string{"source"}),
		sourceBlockedAge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gapless_source_blocked_oldest_age_seconds",
			Help: "How long ago the batch that blocks the source was staged; 0 when none failed.",
		}, []string{"source"}),
		sourceLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gapless_source_lag_batches",
			Help: "Staged batches the serving generation has not applied yet, after the last ingest pass (all staged batches before the first build).",
		}, []string{"source"}),
		sourceWMLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gapless_source_watermark_lag_seconds",
			Help: "How far the source's published watermark (complete through) is behind the clock; absent until it publishes one.",
		}, []string{"source"}),
		sourceFenced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gapless_source_fenced_total",
			Help: "Stale writes the warehouse fence refused (a retired generation's chunk, batch or swap).",
		}, []string{"source"}),
		sourceReplayed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gapless_source_already_applied_total",
			Help: "Ingest steps the warehouse refused as already applied (a replay after a crash, or a racing worker): written once.",
		}, []string{"source"}),
		sourceLateRows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gapless_source_late_rows_total",
			Help: "Rows applied whose time_column was older than the watermark already published when they arrived.",
		}, []string{"source"}),
		sourceSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gapless_source_batches_skipped_total",
			Help: "Blocked batches skipped because their staged file was removed (no row of them applied).",
		}, []string{"source"}),
	}
	for _, c := range []prometheus.Collector{m.ticks, m.runs, m.intervals, m.deferred, m.leaseLosses, m.lag, m.fenced,
		m.sourceState, m.sourceBatches, m.sourceRows, m.sourceBlocked, m.sourceBlockedAge, m.sourceLag, m.sourceWMLag,
		m.sourceFenced, m.sourceReplayed, m.sourceLateRows, m.sourceSkipped} {
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
