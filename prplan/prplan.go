// Package prplan plans a pull request, as the GitHub bot does it: it
// checks a commit's project out into a temporary folder (Checkout),
// previews the plan that deploying it to prod would run now (Preview),
// builds the pull request's own environment with a bounded backfill
// (BuildEnvironment), deploys it to prod (Deploy), invalidates the
// environment (Invalidate), and says what a preview or a build found in
// markdown for check runs and the summary comment (PreviewMarkdown,
// EnvironmentMarkdown).
//
// It does what `gapless plan` and `gapless apply` do, through the same
// domain packages (project, plan, apply), with the warehouse and the state
// store the caller holds: the serve process's, not the ones the checked-out
// gapless.yaml names.
//
// Invariants:
//   - Preview never writes: not to state, not to the warehouse; the plan
//     it returns records prod's plan id and generation as it read them
//     (plan.Expected), so a verdict drawn from it is pinned to that
//     generation;
//   - a pull request's environment computes at most the window from its
//     start (pr_start) to the execution time, and reuses every table of a
//     version another environment (prod) already built;
//   - an error the project itself is at fault for (a model, gapless.yaml, a
//     source file, a refused category choice) is a *ProjectError, whose
//     message names files relative to the project's root, never the
//     temporary folder; any other error is the infrastructure's.
package prplan

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/config"
	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/lease"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/project"
	"github.com/gapless-dev/gapless/promotion"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/sqlparse"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

// EnvName is the environment of pull request n: "<prefix>_<n>", with prefix
// sanitized (config.SanitizeEnvironmentPrefix: lower-case, characters
// outside [a-z0-9_] made '_', runs of '_' collapsed, "pr" when empty), so
// that snapshot.CheckEnvironmentName accepts it. A negative n is taken
// without its sign.
func EnvName(prefix string, n int) string {
	if n < 0 {
		n = -n
	}
	return config.SanitizeEnvironmentPrefix(prefix) + "_" + strconv.Itoa(n)
}

// Params are what every planning call needs.
type Params struct {
	// Store is the state store, and Engine the project's warehouse: the
	// serve process holds them. Preview only reads both.
	Store  state.Store
	Engine warehouse.Engine
	// ProjectRoot is a Checkout of the commit planned (the pull request's
	// merge commit, or the prod branch's head for a deploy on merge).
	ProjectRoot string
	// Clock stamps records (created_at, promoted_at); nil is the real
	// clock.
	Clock clockwork.Clock
	// ExecutionTime is the time planned at; zero is Clock's now.
	ExecutionTime time.Time
	// Logger receives apply's events; nil discards them.
	Logger *slog.Logger

	// Parser parses the project's SQL; nil opens one for the call (the
	// caller may share one across calls: it is safe for concurrent use).
	Parser *sqlparse.Parser
	// IDs gives plans their ids; nil is plan.RandomID.
	IDs plan.IDSource
	// OnEvent, when set, receives apply's events (BuildEnvironment,
	// Deploy), concurrently from the backfill's workers: for progress on a
	// check run.
	OnEvent func(apply.Event)
	// Actor names who deploys or builds (e.g. "github:octocat /deploy
	// acme/analytics#42"), recorded with the promotion; "" records none.
	Actor string
	// LookupEnv expands ${VAR} in the project's source files; nil is
	// os.LookupEnv. (Its gapless.yaml is read as project.Load reads it,
	// from the process environment.)
	LookupEnv func(string) (string, bool)
	// Gate is the deploy attempt a Deploy to a merge-gated target
	// promotes under (see apply.Params.Gate).
	Gate *state.GateFence
}

// ProjectError is an error the project is at fault for: a model, its
// gapless.yaml or a source file that does not load, a model the plan's
// check refuses, or a refused category choice. Its message names files
// relative to the project's root; Err is the error as the loader or the
// check gave it (a project.Errors, a *model.Error, a *config.Error, a
// *snapshot.ChoiceError), for errors.As.
type ProjectError struct {
	Err  error
	root string
}

// Error is Err's message with the project's folder left out of paths.
func (e *ProjectError) Error() string {
	msg := e.Err.Error()
	if e.root == "" {
		return msg
	}
	msg = strings.ReplaceAll(msg, e.root+string(filepath.Separator), "")
	return strings.ReplaceAll(msg, e.root, ".")
}

// Unwrap returns Err.
func (e *ProjectError) Unwrap() error { return e.Err }

// projectError makes err a *ProjectError when the project is at fault.
func projectError(root string, err error) error {
	var (
		pe   project.Errors
		me   *model.Error
		ce   *config.Error
		ch   *snapshot.ChoiceError
		done *ProjectError
	)
	switch {
	case err == nil, errors.As(err, &done):
		return err
	case errors.As(err, &pe), errors.As(err, &me), errors.As(err, &ce), errors.As(err, &ch):
		return &ProjectError{Err: err, root: root}
	}
	return err
}

// session is one call's project, parser and times.
type session struct {
	p      Params
	pr     *project.Project
	cfg    *config.Config
	parser *sqlparse.Parser
	exec   time.Time
	now    time.Time
	close  func()
}

// open checks p, loads the project at p.ProjectRoot (made absolute) and
// opens a parser when p has none. The caller calls close.
func open(ctx context.Context, p Params) (*session, error) {
	switch {
	case p.Store == nil:
		return nil, errors.New("prplan: no state store")
	case p.Engine == nil:
		return nil, errors.New("prplan: no warehouse engine")
	case p.ProjectRoot == "":
		return nil, errors.New("prplan: no project root (see Checkout)")
	}
	root, err := filepath.Abs(p.ProjectRoot)
	if err != nil {
		return nil, fmt.Errorf("prplan: project root %s: %w", p.ProjectRoot, err)
	}
	p.ProjectRoot = root
	s := &session{p: p, parser: p.Parser, close: func() {}}
	if s.p.Clock == nil {
		s.p.Clock = clockwork.NewRealClock()
	}
	if s.p.Logger == nil {
		s.p.Logger = slog.New(slog.DiscardHandler)
	}
	s.now = s.p.Clock.Now().UTC()
	s.exec = p.ExecutionTime.UTC()
	if p.ExecutionTime.IsZero() {
		s.exec = s.now
	}
	if s.parser == nil {
		parser, err := sqlparse.Open()
		if err != nil {
			return nil, fmt.Errorf("starting the SQL parser: %w", err)
		}
		s.parser = parser
		s.close = func() { _ = parser.Close() } // it only parsed: nothing to lose on close
	}
	pr, cfg, err := project.LoadWith(ctx, p.ProjectRoot, project.Options{
		Parser:    func() (*sqlparse.Parser, error) { return s.parser, nil },
		LookupEnv: p.LookupEnv,
	})
	if err != nil {
		s.close()
		return nil, projectError(root, err)
	}
	s.pr, s.cfg = pr, cfg
	return s, nil
}

// build assembles the plan for env with opts, as `gapless plan` does.
func (s *session) build(ctx context.Context, env string, opts plan.Options) (*plan.Plan, error) {
	pl, err := plan.Assemble(ctx, plan.AssembleParams{
		Store: s.p.Store, Environment: env, Snapshots: s.pr.Snapshots, Graph: s.pr.Graph,
		Additive: project.Additive(ctx, s.parser), IDs: s.p.IDs, ExecutionTime: s.exec, Now: s.now, Options: opts,
	})
	if err != nil {
		return nil, projectError(s.p.ProjectRoot, err)
	}
	return pl, nil
}

// apply applies pl as `gapless apply` does, with the environment's TTL
// from the project's gapless.yaml.
func (s *session) apply(ctx context.Context, pl *plan.Plan) (*apply.Result, error) {
	res, err := apply.Apply(ctx, apply.Params{
		Plan: pl, Store: s.p.Store, Engine: s.p.Engine, Parser: s.parser, ProjectDir: s.p.ProjectRoot,
		Clock: s.p.Clock, Logger: s.p.Logger, OnEvent: s.p.OnEvent,
		Lease:          lease.Options{Clock: s.p.Clock},
		EnvironmentTTL: s.cfg.TTL(pl.Environment),
		Statements:     execute.NewEnvironmentStatements(s.cfg.BeforeAll, s.cfg.AfterAll, s.cfg.Variables),
		Actor:          s.p.Actor,
		Gate:           s.p.Gate,
		Replan: plan.Replanner(plan.ReplannerParams{Store: s.p.Store, Clock: s.p.Clock, IDs: s.p.IDs,
			Additive: func(ctx context.Context) snapshot.Additive { return project.Additive(ctx, s.parser) }}),
	})
	return res, projectError(s.p.ProjectRoot, err)
}

// Preview builds, and never applies, the plan that deploying the project
// to prod would run now, against prod as it is: prod's plan id and
// generation are recorded in the plan (plan.Expected; zero when prod does
// not exist yet), so a verdict can be pinned to the generation it was
// planned against. The plan runs prod's promotion policy from the
// project's gapless.yaml and, as every prod plan, the no-gap check. Its
// models are checked (apply.Check, which writes nothing) as `gapless plan`
// checks them. A project that does not load or check is a *ProjectError
// naming the file and line.
func Preview(ctx context.Context, p Params) (*plan.Plan, error) {
	s, err := open(ctx, p)
	if err != nil {
		return nil, err
	}
	defer s.close()
	pl, err := s.build(ctx, plan.Prod, plan.Options{Policy: s.cfg.Environment(plan.Prod).Policy()})
	if err != nil {
		return nil, err
	}
	if err := apply.Check(ctx, pl, s.p.Engine, s.parser, s.p.ProjectRoot); err != nil {
		return nil, projectError(s.p.ProjectRoot, err)
	}
	return pl, nil
}

// BuildEnvironment plans environment env from the project and applies it,
// with the backfill bounded to start at from (pr_start; zero for each
// model's own start): only that window is computed, as SQLMesh's
// default_pr_start bounds a PR environment. A new environment starts as a
// copy of prod and reuses prod's tables for every model the project does
// not change; an existing one is planned against what it serves. As
// `gapless plan ENV` does for an environment other than prod, the plan
// allows gaps (there is one before from) and carries env's policy and TTL
// from the project's gapless.yaml. It returns the plan and apply's result
// (the result also when apply failed part way, as apply returns it). A
// plan that is UpToDate is not applied: the result then holds the
// environment as it is and no model.
func BuildEnvironment(ctx context.Context, p Params, env string, from time.Time) (*plan.Plan, *apply.Result, error) {
	if err := snapshot.CheckEnvironmentName(env); err != nil {
		return nil, nil, fmt.Errorf("prplan: %w", err)
	}
	if env == plan.Prod {
		return nil, nil, errors.New("prplan: BuildEnvironment builds a pull request's environment, not prod (see Deploy)")
	}
	s, err := open(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	defer s.close()
	opts := plan.Options{AllowGaps: true, Policy: s.cfg.Environment(env).Policy()}
	if !from.IsZero() {
		opts.Start = from.UTC()
	}
	pl, err := s.build(ctx, env, opts)
	if err != nil {
		return nil, nil, err
	}
	if res, ok, err := s.upToDate(ctx, pl); ok || err != nil {
		return pl, res, err
	}
	res, err := s.apply(ctx, pl)
	if err != nil {
		return pl, res, fmt.Errorf("building %s: %w", env, err)
	}
	return pl, res, nil
}

// Deploy plans prod from the project and applies it under prod's promotion
// policy from the project's gapless.yaml (strict when unset), with the
// no-gap check. It returns the plan and apply's result; a plan that is
// UpToDate (prod already serves the project) is not applied, and the result
// holds prod as it is and no model, so prod's generation does not move. A
// promotion the
// policy refused is an error wrapping the *promotion.Error; a plan another
// promotion overtook wraps state.ErrConflictingPlan (apply's StaleError);
// a project at fault is a *ProjectError.
func Deploy(ctx context.Context, p Params) (*plan.Plan, *apply.Result, error) {
	s, err := open(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	defer s.close()
	pl, err := s.build(ctx, plan.Prod, plan.Options{Policy: s.cfg.Environment(plan.Prod).Policy()})
	if err != nil {
		return nil, nil, err
	}
	if res, ok, err := s.upToDate(ctx, pl); ok || err != nil {
		return pl, res, err
	}
	res, err := s.apply(ctx, pl)
	if err != nil {
		var perr *promotion.Error
		if errors.As(err, &perr) {
			return pl, res, fmt.Errorf("prod: plan %s was not promoted; prod serves what it served before: %w", lastPlanID(pl, res), err)
		}
		return pl, res, fmt.Errorf("deploying to prod: %w", err)
	}
	return pl, res, nil
}

// UpToDate reports whether pl changes nothing and computes nothing in an
// environment that exists: applying it would only promote a new generation
// serving the same tables, which would make every verdict pinned to the
// old one stale for nothing.
func UpToDate(pl *plan.Plan) bool {
	return pl.Expected.PlanID != "" && len(pl.Changes) == 0 && len(pl.Backfills) == 0
}

// upToDate is, for an UpToDate plan, the result of not applying it: the
// environment as it is, no model computed.
func (s *session) upToDate(ctx context.Context, pl *plan.Plan) (*apply.Result, bool, error) {
	if !UpToDate(pl) {
		return nil, false, nil
	}
	e, err := s.p.Store.GetEnvironment(ctx, pl.Environment)
	if err != nil {
		return nil, true, fmt.Errorf("reading %s: %w", pl.Environment, err)
	}
	return &apply.Result{Environment: e}, true, nil
}

// lastPlanID is the plan an apply promoted or failed with: the last replan
// attempt's, else pl's.
func lastPlanID(pl *plan.Plan, res *apply.Result) string {
	if res != nil && len(res.Attempts) > 0 {
		return res.Attempts[len(res.Attempts)-1].PlanID
	}
	return pl.ID
}

// Invalidate marks environment env invalidated at now, for the janitor to
// remove (its views, then the tables nothing else serves). An environment
// that does not exist is not an error; prod is refused.
func Invalidate(ctx context.Context, store state.Store, env string, now time.Time) error {
	if env == plan.Prod {
		return errors.New("prplan: prod cannot be invalidated")
	}
	err := store.Invalidate(ctx, state.InvalidateParams{Environment: env, Now: now.UTC()})
	if errors.Is(err, state.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("invalidating %s: %w", env, err)
	}
	return nil
}
