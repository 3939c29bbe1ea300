package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gapless-dev/gapless/codehost"
	"github.com/gapless-dev/gapless/codehost/github"
	"github.com/gapless-dev/gapless/config"
	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/queue"
	"github.com/gapless-dev/gapless/sqlparse"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

// ConfigFrom is the bot's configuration from gapless.yaml's github block.
func ConfigFrom(gh *config.GitHub) Config {
	return Config{
		Repositories:          append([]string(nil), gh.Repositories...),
		ProdBranch:            gh.ProdBranch,
		Target:                config.ProdEnvironment,
		PREnvironmentName:     gh.PREnvironmentName,
		PRFrom:                gh.PRStart.From,
		ProjectDir:            gh.ProjectDir,
		EnableDeployCommand:   gh.EnableDeployCommand,
		CommandNamespace:      gh.CommandNamespace,
		DeployOnMerge:         gh.DeployOnMerge,
		MergeMethod:           gh.MergeMethod,
		CheckIfBlocked:        gh.CheckIfBlockedOnDeploy,
		InvalidateAfterDeploy: gh.InvalidatePREnvironmentAfterDeploy,
		GateMode:              gateMode(gh),
		GateWait:              gh.MergeGate.Wait,
	}
}

// gateMode is the merge gate's mode on prod ("" when prod is not gated).
func gateMode(gh *config.GitHub) string {
	if !gh.MergeGate.Gated(config.ProdEnvironment) {
		return ""
	}
	if gh.MergeGate.WaitFor == config.WaitForRecorded {
		return state.GateRecorded
	}
	return state.GateRendered
}

// HostParams are NewHost's optional parts.
type HostParams struct {
	HTTPClient *http.Client
	Clock      clockwork.Clock
	Wait       func(ctx context.Context, d time.Duration) error
	Metrics    *Metrics
	Log        *slog.Logger
}

// NewHost is the GitHub client gapless.yaml's github block describes: a
// GitHub App (app_id and private_key_file) or a plain token, at api_url.
func NewHost(gh *config.GitHub, p HostParams) (codehost.Host, error) {
	cfg := github.Config{
		APIURL: gh.APIURL, HTTPClient: p.HTTPClient, Clock: p.Clock, Wait: p.Wait, Logger: p.Log,
	}
	if p.Metrics != nil {
		cfg.Observe = func(c github.Call) {
			p.Metrics.GitHubCall(c.Route, c.Status, c.Duration, c.RateRemaining, c.RateLimit)
		}
	}
	switch {
	case gh.UsesApp():
		key, err := gh.PrivateKey()
		if err != nil {
			return nil, err
		}
		cfg.AppID, cfg.PrivateKey = gh.AppID, key
	case !gh.Token.IsZero():
		cfg.Token = gh.Token.Reveal()
	default:
		return nil, &config.Error{File: "gapless.yaml", Key: "github",
			Msg: "github: set app_id and private_key_file (a GitHub App), or token (GitHub Actions' GITHUB_TOKEN)",
			Err: config.ErrMissingGitHubSetting}
	}
	h, err := github.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("github: %w", err)
	}
	return h, nil
}

// ServerParams are what OpenServer assembles a Server from.
type ServerParams struct {
	GitHub    *config.GitHub
	StateConn config.Conn
	Store     state.Store
	Engine    warehouse.Engine
	// Host is the code host; nil builds the GitHub client the github
	// block describes (NewHost with HostParams), reporting its calls to the
	// server's metrics.
	Host       codehost.Host
	HostParams HostParams
	Clock      clockwork.Clock
	Log        *slog.Logger
	// Registry receives the metrics (a fresh one when nil).
	Registry *prometheus.Registry
	Metrics  *Metrics
	// Workers is how many jobs run at once (default 4).
	Workers int
	// MaxWebhookBytes is the webhook body limit (DefaultMaxWebhookBytes).
	MaxWebhookBytes int64
	Hooks           *Hooks
	// Queue adjusts the queue's configuration (tests: a short retry delay).
	Queue func(*queue.Config)
	// OnJob is called for every job outcome, after the metrics (tests
	// wait on it).
	OnJob func(queue.Event)
}

// ErrNoWebhookSecret: serve refuses to start without a webhook secret,
// since an unverifiable delivery must never be acted on.
var ErrNoWebhookSecret = errors.New("github.webhook_secret is required")

// ErrGitHubSetup is wrapped by OpenServer's error when the github block
// cannot make a client (no credentials, an unreadable or bad private key).
var ErrGitHubSetup = errors.New("github client")

// OpenServer assembles serve: the bot, its queue on the state store's
// database, the webhook intake and the metrics. close releases the queue's
// storage (the caller closes the store and the engine).
func OpenServer(ctx context.Context, p ServerParams) (*Server, func(), error) {
	gh := p.GitHub
	if gh == nil {
		return nil, nil, errors.New("gapless.yaml has no github: block; serve needs one")
	}
	if gh.WebhookSecret.IsZero() {
		if err := gh.Require("gapless serve", "webhook_secret"); err != nil {
			return nil, nil, errors.Join(ErrNoWebhookSecret, err)
		}
		return nil, nil, ErrNoWebhookSecret
	}
	if p.Clock == nil {
		p.Clock = clockwork.NewRealClock()
	}
	if p.Log == nil {
		p.Log = slog.New(slog.DiscardHandler)
	}
	if p.Registry == nil {
		p.Registry = prometheus.NewRegistry()
	}
	parser, err := sqlparse.Open()
	if err != nil {
		return nil, nil, fmt.Errorf("starting the SQL parser: %w", err)
	}
	qcfg, closeStorage, err := QueueStorage(ctx, p.StateConn)
	if err != nil {
		return nil, nil, errors.Join(err, parser.Close())
	}
	closeQ := func() {
		closeStorage()
		if err := parser.Close(); err != nil {
			p.Log.Warn("closing the SQL parser", logkey.Error, err)
		}
	}
	var q *queue.Queue
	metrics := p.Metrics
	if metrics == nil {
		metrics = NewMetrics(p.Registry, func(ctx context.Context) ([]queue.Count, error) { return q.Counts(ctx) })
	}
	if p.Host == nil {
		hp := p.HostParams
		hp.Metrics = metrics
		if hp.Clock == nil {
			hp.Clock = p.Clock
		}
		if hp.Log == nil {
			hp.Log = p.Log
		}
		if p.Host, err = NewHost(gh, hp); err != nil {
			closeQ()
			return nil, nil, fmt.Errorf("%w: %w", ErrGitHubSetup, err)
		}
	}
	workers := queue.NewWorkers()
	qcfg.Workers = workers
	qcfg.MaxWorkers = p.Workers
	qcfg.RescueStuckJobsAfter = RescueAfter
	qcfg.Logger = p.Log
	qcfg.OnEvent = func(e queue.Event) {
		metrics.JobEvent(e)
		if p.OnJob != nil {
			p.OnJob(e)
		}
	}
	if p.Queue != nil {
		p.Queue(&qcfg)
	}
	// The workers must be known before the queue opens, and the bot
	// enqueues through the queue: it gets the queue once open.
	late := &lateQueue{}
	b, err := New(ConfigFrom(gh), Deps{
		Host: p.Host, Store: p.Store, Engine: p.Engine, Parser: parser, Queue: late, Clock: p.Clock, Log: p.Log,
		Metrics: metrics, Hooks: p.Hooks,
	})
	if err != nil {
		closeQ()
		return nil, nil, err
	}
	b.Register(workers)
	metrics.WatchGate(func(ctx context.Context) ([]state.Hold, error) {
		return p.Store.ListHolds(ctx, state.ListHoldsParams{ActiveOnly: true})
	}, p.Clock.Now)
	q, err = queue.Open(ctx, qcfg)
	if err != nil {
		closeQ()
		return nil, nil, fmt.Errorf("opening the queue: %w", err)
	}
	late.q = q
	srv := &Server{
		Bot: b, Queue: q, Gatherer: p.Registry, Clock: p.Clock, Log: p.Log,
		Intake: &Intake{
			Secret: []byte(gh.WebhookSecret.Reveal()), MaxBytes: p.MaxWebhookBytes,
			Allowed: b.cfg.Allowed, Parse: github.ParseWebhook, Store: p.Store, Queue: q,
			Clock: p.Clock, Log: p.Log, Metrics: metrics,
		},
	}
	return srv, closeQ, nil
}

// lateQueue is an Enqueuer whose queue is set after the workers that use
// it were registered.
type lateQueue struct{ q *queue.Queue }

func (l *lateQueue) Insert(ctx context.Context, args queue.Args, opts *queue.InsertOpts) (queue.Inserted, error) {
	if l.q == nil {
		return queue.Inserted{}, errors.New("bot: the queue is not open yet")
	}
	return l.q.Insert(ctx, args, opts)
}
