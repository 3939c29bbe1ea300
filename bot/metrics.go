package bot

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gapless-dev/gapless/queue"
	"github.com/gapless-dev/gapless/state"
)

// Delivery outcomes, the closed label set of
// gapless_webhook_deliveries_total.
const (
	OutcomeAccepted         = "accepted"
	OutcomeDuplicate        = "duplicate"
	OutcomeInvalidSignature = "invalid_signature"
	OutcomeTooLarge         = "too_large"
	OutcomeBadRequest       = "bad_request"
	OutcomeRepoNotAllowed   = "repo_not_allowed"
	OutcomeIgnored          = "ignored"
	OutcomeError            = "error"
)

// DeliveryOutcomes lists the outcomes.
var DeliveryOutcomes = []string{
	OutcomeAccepted, OutcomeDuplicate, OutcomeInvalidSignature, OutcomeTooLarge,
	OutcomeBadRequest, OutcomeRepoNotAllowed, OutcomeIgnored, OutcomeError,
}

// Metrics are serve's Prometheus metrics.
type Metrics struct {
	deliveries  *prometheus.CounterVec
	jobOutcomes *prometheus.CounterVec
	calls       *prometheus.CounterVec
	callSeconds *prometheus.HistogramVec
	callErrors  *prometheus.CounterVec
	rateRemain  prometheus.Gauge
	rateLimit   prometheus.Gauge
	jobsByState *jobsCollector
	gateRenders *prometheus.CounterVec
	gateSweeps  prometheus.Counter
	reg         prometheus.Registerer
}

// NewMetrics registers the bot's metrics in reg. counts, when set, is
// asked at every scrape for the queue's jobs by kind and state.
func NewMetrics(reg prometheus.Registerer, counts func(context.Context) ([]queue.Count, error)) *Metrics {
	m := &Metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gapless_webhook_deliveries_total",
			Help: "Webhook deliveries received, by outcome (accepted, duplicate, invalid_signature, too_large, bad_request, repo_not_allowed, ignored, error).",
		}, []string{"outcome"}),
		jobOutcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gapless_queue_job_outcomes_total",
			Help: "Job runs that ended, by kind and outcome (completed, failed, discarded, cancelled, snoozed).",
		}, []string{"kind", "outcome"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gapless_github_requests_total",
			Help: "Requests made to the GitHub API, retries included, by route template and status code (0: no answer).",
		}, []string{"route", "code"}),
		callSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gapless_github_request_duration_seconds",
			Help:    "Latency of GitHub API requests, by route template.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"route"}),
		callErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gapless_github_request_errors_total",
			Help: "GitHub API requests that failed (no answer, or a status of 400 or more), by route template.",
		}, []string{"route"}),
		rateRemain: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gapless_github_ratelimit_remaining",
			Help: "X-RateLimit-Remaining of the latest GitHub answer that carried it: the rate-limit headroom.",
		}),
		rateLimit: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gapless_github_ratelimit_limit",
			Help: "X-RateLimit-Limit of the latest GitHub answer that carried it.",
		}),
	}
	m.gateRenders = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gapless_gate_renders_total",
		Help: "Renders of merge-gate holds on GitHub, by outcome (rendered, failed): a failed render keeps the gate shut and is retried.",
	}, []string{"outcome"})
	m.gateSweeps = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "gapless_gate_sweeps_total",
		Help: "Rounds of the merge gate's sweep (settles left undone, dead deploys, renders and comments re-armed).",
	})
	m.reg = reg
	reg.MustRegister(m.gateRenders, m.gateSweeps)
	m.gateRenders.WithLabelValues("rendered")
	m.gateRenders.WithLabelValues("failed")
	m.rateRemain.Set(-1)
	m.rateLimit.Set(-1)
	reg.MustRegister(m.deliveries, m.jobOutcomes, m.calls, m.callSeconds, m.callErrors, m.rateRemain, m.rateLimit)
	for _, o := range DeliveryOutcomes {
		m.deliveries.WithLabelValues(o)
	}
	if counts != nil {
		m.jobsByState = &jobsCollector{counts: counts, desc: prometheus.NewDesc(
			"gapless_queue_jobs", "Jobs in the queue, by kind and state.", []string{"kind", "state"}, nil)}
		reg.MustRegister(m.jobsByState)
	}
	return m
}

// Delivery counts one webhook delivery's outcome.
func (m *Metrics) Delivery(outcome string) {
	if m != nil {
		m.deliveries.WithLabelValues(outcome).Inc()
	}
}

// JobEvent counts one job outcome (queue.Config.OnEvent).
func (m *Metrics) JobEvent(e queue.Event) {
	if m != nil {
		m.jobOutcomes.WithLabelValues(e.Kind, e.State).Inc()
	}
}

// GitHubCall counts one request to the code host.
func (m *Metrics) GitHubCall(route string, status int, d time.Duration, remaining, limit int) {
	if m == nil {
		return
	}
	m.calls.WithLabelValues(route, strconv.Itoa(status)).Inc()
	m.callSeconds.WithLabelValues(route).Observe(d.Seconds())
	if status == 0 || status >= 400 {
		m.callErrors.WithLabelValues(route).Inc()
	}
	if remaining >= 0 {
		m.rateRemain.Set(float64(remaining))
	}
	if limit >= 0 {
		m.rateLimit.Set(float64(limit))
	}
}

// jobsCollector asks the queue for its counts at every scrape.
type jobsCollector struct {
	counts func(context.Context) ([]queue.Count, error)
	desc   *prometheus.Desc
}

func (c *jobsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *jobsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts, err := c.counts(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	for _, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n.N), n.Kind, n.State)
	}
}

// GateRender counts one hold render's outcome.
func (m *Metrics) GateRender(ok bool) {
	if m != nil {
		m.gateRenders.WithLabelValues(map[bool]string{true: "rendered", false: "failed"}[ok]).Inc()
	}
}

// GateSweep counts one sweep round.
func (m *Metrics) GateSweep() {
	if m != nil {
		m.gateSweeps.Inc()
	}
}

// WatchGate registers the merge gate's gauges, read from holds at every
// scrape: gapless_gate_holds (unreleased holds, by environment and
// whether GitHub shows them) and gapless_gate_render_lag_seconds (the
// oldest unrendered hold's age, by environment).
func (m *Metrics) WatchGate(holds func(context.Context) ([]state.Hold, error), now func() time.Time) {
	if m == nil || m.reg == nil {
		return
	}
	m.reg.MustRegister(&gateCollector{holds: holds, now: now,
		count: prometheus.NewDesc("gapless_gate_holds", "Unreleased merge-gate holds, by environment and rendered (true: GitHub shows the hold).", []string{"env", "rendered"}, nil),
		lag:   prometheus.NewDesc("gapless_gate_render_lag_seconds", "Age of the oldest hold not yet rendered on GitHub, by environment (0: none lags).", []string{"env"}, nil),
	})
}

// gateCollector reads the holds at every scrape.
type gateCollector struct {
	holds      func(context.Context) ([]state.Hold, error)
	now        func() time.Time
	count, lag *prometheus.Desc
}

func (c *gateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.count; ch <- c.lag }

func (c *gateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	hs, err := c.holds(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.count, err)
		return
	}
	type key struct {
		env      string
		rendered bool
	}
	counts := map[key]int{}
	lag := map[string]float64{}
	now := c.now()
	for _, h := range hs {
		counts[key{h.Env, !h.RenderedAt.IsZero()}]++
		if _, ok := lag[h.Env]; !ok {
			lag[h.Env] = 0
		}
		if h.RenderedAt.IsZero() {
			lag[h.Env] = max(lag[h.Env], now.Sub(h.CreatedAt).Seconds())
		}
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.count, prometheus.GaugeValue, float64(n), k.env, strconv.FormatBool(k.rendered))
	}
	for env, s := range lag {
		ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, s, env)
	}
}
