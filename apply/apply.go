// Package apply applies a plan: it records the plan's snapshots, refuses
// the plan if another plan changed the environment since it was built
// (StaleError), creates their physical tables, backfills exactly the
// plan's ranges in DAG order, promotes the environment in one state
// transaction (a compare-and-swap on the expected plan id, plus the strict
// no-gap check), points the environment's views at the new tables, and
// finalises. RollbackPlan builds the plan that serves an environment's
// previous plan again, which Apply applies like any other.
//
// Invariants:
//   - a plan keeps its bounds (design invariant 5): the backfill computes
//     the plan's ranges minus what state already covers, re-read before
//     each model, and never more; what was skipped is reported;
//   - nothing is promoted after a failed batch: the first failure cancels
//     the backfill and Apply returns it before the promote stage;
//   - applying the same plan again resumes: completed batches are not
//     redone, a promotion already made is not repeated;
//   - promotion is generation-pinned (design invariant 1): it succeeds only
//     if the environment is still at plan.Expected.PlanID, and only if the
//     no-gap check passes inside the same transaction; a plan whose
//     environment moved to another plan (or generation) is refused before
//     it creates a table or computes a batch;
//   - a refused plan's application is recorded as ended (StatusEnded).
package apply

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/lease"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/promotion"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/sqlparse"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

// DefaultWorkers is the backfill's parallelism when Params.Workers is 0.
const DefaultWorkers = 4

// ErrSuperseded is returned when another plan was promoted into the
// environment after this one, before this apply updated the views: the
// views are left to the newer plan.
var ErrSuperseded = errors.New("superseded by a newer promotion")

// Hooks let tests act at exact points of an apply. A hook's error stops the
// apply as a failure of the stage it runs in.
type Hooks struct {
	// BeforeModel runs before a model's backfill starts (after its parents'
	// work is done).
	BeforeModel func(ctx context.Context, model string) error
	// AfterBackfill runs once the backfill stage has finished, before the
	// promote stage starts.
	AfterBackfill func(ctx context.Context) error
	// Locked runs under the lock policy once the deploy holds its leases,
	// before the final catch-up.
	Locked func(ctx context.Context) error
}

// ErrNoReplanner: the replan policy was asked for without Params.Replan,
// which would otherwise fail as strict does, silently.
var ErrNoReplanner = errors.New("the replan policy needs a replanner (Params.Replan), and none was given")

// Params are what Apply needs.
type Params struct {
	Plan   *plan.Plan
	Store  state.Store
	Engine warehouse.Engine
	Parser *sqlparse.Parser
	// ProjectDir is where SEED files are read from.
	ProjectDir string
	// Workers bounds how many models backfill at once; 0 means
	// DefaultWorkers.
	Workers int
	// Clock stamps state writes. Nil means the real clock
	// (clockwork.NewRealClock).
	Clock clockwork.Clock
	// Logger receives every event; nil means slog.Default().
	Logger *slog.Logger
	// OnEvent, when set, receives every event, in order per model. It is
	// called from the backfill's workers, concurrently.
	OnEvent func(Event)
	Hooks   Hooks
	// Policy, when set, overrides the promotion policy the plan recorded
	// (apply --on-incumbent-advance and its bounds).
	Policy *promotion.Policy
	// Replan builds a fresh plan for the same project source and operator
	// choices as prev, against the environment as it is at the given time
	// (see plan.Rebuild). The replan policy needs it: Apply refuses a
	// checked plan under replan without it (ErrNoReplanner).
	Replan func(ctx context.Context, prev *plan.Plan, at time.Time) (*plan.Plan, error)
	// Lease is how the lock policy takes and keeps its leases (TTL, wait
	// bound, clock); the owner is set per plan.
	Lease lease.Options
	// EnvironmentTTL is how long the environment lives after this
	// promotion: the promotion records ExpiresAt = Now() + EnvironmentTTL,
	// so every promotion extends it, and `gapless janitor` removes the
	// environment once ExpiresAt has passed. 0 means never (no expiry is
	// recorded). prod never expires: it is ignored there.
	EnvironmentTTL time.Duration
	// Actor names who applies the plan (user@host), for the history: it is
	// recorded with the promotion, and a plan refused as stale names the
	// actor of the promotion that won. "" records nothing.
	Actor string
	// Gate is the deploy attempt the promotion runs under (the merge
	// gate, see state.GateStore): a gated environment refuses a promotion
	// without it, writing nothing (state.ErrNotHeld).
	Gate *state.GateFence
	// Statements are the configuration's before_all and after_all
	// statements: before_all runs once before anything of the plan is
	// applied (a failure applies nothing), after_all once after it
	// succeeded (a failure fails the apply, which is then promoted:
	// applying it again runs them again). Nil runs none.
	Statements *execute.EnvironmentStatements
}

// ModelResult is what the backfill did for one model.
type ModelResult struct {
	Model, Version string
	Batches        int
	Rows           int64
	Recorded       interval.Set
	Skipped        interval.Set
}

// Result is what Apply did.
type Result struct {
	// Environment is the environment as promoted.
	Environment *state.Environment
	// Models has one entry per backfilled model, in plan order.
	Models []ModelResult
	// AlreadyPromoted: an earlier attempt had promoted this plan; this one
	// only finished the later stages.
	AlreadyPromoted bool
	// Policy is the policy the promotion ran under (Policy.String()).
	Policy string
	// Verdicts are the promotion check's verdicts, one per model in its
	// scope, of the promotion that succeeded.
	Verdicts []promotion.Verdict
	// Debts are the gaps the promotion accepted (trailing-gap).
	Debts []state.Debt
	// CatchUp is what catch-up computed beyond the plan, per round.
	CatchUp []CatchUpRound
	// Attempts lists every plan applied under replan, the first being the
	// one given; the last is the one that promoted (or failed).
	Attempts []Attempt
}

// Attempt is one plan applied under the replan policy.
type Attempt struct {
	PlanID string        `json:"plan_id"`
	Models []ModelResult `json:"models"`
	// Err is why the attempt's promotion failed; empty for the last,
	// successful attempt.
	Err string `json:"error,omitempty"`
}

type applier struct {
	Params
	log *slog.Logger
	// snaps is the plan's snapshots by model name.
	snaps map[string]*snapshot.Snapshot
	// tpls holds the templates built so far (see template), under tplMu.
	tplMu sync.Mutex
	tpls  map[string]*execute.Template
	x     *execute.Executor
	// checked is the columns checkModels derived, by model name: the
	// templates of FULL models carry them (execute.Template.Columns).
	checked map[string][]warehouse.Column
	// unchangedViews names the models whose environment view already
	// points at the right physical table: set only when this apply made
	// the promotion and the environment it replaced had been finalised
	// (so all its views were in place) at the same version.
	unchangedViews map[string]bool
}

// Apply runs every stage of p in order and records each in the plan's
// application history. It returns the first failure, wrapped with the
// stage: a *execute.BatchError from the backfill, a *promotion.Error or
// state.ErrConflictingPlan from the promotion.
//
// Under the replan policy, a promotion refused only because the scheduler
// advanced the incumbent (promotion.Error.OnlyAdvanced) is followed by a fresh
// plan from Params.Replan, applied in turn, at most Policy.Attempts()
// times; Result.Attempts lists every plan applied and what it backfilled.
// Any other failure is returned as is.
func Apply(ctx context.Context, prm Params) (*Result, error) {
	if prm.Plan == nil {
		return nil, errors.New("apply: no plan")
	}
	if prm.Workers <= 0 {
		prm.Workers = DefaultWorkers
	}
	if err := plan.CheckOptions(prm.Plan.Environment, prm.Plan.Options); err != nil {
		return nil, fmt.Errorf("apply %s: %w", prm.Plan.ID, err)
	}
	a := newApplier(prm)
	pol := a.policy()
	if err := pol.Validate(); err != nil {
		return nil, fmt.Errorf("apply %s: %w", prm.Plan.ID, err)
	}
	if pol.Name == promotion.Replan && prm.Plan.Options.Checks() && prm.Replan == nil {
		return nil, fmt.Errorf("apply %s: %w", prm.Plan.ID, ErrNoReplanner)
	}
	if err := prm.Statements.RunBefore(ctx, prm.Engine, prm.Plan.Environment, prm.Plan.ExecutionTime); err != nil {
		return &Result{}, fmt.Errorf("apply %s: %w", prm.Plan.ID, err)
	}
	res, err := a.run(ctx)
	if pol.Name != promotion.Replan || !prm.Plan.Options.Checks() {
		return res, a.afterAll(ctx, err)
	}
	res.Attempts = []Attempt{{PlanID: prm.Plan.ID, Models: res.Models}}
	for n := 1; ; n++ {
		var perr *promotion.Error
		if err == nil || !errors.As(err, &perr) || !perr.OnlyAdvanced() {
			if err != nil {
				res.Attempts[len(res.Attempts)-1].Err = err.Error()
			}
			return res, a.afterAll(ctx, err)
		}
		res.Attempts[len(res.Attempts)-1].Err = err.Error()
		if n > pol.Attempts() {
			return res, a.exhausted(ctx, perr, n)
		}
		next, rerr := prm.Replan(ctx, a.Plan, a.now())
		if rerr != nil {
			//nolint:errorlint // the refusal is context: callers branch on the replan's error, not on the *promotion.Error it replaced
			return res, fmt.Errorf("replanning after plan %s was refused: %w (the refusal: %v)", a.Plan.ID, rerr, err)
		}
		a.log.InfoContext(ctx, "the scheduler advanced the incumbent; applying a fresh plan",
			slog.String(logkey.Policy, pol.String()), slog.Int(logkey.Attempt, n+1), slog.String(logkey.NextPlan, next.ID))
		a.appendEvents(ctx, []state.Event{{At: a.now(), Kind: state.EventReplan, Environment: a.Plan.Environment, PlanID: a.Plan.ID,
			Reason: string(promotion.IncumbentAdvanced), Data: mustJSON(map[string]any{"next_plan_id": next.ID, "attempt": n + 1})}})
		attempts := res.Attempts
		prm.Plan = next
		a = newApplier(prm)
		res, err = a.run(ctx)
		res.Attempts = append(attempts, Attempt{PlanID: next.ID, Models: res.Models})
	}
}

// replans reports whether Apply answers err by applying a fresh plan (the
// replan policy, on a refusal only because the incumbent advanced). The
// last attempt's refusal counts too: Apply then fails with
// attempts_exhausted, which says so.
func (a *applier) replans(err error) bool {
	var perr *promotion.Error
	return a.policy().Name == promotion.Replan && a.Plan.Options.Checks() &&
		errors.As(err, &perr) && perr.OnlyAdvanced()
}

func newApplier(prm Params) *applier {
	base := prm.Logger
	if base == nil {
		base = slog.Default()
	}
	a := &applier{Params: prm, log: base.With(slog.String(logkey.Environment, prm.Plan.Environment), slog.String(logkey.Plan, prm.Plan.ID)),
		snaps: make(map[string]*snapshot.Snapshot, len(prm.Plan.Snapshots)), tpls: map[string]*execute.Template{}}
	for _, s := range prm.Plan.Snapshots {
		a.snaps[s.Name] = s
	}
	a.x = &execute.Executor{Engine: prm.Engine, Store: prm.Store, ProjectDir: prm.ProjectDir, Clock: a.clock(), Logger: a.log,
		OnBatch: func(b execute.Batch) { a.emit(context.Background(), BatchCommitted{Batch: b}) }}
	return a
}

// run checks the plan's models, then runs its stages once.
func (a *applier) run(ctx context.Context) (*Result, error) {
	res := &Result{}
	if err := a.checkModels(ctx); err != nil {
		return res, err
	}
	stages := []struct {
		stage Stage
		run   func(ctx context.Context) error
	}{
		{StageRecordSnapshots, a.recordSnapshots},
		{StageCheck, a.checkCurrent},
		{StageCreateTables, a.createTables},
		// The plan's empty backfill (--empty-backfill) is recorded once the
		// tables exist and before promotion, so the no-gap check sees it
		// covered, and the history says it holds no rows.
		{StageBackfill, func(ctx context.Context) error {
			if err := a.backfill(ctx, res); err != nil {
				return err
			}
			return plan.RecordEmpty(ctx, a.Store, a.Plan, a.now())
		}},
		{StagePromote, func(ctx context.Context) error { return a.promote(ctx, res) }},
		{StageUpdateViews, func(ctx context.Context) error { return a.updateViews(ctx, res) }},
		{StageFinalize, a.finalize},
	}
	for _, st := range stages {
		if err := a.runStage(ctx, st.stage, st.run); err != nil {
			return res, err
		}
		if st.stage == StageBackfill && a.Hooks.AfterBackfill != nil {
			if err := a.Hooks.AfterBackfill(ctx); err != nil {
				return res, fmt.Errorf("apply %s: after-backfill hook: %w", a.Plan.ID, err)
			}
		}
	}
	return res, nil
}

// clock is Params.Clock, or the real clock when it is nil: the one place
// an apply decides its time source; its executor gets the same clock.
func (a *applier) clock() clockwork.Clock {
	if a.Clock != nil {
		return a.Clock
	}
	return clockwork.NewRealClock()
}

func (a *applier) now() time.Time { return a.clock().Now().UTC() }

func (a *applier) emit(ctx context.Context, e Event) {
	e.log(ctx, a.log)
	if a.OnEvent != nil {
		a.OnEvent(e)
	}
}

// runStage records the stage's start, runs it, and records its end or
// failure; the failure is returned wrapped with the stage. A failure that
// refuses the plan (see Refused) is followed by an ended record: the
// janitor then no longer counts the application as in flight.
//
// The history hangs off the saved plan, so the first stage (which saves it)
// records its start only once it has run; a failure before the plan is
// saved is returned but cannot be recorded.
func (a *applier) runStage(ctx context.Context, stage Stage, run func(context.Context) error) error {
	planSaved := stage != StageRecordSnapshots
	if planSaved {
		if err := a.record(ctx, stage, StatusStarted, nil); err != nil {
			return err
		}
	}
	a.emit(ctx, StageStarted{Stage: stage})
	if err := run(ctx); err != nil {
		a.emit(ctx, StageFailed{Stage: stage, Err: err, Replanning: a.replans(err)})
		if planSaved {
			// Recording the failure must not mask it, and a cancelled
			// context still gets its failure recorded.
			detail := map[string]string{"error": err.Error()}
			if rerr := a.record(context.WithoutCancel(ctx), stage, StatusFailed, detail); rerr != nil {
				a.log.ErrorContext(ctx, "recording a failed stage", slog.String(logkey.Stage, string(stage)), slog.Any(logkey.Error, rerr))
			}
			if reason, ok := Refused(err); ok {
				detail["reason"] = reason
				if rerr := a.record(context.WithoutCancel(ctx), stage, StatusEnded, detail); rerr != nil {
					a.log.ErrorContext(ctx, "recording a refused plan as ended", slog.String(logkey.Stage, string(stage)), slog.Any(logkey.Error, rerr))
				}
			}
		}
		return fmt.Errorf("apply %s, stage %s: %w", a.Plan.ID, stage, err)
	}
	if !planSaved {
		if err := a.record(ctx, stage, StatusStarted, nil); err != nil {
			return err
		}
	}
	a.emit(ctx, StageFinished{Stage: stage})
	return a.record(ctx, stage, StatusFinished, nil)
}

func (a *applier) record(ctx context.Context, stage Stage, status string, detail any) error {
	var raw json.RawMessage
	if detail != nil {
		b, err := json.Marshal(detail)
		if err != nil {
			return fmt.Errorf("encoding the %s detail of stage %s: %w", status, stage, err)
		}
		raw = b
	}
	_, err := a.Store.RecordApplication(ctx, state.Application{PlanID: a.Plan.ID, Stage: string(stage), Status: status, Detail: raw, At: a.now()})
	if err != nil {
		return fmt.Errorf("recording stage %s %s of plan %s: %w", stage, status, a.Plan.ID, err)
	}
	return nil
}

// recordSnapshots stores the plan's snapshots and then the plan itself, in
// the stored format (plan.EncodeStored): what the plan adds, and the keys
// of the snapshots it changes against the plan it was built against, which
// the push before has recorded (so every key a saved plan names resolves).
// Both are idempotent, so a resumed apply repeats them harmlessly.
func (a *applier) recordSnapshots(ctx context.Context) error {
	if err := a.Store.PushSnapshots(ctx, a.Plan.Snapshots); err != nil {
		return fmt.Errorf("recording snapshots: %w", err)
	}
	payload, err := plan.EncodeStored(ctx, a.Store, a.Plan)
	if err != nil {
		return err
	}
	if err := a.Store.SavePlan(ctx, state.Plan{ID: a.Plan.ID, Environment: a.Plan.Environment, Payload: payload, CreatedAt: a.Plan.CreatedAt}); err != nil {
		return fmt.Errorf("saving plan: %w", err)
	}
	return nil
}

// checkModels is Check against the warehouse, before the first stage
// writes anything to state or warehouse: a plan built elsewhere, or before
// the warehouse changed, is refused with the project's errors and leaves
// no trace.
func (a *applier) checkModels(ctx context.Context) error {
	cols, err := checkPlan(ctx, a.Plan, a.Engine, a.Parser, a.ProjectDir)
	if err != nil {
		a.log.DebugContext(ctx, "plan refused before its first stage", slog.Any(logkey.Error, err))
		return err
	}
	a.tplMu.Lock()
	a.checked = cols
	a.tplMu.Unlock()
	return nil
}

// Check checks, with execute.Check, every model plan p builds (see
// plan.Plan.Builds) against engine, which it does not write to: each has a
// schedule, its query binds against its parents' columns, its time column
// and key are output columns of a usable type. It is what Apply does
// first; `gapless plan` calls it on a scratch engine (see
// backend.OpenForPlanning) before it prints or saves the plan. A project
// error is a project.Errors of *model.Error, each naming a model's file,
// line and column.
func Check(ctx context.Context, p *plan.Plan, engine warehouse.Engine, parser *sqlparse.Parser, projectDir string) error {
	_, err := checkPlan(ctx, p, engine, parser, projectDir)
	return err
}

// checkPlan is Check, returning the columns it derived by model name.
func checkPlan(ctx context.Context, p *plan.Plan, engine warehouse.Engine, parser *sqlparse.Parser, projectDir string) (map[string][]warehouse.Column, error) {
	builds := p.Builds()
	if len(builds) == 0 {
		return nil, nil
	}
	return execute.Check(ctx, execute.CheckParams{Engine: engine, Parser: parser, ProjectDir: projectDir,
		Snapshots: p.Snapshots, Check: builds, Execution: p.ExecutionTime})
}

// createTables creates, in DAG order, every physical schema and every
// missing physical object of every kind (see
// execute.Executor.PrepareSnapshots: one existence question for the whole
// plan, its tables recorded as built included, so that one dropped behind
// gapless's back is made again), so that each model's table is made from
// its parents' as they exist, whatever their kind. It builds the template
// of a snapshot only when its object is missing: a deploy that changes one
// model of thousands parses one query here.
func (a *applier) createTables(ctx context.Context) error {
	if err := a.sourceStandIns(ctx); err != nil {
		return err
	}
	return a.x.PrepareSnapshots(ctx, a.Plan.Snapshots, func(s *snapshot.Snapshot) (*execute.Template, error) {
		return a.template(ctx, s.Name)
	}, a.Plan.ExecutionTime)
}

// sourceStandIns makes, for every source among the plan's snapshots whose
// table does not exist yet (it has not landed), an empty view of its
// declared columns under its name, so that the tables of the models reading
// it can be made; their work waits until the source publishes coverage (see
// plan.SourceWait and run.DueWork), so nothing is computed from the empty
// view. An existing table or view is left alone: once ingestion lands the
// source, the view is its.
func (a *applier) sourceStandIns(ctx context.Context) error {
	for _, s := range a.Plan.Snapshots {
		if !s.Model.Source {
			continue
		}
		t := warehouse.Table{Schema: s.Model.Schema(), Name: s.Model.Table()}
		exists, err := a.Engine.TableExists(ctx, t)
		if err != nil {
			return fmt.Errorf("source %s: checking its table: %w", s.Name, err)
		}
		if exists {
			continue
		}
		if len(s.Model.Columns) == 0 {
			return fmt.Errorf("source %s has not landed and declares no columns: declare them in %s", s.Name, s.Model.Path)
		}
		cols := make([]string, len(s.Model.Columns))
		for i, c := range s.Model.Columns {
			cols[i] = "CAST(NULL AS " + c.Type + ") AS " + a.Engine.QuoteIdent(c.Name)
		}
		if err := a.Engine.CreateSchema(ctx, t.Schema); err != nil {
			return fmt.Errorf("source %s: %w", s.Name, err)
		}
		q := "SELECT " + strings.Join(cols, ", ") + " WHERE false"
		if err := a.Engine.CreateOrReplaceView(ctx, warehouse.ViewParams{View: t, Query: q}); err != nil {
			return fmt.Errorf("source %s: making its empty stand-in view: %w", s.Name, err)
		}
		a.emit(ctx, SourceStandInMade{Source: s.Name})
	}
	return nil
}

// template returns the template of the plan's snapshot of model name,
// pointed at the plan's snapshots, building it on first use (it parses the
// model's query) and keeping it for the rest of the apply. It is safe for
// concurrent use by the backfill's workers.
func (a *applier) template(ctx context.Context, name string) (*execute.Template, error) {
	a.tplMu.Lock()
	t, ok := a.tpls[name]
	a.tplMu.Unlock()
	if ok {
		return t, nil
	}
	s, ok := a.snaps[name]
	if !ok {
		return nil, fmt.Errorf("model %s is not among the snapshots of plan %s", name, a.Plan.ID)
	}
	t, err := execute.TemplateOf(ctx, a.Parser, a.Engine, s, a.snaps)
	if err != nil {
		return nil, err
	}
	a.tplMu.Lock()
	defer a.tplMu.Unlock()
	t.Columns = a.checked[name]
	if built, ok := a.tpls[name]; ok {
		return built, nil // another worker built it meanwhile; they are equal
	}
	a.tpls[name] = t
	return t, nil
}

// snapshotRefs is the environment the plan promotes.
func (a *applier) snapshotRefs() []state.SnapshotRef {
	refs := make([]state.SnapshotRef, len(a.Plan.Snapshots))
	for i, s := range a.Plan.Snapshots {
		refs[i] = state.SnapshotRef{Name: s.Name, Fingerprint: s.Fingerprint.String(), Version: s.Version}
	}
	return refs
}

// updateViews points the environment's views at the plan's physical tables,
// all in one engine transaction (see createViews), and then drops the views
// of models the plan removed, one by one. Views already pointing at the
// right table (see unchangedViews) are left alone; a resumed apply updates
// every view. It refuses, with ErrSuperseded, when the environment has
// moved past this plan.
func (a *applier) updateViews(ctx context.Context, res *Result) error {
	env := a.Plan.Environment
	cur, err := a.Store.GetEnvironment(ctx, env)
	if err != nil {
		return fmt.Errorf("reading environment %s: %w", env, err)
	}
	if cur.PlanID != a.Plan.ID {
		return fmt.Errorf("%w: environment %s is at plan %s (generation %d)", ErrSuperseded, env, cur.PlanID, cur.Generation)
	}
	res.Environment = cur
	schemas := map[string]bool{}
	served := map[string]bool{}
	var views []warehouse.ViewParams
	for _, s := range a.Plan.Snapshots {
		served[s.Name] = true
		if s.Model.Kind == model.KindExternal || a.unchangedViews[s.Name] {
			continue
		}
		view := execute.ViewTable(s, env)
		if !schemas[view.Schema] {
			if err := a.Engine.CreateSchema(ctx, view.Schema); err != nil {
				return fmt.Errorf("creating schema %s: %w", view.Schema, err)
			}
			schemas[view.Schema] = true
		}
		views = append(views, warehouse.ViewParams{View: view, Query: "SELECT * FROM " + a.Engine.QuoteTable(execute.PhysicalTable(s))})
	}
	if err := a.createViews(ctx, views); err != nil {
		return err
	}
	if err := a.registerComments(ctx); err != nil {
		return err
	}
	if err := a.onVirtualUpdate(ctx); err != nil {
		return err
	}
	var removed []string
	for _, c := range a.Plan.Changes {
		if c.Category == snapshot.Removed && !served[c.Name] {
			removed = append(removed, c.Name)
		}
	}
	sort.Strings(removed)
	for _, name := range removed {
		m := &model.Model{Name: name}
		view := warehouse.Table{Schema: execute.ViewSchema(m.Schema(), env), Name: m.Table()}
		if err := a.Engine.DropView(ctx, view); err != nil {
			return fmt.Errorf("dropping the view of removed model %s: %w", name, err)
		}
	}
	// Views are not transactional with state: a newer promotion that
	// landed while they were written may have had its own views
	// overwritten. Detect it, loudly, rather than finalise over it.
	after, err := a.Store.GetEnvironment(ctx, env)
	if err != nil {
		return fmt.Errorf("re-reading environment %s: %w", env, err)
	}
	if after.Generation != cur.Generation {
		return fmt.Errorf("%w while its views were updated: environment %s moved to plan %s (generation %d); re-apply that plan to repoint its views",
			ErrSuperseded, env, after.PlanID, after.Generation)
	}
	return nil
}

// createViews points every view of views at its table in one
// CreateOrReplaceViews call. On an engine with Capabilities.AtomicViews the
// engine commits them together, so readers of the environment see all of
// its views old or all new, never a mix, and a failure leaves every view as
// it was. On an engine without (Trino) the engine checks the whole batch
// first and then repoints the views one at a time in a fixed order (by
// schema, then name, so every apply of a plan takes the same order); a
// failure part-way leaves a prefix repointed and the apply resumable:
// re-applying repoints the rest. An empty batch (every view already in
// place) sends nothing.
func (a *applier) createViews(ctx context.Context, views []warehouse.ViewParams) error {
	if len(views) == 0 {
		return nil
	}
	// Every view reads a physical table, never another view of the batch,
	// so any order is valid; a fixed one makes the non-atomic path's
	// intermediate states predictable.
	sort.Slice(views, func(i, j int) bool {
		if views[i].View.Schema != views[j].View.Schema {
			return views[i].View.Schema < views[j].View.Schema
		}
		return views[i].View.Name < views[j].View.Name
	})
	if err := a.Engine.CreateOrReplaceViews(ctx, views); err != nil {
		return fmt.Errorf("pointing %d views of environment %s at their tables: %w", len(views), a.Plan.Environment, err)
	}
	return nil
}

// finalize marks the plan finalised, pinned to its id.
func (a *applier) finalize(ctx context.Context) error {
	err := a.Store.Finalize(ctx, state.FinalizeParams{Environment: a.Plan.Environment, PlanID: a.Plan.ID, Now: a.now()})
	if err != nil {
		return fmt.Errorf("finalizing: %w", err)
	}
	a.appendEvents(ctx, []state.Event{{At: a.now(), Kind: state.EventPlanApplied, Environment: a.Plan.Environment, PlanID: a.Plan.ID}})
	return nil
}
