// Package run is the scheduler's unit of work: once, at an execution time,
// it computes the due intervals of every snapshot an environment serves and
// executes them in DAG order.
//
// Invariants:
//   - every interval write is fenced on the environment's generation as read
//     at the start (state.Fence{Environment, Generation}), so a run never
//     records intervals on behalf of an environment that was promoted
//     meanwhile;
//   - before each model the environment's generation is re-read (that one
//     row, not the snapshots it serves); if it moved, the run stops there
//     (the circuit breaker) with a *StoppedError — and a fenced write stops
//     it the same way;
//   - a child's interval runs only once its parents cover it: a child's work
//     is clipped, per interval of its own unit, to what every parent covers
//     after the parents ran in this same run;
//   - a model reading a source (package source) runs only where the source
//     has published coverage (state.SourceKey): before a source has landed,
//     nothing that reads it runs, and ModelResult.WaitingOn says why;
//   - a failed batch (a *execute.BatchError) stops its model and every model
//     downstream of it, not the run: independent branches still run, and
//     the run returns every failure joined.
package run

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/gapless-dev/gapless/cadence"
	"github.com/gapless-dev/gapless/dag"
	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/lease"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/source"
	"github.com/gapless-dev/gapless/sqlparse"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

// ErrGenerationChanged is wrapped by *StoppedError: the environment was
// promoted (or invalidated) while the run was in progress.
var ErrGenerationChanged = errors.New("environment generation changed during the run")

// StoppedError is the circuit breaker: the run stopped before Model because
// Environment moved from generation Started to Now (0 when it was removed
// or invalidated). Everything before Model was recorded under the old
// generation; nothing was written on behalf of a retired snapshot after the
// promotion. Err is ErrGenerationChanged, or the state.ErrFenced of a write
// that lost the race.
type StoppedError struct {
	Environment string
	Model       string
	Started     int64
	Now         int64
	Err         error
}

func (e *StoppedError) Error() string {
	return fmt.Sprintf("run of %s stopped before %s: generation %d is no longer current (now %d): %v; the next run picks up from the new generation",
		e.Environment, e.Model, e.Started, e.Now, e.Err)
}

func (e *StoppedError) Unwrap() error { return e.Err }

// Hooks let tests act at exact points of a run.
type Hooks struct {
	// BeforeModel runs before each model's circuit-breaker check.
	BeforeModel func(ctx context.Context, model string) error
	// AfterCheck runs after a model passed the circuit-breaker check and
	// before its work starts: a promotion here is caught by the fence.
	AfterCheck func(ctx context.Context, model string) error
}

// Params are what Once needs.
type Params struct {
	Env           string
	ExecutionTime time.Time
	// Select restricts the run to these models (their parents are not
	// added; a selected model runs only where its parents already cover).
	Select []string

	Store      state.Store
	Engine     warehouse.Engine
	Parser     *sqlparse.Parser
	ProjectDir string
	// Clock stamps state writes. Nil means the Leases' clock when it has
	// one (lease expiry and fence checks then read one clock), else the
	// real clock (clockwork.NewRealClock): see clock.
	Clock  clockwork.Clock
	Logger *slog.Logger
	Hooks  Hooks
	// Leases, when set, makes the run take each model version's lease
	// (lease.VersionKey) before computing its due work, without waiting. A
	// version another owner leases (a deploy under the lock policy, another
	// scheduler daemon or run) is deferred to a later run and reported in
	// ModelResult.DeferredBy and DeferredUntil; its children wait for it as
	// for any parent. A lease whose holder is a process of this host that
	// no longer runs (a killed run) is taken over at once (lease.TryAcquire).
	// The work's interval writes are fenced on the lease as well as on the
	// environment's generation.
	Leases *lease.Options
	// Stop, when closed, keeps the run's further batches from starting
	// (execute.Work.Stop): the run returns an error wrapping
	// execute.ErrStopped. The daemon closes it on SIGINT/SIGTERM.
	Stop <-chan struct{}
	// OnBatch, when set, is called after each batch has committed and been
	// recorded (execute.Executor.OnBatch): the command line counts them.
	OnBatch func(execute.Batch)
	// Known are snapshots the caller already holds (snapshots are
	// immutable, so a key always names the same content): the run reads
	// only the served snapshots missing from it. The scheduler daemon passes
	// its cache.
	Known map[state.SnapshotKey]*snapshot.Snapshot
	// Statements are the configuration's before_all and after_all
	// statements: before_all runs once before the run's first model (a
	// failure runs nothing), after_all once after its last, when no model
	// failed. Nil runs none.
	Statements *execute.EnvironmentStatements
}

// ModelResult is what the run did for one model.
type ModelResult struct {
	Model, Version string
	Batches        int
	Rows           int64
	Recorded       interval.Set
	// Waiting is due work held back because a parent does not cover it yet.
	Waiting interval.Set
	// WaitingOn says, when a source it reads holds some of Waiting back,
	// why: one SourceWait.Reason per such source.
	WaitingOn []string
	// DeferredBy names the holder of the version's lease (owner, PID and
	// host: lease.Describe) when the run deferred the model's due work
	// (Deferred) because another process holds the lease, alive or not
	// known to be gone; DeferredUntil is when that lease expires unless
	// its holder renews it, the earliest time a later run can take it
	// from a holder that stopped (one that finishes releases it sooner).
	DeferredBy    string
	DeferredUntil time.Time
	Deferred      interval.Set
	// Err is the model's failed batch (a *execute.BatchError); BlockedBy
	// names the failed ancestor that kept the model from running.
	Err       error
	BlockedBy string
}

// Result is what a run did.
type Result struct {
	Environment string
	Generation  int64
	Models      []ModelResult
}

// clock is the run's time source, decided here only: Params.Clock, else
// the Leases' clock (lease expiry and fence checks read one clock), else the
// real clock.
func (p *Params) clock() clockwork.Clock {
	switch {
	case p.Clock != nil:
		return p.Clock
	case p.Leases != nil && p.Leases.Clock != nil:
		return p.Leases.Clock
	}
	return clockwork.NewRealClock()
}

// Once runs every due interval of every model that p.Env serves, once.
func Once(ctx context.Context, p Params) (*Result, error) {
	base := p.Logger
	if base == nil {
		base = slog.Default()
	}
	p.Logger = base
	log := base.With(slog.String(logkey.Environment, p.Env))
	if p.Leases != nil && p.Leases.Logger == nil {
		lo := *p.Leases // the lease records (a takeover) go where the run's go
		lo.Logger = base
		p.Leases = &lo
	}
	env, err := p.Store.GetEnvironment(ctx, p.Env)
	if err != nil {
		return nil, fmt.Errorf("run %s: reading the environment: %w", p.Env, err)
	}
	if env.Invalidated {
		return nil, fmt.Errorf("run %s: the environment is invalidated: %w", p.Env, state.ErrNotFound)
	}
	g := env.Generation
	log = log.With(slog.Int64(logkey.Generation, g), slog.String(logkey.Plan, env.PlanID))
	set, order, err := served(ctx, p.Store, env, p.Known)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", p.Env, err)
	}
	// selected is p.Select as a set: the scheduler selects every due model,
	// so a lookup per model in the list would make a run quadratic.
	selected := make(map[string]bool, len(p.Select))
	for _, name := range p.Select {
		if _, ok := set[name]; !ok {
			return nil, fmt.Errorf("run %s: --select-model %s: the environment serves no such model", p.Env, name)
		}
		selected[name] = true
	}
	x := &execute.Executor{Engine: p.Engine, Store: p.Store, ProjectDir: p.ProjectDir, Clock: p.clock(), Logger: log, OnBatch: p.OnBatch}
	fence := &state.Fence{Environment: p.Env, Generation: g}
	res := &Result{Environment: p.Env, Generation: g}
	if err := p.Statements.RunBefore(ctx, p.Engine, p.Env, p.ExecutionTime); err != nil {
		return res, fmt.Errorf("run %s: %w", p.Env, err)
	}
	// blocked maps each model that failed, or descends from one, to the
	// failed model: independent branches keep running, dependants do not.
	blocked := map[string]string{}
	var failures []error
	for _, name := range order {
		s := set[name]
		if s.Model.Kind == model.KindExternal || (len(p.Select) > 0 && !selected[name]) {
			continue
		}
		if cause := blockedBy(s, blocked); cause != "" {
			blocked[name] = cause
			res.Models = append(res.Models, ModelResult{Model: name, Version: s.Version, BlockedBy: cause})
			ModelBlocked{Model: name, Failed: cause}.log(ctx, log)
			continue
		}
		if p.Hooks.BeforeModel != nil {
			if err := p.Hooks.BeforeModel(ctx, name); err != nil {
				return res, fmt.Errorf("run %s: before-model hook for %s: %w", p.Env, name, err)
			}
		}
		// The circuit breaker: re-read the environment before each model.
		if cur, err := currentGeneration(ctx, p.Store, p.Env); err != nil {
			return res, fmt.Errorf("run %s: re-reading the environment before %s: %w", p.Env, name, err)
		} else if cur != g {
			CircuitBroken{Model: name, Current: cur}.log(ctx, log)
			return res, &StoppedError{Environment: p.Env, Model: name, Started: g, Now: cur, Err: ErrGenerationChanged}
		}
		if p.Hooks.AfterCheck != nil {
			if err := p.Hooks.AfterCheck(ctx, name); err != nil {
				return res, fmt.Errorf("run %s: after-check hook for %s: %w", p.Env, name, err)
			}
		}
		mr, err := runModel(ctx, p, x, s, set, fence)
		if errors.Is(err, state.ErrFenced) {
			cur, _ := currentGeneration(ctx, p.Store, p.Env)
			CircuitBroken{Model: name, Current: cur, Fenced: true}.log(ctx, log)
			return res, &StoppedError{Environment: p.Env, Model: name, Started: g, Now: cur, Err: err}
		}
		if err != nil && ctx.Err() != nil {
			// Interrupted (Ctrl-C, a stopping caller): not a failure of the
			// model, and nothing further can run.
			return res, fmt.Errorf("run %s: %w", p.Env, err)
		}
		var batch *execute.BatchError
		if errors.As(err, &batch) {
			blocked[name] = name
			failures = append(failures, fmt.Errorf("run %s: %w", p.Env, err))
			res.Models = append(res.Models, ModelResult{Model: name, Version: s.Version, Err: err})
			continue
		}
		if err != nil {
			return res, fmt.Errorf("run %s: %w", p.Env, err)
		}
		if mr != nil && mr.DeferredBy != "" {
			ModelDeferred{Model: name, Version: mr.Version, Holder: mr.DeferredBy, Until: mr.DeferredUntil,
				Interval: mr.Deferred.String()}.log(ctx, log)
		}
		if mr != nil {
			res.Models = append(res.Models, *mr)
		}
	}
	if len(failures) == 0 {
		if err := p.Statements.RunAfter(ctx, p.Engine, p.Env, p.ExecutionTime); err != nil {
			return res, fmt.Errorf("run %s: %w", p.Env, err)
		}
	}
	return res, errors.Join(failures...)
}

// blockedBy returns the failed model upstream of s, if any: the cause
// recorded for any of its parents (parents come first in the run's order).
func blockedBy(s *snapshot.Snapshot, blocked map[string]string) string {
	for _, p := range s.Parents {
		if cause, ok := blocked[p]; ok {
			return cause
		}
	}
	return ""
}

// currentGeneration is the environment's generation now; 0 when it no
// longer exists or is invalidated (which also trips the breaker). It reads
// the generation alone (state.Store.EnvironmentGeneration), never the
// environment's snapshot references: the breaker runs before every model,
// so a read that grew with the environment would make a run quadratic.
func currentGeneration(ctx context.Context, st state.Store, env string) (int64, error) {
	g, invalidated, err := st.EnvironmentGeneration(ctx, env)
	if errors.Is(err, state.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if invalidated {
		return 0, nil
	}
	return g, nil
}

// served reads the environment's snapshots (those not in known) and orders
// them parents first.
func served(ctx context.Context, st Reader, env *state.Environment, known map[state.SnapshotKey]*snapshot.Snapshot) (map[string]*snapshot.Snapshot, []string, error) {
	var keys []state.SnapshotKey
	for _, r := range env.Snapshots {
		if _, ok := known[r.Key()]; !ok {
			keys = append(keys, r.Key())
		}
	}
	var got map[state.SnapshotKey]*snapshot.Snapshot
	if len(keys) > 0 {
		var err error
		if got, err = st.GetSnapshots(ctx, keys); err != nil {
			return nil, nil, fmt.Errorf("reading snapshots: %w", err)
		}
	}
	set := make(map[string]*snapshot.Snapshot, len(env.Snapshots))
	for _, r := range env.Snapshots {
		s, ok := known[r.Key()]
		if !ok {
			s, ok = got[r.Key()]
		}
		if !ok {
			return nil, nil, fmt.Errorf("snapshot %s@%s of environment %s: %w", r.Name, r.Fingerprint, env.Name, state.ErrNotFound)
		}
		set[r.Name] = s
	}
	edges := make(map[string][]string, len(set))
	for name, s := range set {
		for _, p := range s.Parents {
			if _, ok := set[p]; ok {
				edges[name] = append(edges[name], p)
			}
		}
		if edges[name] == nil {
			edges[name] = []string{}
		}
	}
	g, err := dag.New(edges)
	if err != nil {
		return nil, nil, fmt.Errorf("ordering the environment's models: %w", err)
	}
	return set, g.Order(), nil
}

// Due is one model's due work at an execution time, as a run computes it.
type Due struct {
	// Missing is what the model's cron makes due and its version does not
	// cover yet.
	Missing interval.Set
	// Work is what to compute now: Missing widened by lookback and, for
	// incremental kinds, clipped to what every parent covers (to whole
	// intervals of the model's unit unless it allows partials).
	Work interval.Set
	// Waiting is the part of Missing held back because a parent does not
	// cover it yet.
	Waiting interval.Set
}

// DueWork computes s's due work at exec. covered must hold the intervals of
// s's version and of the versions set serves for s's parents, and for a
// parent that is a source its published coverage (state.SourceKey); EXTERNAL
// parents and parents outside set are ignored, and a SEED parent clips
// nothing once its version is loaded (its rows hold for all time) and
// everything before. Kinds built whole (FULL,
// VIEW, SEED) are not clipped to their parents, but wait while a source
// they read has published no coverage at all: before a source has landed,
// nothing that reads it runs.
//
// It is the one definition of "due" shared by a run and the scheduler
// daemon's nothing-due check, so the daemon never skips work a run would
// do.
func DueWork(s *snapshot.Snapshot, spec cadence.Spec, set map[string]*snapshot.Snapshot, covered map[state.VersionKey]interval.Set, exec time.Time) Due {
	due := spec.Missing(covered[state.VersionKey{Name: s.Name, Version: s.Version}], exec)
	d := Due{Missing: due.Missing, Work: due.Work}
	if d.Missing.IsEmpty() {
		return d
	}
	if !s.Model.Kind.IsIncremental() {
		for _, w := range SourceWaits(s, set, covered) {
			if w.Covered.IsEmpty() {
				d.Waiting, d.Work = d.Missing, interval.Set{}
				break
			}
		}
		return d
	}
	ready := due.Work
	for _, pk := range parentKeys(s, set) {
		if ps := set[pk.Name]; ps != nil && ps.Model.Kind == model.KindSeed && pk.Version == ps.Version {
			// A seed's rows do not depend on time: once its version is
			// loaded it serves every interval, whatever its own cadence
			// says about later loads (as in SQLMesh). Before it is
			// loaded, nothing that reads it is ready.
			if covered[pk].IsEmpty() {
				ready = interval.Set{}
			}
			continue
		}
		ready = ready.Intersect(covered[pk])
	}
	ready = aligned(ready, spec.Unit, s.Model.AllowPartials)
	d.Waiting = due.Missing.Subtract(ready)
	d.Work = ready
	return d
}

// parentKeys are the interval records of s's parents that set serves:
// their versions', a source's published coverage (state.SourceKey), none
// for an EXTERNAL table.
func parentKeys(s *snapshot.Snapshot, set map[string]*snapshot.Snapshot) []state.VersionKey {
	var out []state.VersionKey
	for _, pn := range s.Parents {
		ps, ok := set[pn]
		if ok && ps.Model.Source {
			out = append(out, state.SourceKey(ps.Name))
			continue
		}
		if !ok || ps.Model.Kind == model.KindExternal {
			continue
		}
		out = append(out, state.VersionKey{Name: ps.Name, Version: ps.Version})
	}
	return out
}

// SourceWait is a source that s reads, with what it has published.
type SourceWait struct {
	Source  string
	Covered interval.Set
}

// Reason says why a model waits on the source: "waiting on raw.events (not
// landed yet)", or how far it is complete.
func (w SourceWait) Reason() string { return source.WaitReason(w.Source, w.Covered.Frontier()) }

// SourceWaits lists the sources among s's parents that set serves, in s's
// parents' order, each with its coverage in covered (keyed by
// state.SourceKey).
func SourceWaits(s *snapshot.Snapshot, set map[string]*snapshot.Snapshot, covered map[state.VersionKey]interval.Set) []SourceWait {
	var out []SourceWait
	for _, pn := range s.Parents {
		if ps, ok := set[pn]; ok && ps.Model.Source {
			out = append(out, SourceWait{Source: pn, Covered: covered[state.SourceKey(pn)]})
		}
	}
	return out
}

// waitingOn gives the reason (SourceWait.Reason) of each source among s's
// parents that does not cover all of waiting, in s's parents' order: what
// the model waits on that a parent model's run will not bring.
func waitingOn(s *snapshot.Snapshot, set map[string]*snapshot.Snapshot, covered map[state.VersionKey]interval.Set, waiting interval.Set) []string {
	var out []string
	for _, w := range SourceWaits(s, set, covered) {
		if !waiting.Subtract(w.Covered).IsEmpty() {
			out = append(out, w.Reason())
		}
	}
	return out
}

// runModel computes one model's due work, clipped to its parents' coverage.
// Its template (which parses the model's SQL) is built only when there is
// work to do.
func runModel(ctx context.Context, p Params, x *execute.Executor, s *snapshot.Snapshot, set map[string]*snapshot.Snapshot, fence *state.Fence) (*ModelResult, error) {
	spec, err := cadence.ForModel(s.Model)
	if err != nil {
		return nil, err
	}
	key := state.VersionKey{Name: s.Name, Version: s.Version}
	keys := append([]state.VersionKey{key}, parentKeys(s, set)...)
	var covered map[state.VersionKey]interval.Set // as dueNow last read it
	dueNow := func() (Due, error) {
		var err error
		if covered, err = p.Store.GetIntervals(ctx, keys); err != nil {
			return Due{}, fmt.Errorf("reading intervals of %s: %w", s.Name, err)
		}
		return DueWork(s, spec, set, covered, p.ExecutionTime), nil
	}
	due, err := dueNow()
	if err != nil {
		return nil, err
	}
	if due.Missing.IsEmpty() {
		return nil, nil
	}
	mr := &ModelResult{Model: s.Name, Version: s.Version, Waiting: due.Waiting}
	if !due.Waiting.IsEmpty() {
		mr.WaitingOn = waitingOn(s, set, covered, due.Waiting)
	}
	if due.Work.IsEmpty() {
		return mr, nil
	}
	if p.Leases != nil {
		held, err := lease.TryAcquire(ctx, p.Store, lease.VersionKey(key), *p.Leases)
		if errors.Is(err, state.ErrLeaseHeld) {
			mr.DeferredBy, mr.Deferred = "another owner", due.Work
			var he *lease.HeldError
			if errors.As(err, &he) {
				mr.DeferredBy, mr.DeferredUntil = lease.Describe(he.Lease), he.Lease.ExpiresAt.UTC()
			}
			return mr, nil
		}
		if err != nil {
			return nil, fmt.Errorf("leasing %s: %w", s.Name, err)
		}
		held.Keep(ctx)
		defer func() {
			if rerr := held.Release(context.WithoutCancel(ctx)); rerr != nil {
				LeaseReleaseFailed{Model: s.Name, Err: rerr}.log(ctx, p.Logger)
			}
		}()
		f := *fence
		lf := held.Fence(lease.VersionKey(key))
		f.LeaseKey, f.LeaseToken = lf.LeaseKey, lf.LeaseToken
		fence = &f
		// Another writer may have held the lease between the read above
		// and this acquisition and computed part of the work: read again
		// under the lease, so that each interval is computed once.
		if due, err = dueNow(); err != nil {
			return nil, err
		}
		if due.Missing.IsEmpty() {
			return nil, nil
		}
		mr.Waiting, mr.WaitingOn = due.Waiting, nil
		if !due.Waiting.IsEmpty() {
			mr.WaitingOn = waitingOn(s, set, covered, due.Waiting)
		}
		if due.Work.IsEmpty() {
			return mr, nil
		}
	}
	t, err := execute.TemplateOf(ctx, p.Parser, p.Engine, s, set)
	if err != nil {
		return nil, err
	}
	// InOrder: a run computes what an environment serves.
	r, err := x.Execute(ctx, execute.Work{Template: t, Ranges: due.Work, Whole: !s.Model.Kind.IsIncremental(), Execution: p.ExecutionTime, Fence: fence, Stop: p.Stop, InOrder: true})
	if err != nil {
		return nil, err
	}
	mr.Batches, mr.Rows, mr.Recorded = r.Batches, r.Rows, r.Recorded
	return mr, nil
}

// aligned shrinks each range of s to whole buckets of u (a parent covering
// part of a child's day does not make the day ready), unless partial
// intervals are allowed.
func aligned(s interval.Set, u interval.Unit, partials bool) interval.Set {
	if partials {
		return s
	}
	var out []interval.Range
	for r := range s.All() {
		a := interval.NewRange(u.Ceil(r.Start), u.Floor(r.End))
		if !a.Empty() {
			out = append(out, a)
		}
	}
	return interval.NewSet(out...)
}
