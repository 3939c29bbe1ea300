// Package bot is gapless's pull-request bot: it turns code-host webhooks
// into durable jobs, and its jobs plan every pull request (its own
// environment and a preview of what deploying it to prod would do), keep
// its check runs and one sticky comment on the code host, and deploy a pull
// request on /deploy or on merge.
//
// Domain state lives in the state store (state.CodeHostStore): verdicts,
// check renders, comment claims and deploy attempts, each written as a
// compare-and-swap on a revision, a state or a lease token. Jobs (package
// queue) only carry work: each is short where it can be, idempotent, and
// reads what it needs from the store when it runs, so a job that runs
// twice, late or after a newer one cannot regress what the store or the
// code host shows.
//
// What a check shows is gate.Desired of the stored verdict, the PR's head
// and the target's generation: a verdict for an older head or planned
// against another generation of prod is never green.
package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/gapless-dev/gapless/codehost"
	"github.com/gapless-dev/gapless/deploygate"
	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/queue"
	"github.com/gapless-dev/gapless/sqlparse"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

// Config is the bot's configuration: gapless.yaml's github block, as the
// bot reads it.
type Config struct {
	// Repositories is the allowlist (owner/name, lower case): deliveries
	// from any other repository are refused.
	Repositories []string
	// ProdBranch is the branch deploys merge into; pull requests with
	// another base are not planned.
	ProdBranch string
	// Target is the environment pull requests deploy to (prod).
	Target string
	// PREnvironmentName is the prefix of PR environments (<name>_<n>).
	PREnvironmentName string
	// PRFrom is where a PR environment's backfill starts, given the
	// execution time (pr_start).
	PRFrom func(now time.Time) time.Time
	// ProjectDir is where gapless.yaml lives inside the repository.
	ProjectDir string
	// EnableDeployCommand turns /deploy on; CommandNamespace prefixes it
	// ("#gapless" -> "#gapless/deploy").
	EnableDeployCommand bool
	CommandNamespace    string
	// DeployOnMerge deploys the prod branch when a pull request merges
	// into it.
	DeployOnMerge bool
	// MergeMethod merges a pull request after its /deploy promoted prod
	// ("" leaves it unmerged).
	MergeMethod codehost.MergeMethod
	// CheckIfBlocked refuses /deploy while GitHub says the PR is blocked
	// (a required review or check missing).
	CheckIfBlocked bool
	// InvalidateAfterDeploy invalidates the PR environment after its
	// deploy (the janitor removes it).
	InvalidateAfterDeploy bool
	// DeployLease is the deploy attempt's lease (renewed at a third of it).
	DeployLease time.Duration
	// GateMode is the merge gate's mode on Target (state.GateRendered or
	// state.GateRecorded); "" when Target is not merge-gated. GateWait
	// bounds how long a deploy waits for its holds (2m); SweepGrace is how
	// long after its lease expired the sweep takes an attempt for dead
	// (DefaultSweepGrace).
	GateMode   string
	GateWait   time.Duration
	SweepGrace time.Duration
}

func (c *Config) defaults() {
	if c.ProdBranch == "" {
		c.ProdBranch = "main"
	}
	if c.Target == "" {
		c.Target = "prod"
	}
	if c.PREnvironmentName == "" {
		c.PREnvironmentName = "pr"
	}
	if c.PRFrom == nil {
		c.PRFrom = func(now time.Time) time.Time { return now.Add(-24 * time.Hour) }
	}
	if c.ProjectDir == "" {
		c.ProjectDir = "."
	}
	if c.DeployLease <= 0 {
		c.DeployLease = 5 * time.Minute
	}
	if c.GateWait <= 0 {
		c.GateWait = 2 * time.Minute
	}
	if c.SweepGrace <= 0 {
		c.SweepGrace = DefaultSweepGrace
	}
	for i, r := range c.Repositories {
		c.Repositories[i] = strings.ToLower(r)
	}
}

// Allowed reports whether repo is on the allowlist.
func (c *Config) Allowed(repo string) bool {
	repo = strings.ToLower(repo)
	for _, r := range c.Repositories {
		if r == repo {
			return true
		}
	}
	return false
}

// Deps are what the bot works with.
type Deps struct {
	Host  codehost.Host
	Store state.Store
	// Engine is the project's warehouse; the process holds it open.
	Engine warehouse.Engine
	// Parser parses projects' SQL, shared by every job (a Parser is safe
	// for concurrent use); nil opens one per plan, which costs a DuckDB
	// start each time.
	Parser *sqlparse.Parser
	Queue  queue.Enqueuer
	Clock  clockwork.Clock
	Log    *slog.Logger
	// Metrics may be nil (nothing is counted).
	Metrics *Metrics
	// Owner names this process in leases and claims (host/pid).
	Owner string
	// Hooks are test seams; nil in production.
	Hooks *Hooks
}

// Hooks let tests act between a job's steps (crash a worker after a
// side effect, race a push against a deploy). Each returns an error to
// fail the job there.
type Hooks struct {
	// AfterPromote runs after a deploy promoted, before the merge.
	AfterPromote func(ctx context.Context, attemptID string) error
	// AfterComment runs after a comment was posted, before the store
	// records it.
	AfterComment func(ctx context.Context, repo string, number int, marker string) error
	// BeforePlan runs when a plan job starts planning.
	BeforePlan func(ctx context.Context, repo string, number int, head string) error
	// GateOpen runs when a deploy's merge gate opened, before anything
	// is planned or backfilled.
	GateOpen func(ctx context.Context, attemptID string) error
	// AfterApply runs when a deploy's apply returned (prod promoted or
	// not), before its end is recorded and its holds settled.
	AfterApply func(ctx context.Context, attemptID string)
	// GateWait runs each time a deploy is about to wait for its holds.
	GateWait func(ctx context.Context, attemptID string)
	// HoldRendered runs after a render recorded its outcome on a pull
	// request's holds (err nil: rendered).
	HoldRendered func(ctx context.Context, repo string, number int, err error)
	// BeforeSettle runs when a settle job starts.
	BeforeSettle func(ctx context.Context, attemptID string)
}

// Bot is the pull-request bot.
type Bot struct {
	cfg Config
	d   Deps
	// kick wakes this process's deploys waiting on the merge gate when a
	// render marked a hold rendered.
	kick *deploygate.Notifier
}

// New returns a bot, refusing a configuration it cannot act on.
func New(cfg Config, d Deps) (*Bot, error) {
	cfg.defaults()
	switch {
	case d.Host == nil:
		return nil, errors.New("bot: no code host")
	case d.Store == nil:
		return nil, errors.New("bot: no state store")
	case d.Queue == nil:
		return nil, errors.New("bot: no queue")
	case len(cfg.Repositories) == 0:
		return nil, errors.New("bot: github.repositories is empty: name the repositories the bot serves")
	}
	if d.Clock == nil {
		d.Clock = clockwork.NewRealClock()
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Owner == "" {
		host, _ := os.Hostname()
		d.Owner = fmt.Sprintf("%s/%d", host, os.Getpid())
	}
	if d.Hooks == nil {
		d.Hooks = &Hooks{}
	}
	return &Bot{cfg: cfg, d: d, kick: deploygate.NewNotifier()}, nil
}

// Config returns the configuration the bot runs with (defaults applied).
func (b *Bot) Config() Config { return b.cfg }

func (b *Bot) now() time.Time { return b.d.Clock.Now().UTC() }

// targetGeneration is the target environment's generation now: 0 when it
// does not exist (never promoted, or removed).
func (b *Bot) targetGeneration(ctx context.Context) (int64, error) {
	gen, invalidated, err := b.d.Store.EnvironmentGeneration(ctx, b.cfg.Target)
	switch {
	case errors.Is(err, state.ErrNotFound):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("reading %s's generation: %w", b.cfg.Target, err)
	case invalidated:
		return 0, nil
	}
	return gen, nil
}

// logPR is the bot's logger for one pull request.
func (b *Bot) logPR(repo string, n int) *slog.Logger {
	return b.d.Log.With(logkey.Repo, repo, logkey.PR, n)
}
