package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jonboulle/clockwork"

	"github.com/gapless-dev/gapless/codehost"
	"github.com/gapless-dev/gapless/codehost/github"
	"github.com/gapless-dev/gapless/config"
	"github.com/gapless-dev/gapless/queue"
	"github.com/gapless-dev/gapless/sqlparse"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

// RunParams are what RunEvent needs: one event, as GitHub Actions hands
// it to a workflow ($GITHUB_EVENT_NAME and the file at $GITHUB_EVENT_PATH).
type RunParams struct {
	GitHub    *config.GitHub
	Store     state.Store
	Engine    warehouse.Engine
	Host      codehost.Host
	Clock     clockwork.Clock
	Log       *slog.Logger
	EventName string
	Payload   []byte
	Hooks     *Hooks
}

// RunResult says what RunEvent did.
type RunResult struct {
	Event codehost.Event
	// Jobs are the jobs run, by kind and outcome.
	Jobs []queue.JobRow
}

// RunEvent does, once and without a server, what serve does for one
// delivery: the same jobs, run in this process until none is left (a
// workflow step in GitHub Actions, SQLMesh's bot's mode). The event needs
// no signature: it comes from the runner, not the network. A job that
// fails at its attempt cap fails the run.
func RunEvent(ctx context.Context, p RunParams) (res RunResult, err error) {
	ev, err := github.ParseWebhook(p.EventName, "", p.Payload)
	if err != nil {
		return RunResult{}, fmt.Errorf("the %s event does not parse: %w", p.EventName, err)
	}
	res.Event = ev
	cfg := ConfigFrom(p.GitHub)
	if len(cfg.Repositories) == 0 && ev.Repo != "" {
		// In a workflow the repository is the one it runs in.
		cfg.Repositories = []string{ev.Repo}
	}
	if !cfg.Allowed(ev.Repo) {
		return res, fmt.Errorf("repository %s is not in github.repositories", ev.Repo)
	}
	parser, err := sqlparse.Open()
	if err != nil {
		return res, fmt.Errorf("starting the SQL parser: %w", err)
	}
	defer func() {
		if cerr := parser.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("closing the SQL parser: %w", cerr))
		}
	}()
	workers := queue.NewWorkers()
	in := queue.NewInline(workers, p.Log, nil)
	b, err := New(cfg, Deps{Host: p.Host, Store: p.Store, Engine: p.Engine, Parser: parser, Queue: in, Clock: p.Clock, Log: p.Log, Hooks: p.Hooks})
	if err != nil {
		return res, err
	}
	b.Register(workers)
	if err := b.RegisterGate(ctx); err != nil {
		return res, err
	}
	if _, err := in.Insert(ctx, DeliveryJob{Event: ev}, &queue.InsertOpts{Unique: true}); err != nil {
		return res, err
	}
	// Each run also sweeps the merge gate: there is no serve process to
	// settle what an earlier run left (a killed workflow's deploy).
	if b.gated() {
		if _, err := in.Insert(ctx, SweepJob{Round: b.now().UnixNano()}, &queue.InsertOpts{Unique: true}); err != nil {
			return res, err
		}
	}
	drainErr := in.Drain(ctx)
	jobs, err := in.Jobs(ctx, queue.JobFilter{})
	res.Jobs = jobs
	if err != nil {
		return res, errors.Join(drainErr, err)
	}
	return res, drainErr
}
