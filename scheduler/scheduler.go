// Package scheduler is gapless's long-running scheduler daemon: on every
// tick it runs, for each of its environments, the work that is due (as
// `gapless run` does, through run.Once), and it keeps doing so until it is
// stopped.
//
// Invariants:
//
//   - Nothing due costs no warehouse. Each tick first decides, from state
//     alone, whether any model of an environment has work a run would do: one
//     read of the environment, the served snapshots (cached by key, since a
//     snapshot is immutable), and every served version's intervals in one
//     GetIntervals call, evaluated with run.DueWork (the very definition of
//     due a run uses). Only then does it open the warehouse, and it closes it
//     again at the end of the tick: the embedded DuckDB file can be held by
//     one process at a time, so a `gapless plan` or `apply` in another shell
//     waits a bounded time (--lock-wait) and then proceeds.
//   - Several daemons never run one model version at once. Each model's
//     work runs under the version's lease (run.Params.Leases, taken without
//     waiting); a version leased by another daemon or by a deploy under the
//     lock policy is deferred to a later tick, and counted, unless that
//     holder is a process of this host that no longer runs: its lease is
//     taken over at once (lease.TryAcquire). Every interval write is fenced
//     on that lease and on the environment generation.
//   - A stale loop never outlives a promotion. When a run stops because the
//     environment was promoted meanwhile (its circuit breaker, or a write
//     refused with state.ErrFenced), the daemon re-reads the environment and
//     runs the promoted snapshots in the same tick (at most maxFollow times),
//     so an accepted trailing gap is repaired by the next tick of any daemon,
//     not after a stale loop finishes.
//   - A stop never leaves a half-recorded batch: see Tick.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gapless-dev/gapless/cadence"
	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/ingest"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/lease"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/run"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/sqlparse"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

// Defaults for Params.
const (
	DefaultTick  = time.Minute
	DefaultGrace = 30 * time.Second
)

// maxFollow bounds how many times one tick re-runs an environment after a
// run stopped on a promotion.
const maxFollow = 3

// errStopping is what the daemon's before-model hook returns once a stop
// was asked for: the run then starts no further model.
var errStopping = errors.New("the scheduler is stopping")

// stoppingErr: the run ended because a stop was asked for, between models
// (errStopping) or between batches (execute.ErrStopped).
func stoppingErr(err error) bool {
	return errors.Is(err, errStopping) || errors.Is(err, execute.ErrStopped)
}

// Params configure a Scheduler.
type Params struct {
	// Envs are the environments kept fresh, in this order each tick.
	Envs  []string
	Store state.Store
	// OpenEngine opens the warehouse; it is called at most once per tick,
	// only when some environment has work, and the engine is closed at the
	// end of the tick.
	OpenEngine func(ctx context.Context) (warehouse.Engine, error)
	Parser     *sqlparse.Parser
	ProjectDir string

	// Clock drives the ticks, the execution time, state stamps, the grace
	// period and the leases. Nil is the real clock.
	Clock clockwork.Clock
	// Tick is the cadence (DefaultTick when zero); each tick is delayed by
	// a random duration in [0, Jitter) so that daemons started together
	// spread out.
	Tick, Jitter time.Duration
	// Grace is how long a stop lets the in-flight batch finish before
	// cancelling it (DefaultGrace when zero; negative: cancel at once).
	Grace time.Duration
	// ExecutionTime, when set, is every tick's execution time instead of
	// the clock's now (`gapless scheduler --once --execution-time`).
	ExecutionTime time.Time

	// Lease is how version leases are taken. Owner defaults to
	// "scheduler", Holder to this process (lease.Self), Clock to Clock. A
	// version leased by a process of this host that no longer runs (a
	// killed daemon or run) is taken over at once (lease.TryAcquire).
	Lease  lease.Options
	Logger *slog.Logger
	// Registerer receives the daemon's metrics; nil registers them in a
	// registry of the Scheduler's own (served by Handler either way).
	Registerer prometheus.Registerer
	// Hooks are passed to every run (tests act at exact points of a tick).
	Hooks run.Hooks
	// Ingest, when set and naming sources, is landed at the start of each
	// tick, before the runs (see Tick); nil: the daemon ingests nothing
	// (`gapless scheduler --ingest=false`).
	Ingest *Ingest
	// Statements are the configuration's before_all and after_all, run
	// around every run of an environment (nil: none).
	Statements *execute.EnvironmentStatements
}

// Scheduler is the daemon. Its ticks are serialised: Tick and Run may be
// called from any goroutine, one tick runs at a time.
type Scheduler struct {
	p       Params
	clock   clockwork.Clock
	log     *slog.Logger
	metrics *metrics
	gather  prometheus.Gatherer

	tickMu sync.Mutex // held for the duration of a tick; guards cache and views
	cache  map[state.SnapshotKey]*entry
	views  map[string]*view // by environment name

	statsMu sync.Mutex
	stats   Health
}

// entry is what the scheduler keeps of one snapshot: immutable, so fetched
// once per key.
type entry struct {
	snap    *snapshot.Snapshot
	spec    cadence.Spec
	specErr error
}

// New checks p and returns a Scheduler.
func New(p Params) (*Scheduler, error) {
	if p.Store == nil || p.OpenEngine == nil || p.Parser == nil {
		return nil, errors.New("scheduler: Store, OpenEngine and Parser are required")
	}
	if len(p.Envs) == 0 {
		return nil, errors.New("scheduler: no environment to keep fresh")
	}
	if p.Clock == nil {
		p.Clock = clockwork.NewRealClock()
	}
	if p.Tick <= 0 {
		p.Tick = DefaultTick
	}
	if p.Jitter < 0 {
		p.Jitter = 0
	}
	if p.Grace == 0 {
		p.Grace = DefaultGrace
	}
	if p.Logger == nil {
		p.Logger = slog.Default()
	}
	if p.Lease.Owner == "" {
		p.Lease.Owner = "scheduler"
	}
	if p.Lease.Holder.IsZero() {
		p.Lease.Holder = lease.Self() // host and PID: lease.Describe names them
	}
	if p.Lease.Clock == nil {
		p.Lease.Clock = p.Clock
	}
	if p.Lease.Logger == nil {
		p.Lease.Logger = p.Logger
	}
	reg := p.Registerer
	var gather prometheus.Gatherer
	if reg == nil {
		r := prometheus.NewRegistry()
		reg, gather = r, r
	} else if g, ok := reg.(prometheus.Gatherer); ok {
		gather = g
	} else {
		gather = prometheus.DefaultGatherer
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	onRenew := p.Lease.OnRenew
	p.Lease.OnRenew = func(err error) {
		if errors.Is(err, state.ErrLeaseLost) {
			m.leaseLosses.Inc()
		}
		if onRenew != nil {
			onRenew(err)
		}
	}
	return &Scheduler{
		p: p, clock: p.Clock, log: p.Logger, metrics: m, gather: gather,
		cache: map[state.SnapshotKey]*entry{}, views: map[string]*view{},
	}, nil
}

// TickResult is what one tick did.
type TickResult struct {
	ExecutionTime time.Time
	// OpenedEngine says whether the tick opened the warehouse.
	OpenedEngine bool
	Envs         []EnvResult
	// Stopped says the tick was stopped before it finished its work.
	Stopped bool
	// Ingest is what the tick's ingest pass did (nil: no pass ran);
	// IngestErr is its failure as a whole, if it failed (each source's own
	// failure is in its report).
	Ingest    *ingest.Report
	IngestErr error
}

// Err joins the ingest pass's and the environments' errors.
func (r TickResult) Err() error {
	errs := []error{r.IngestErr}
	if r.Ingest != nil {
		errs = append(errs, r.Ingest.Err())
	}
	for _, e := range r.Envs {
		if e.Err != nil {
			errs = append(errs, e.Err)
		}
	}
	return errors.Join(errs...)
}

// EnvResult is what one tick did for one environment.
type EnvResult struct {
	Env string
	// Generation is the generation the last run (or check) worked under.
	Generation int64
	// Absent says the environment does not exist (or is invalidated):
	// nothing to do, and not an error.
	Absent bool
	// Stopped says a stop was asked for before the environment's work was
	// done.
	Stopped bool
	// Due names the models that had due work when the tick looked.
	Due []string
	// Models are the runs' per-model results, across followed promotions.
	Models []run.ModelResult
	// Ran counts the models that computed at least one batch; Intervals
	// the interval-unit buckets they recorded.
	Ran, Intervals int
	// Deferred names the models whose work was deferred because another
	// owner leased their version.
	Deferred []string
	// Followed counts the promotions followed within the tick (runs stopped
	// by the circuit breaker or a fenced write, then run again).
	Followed int
	// Lag is how far the oldest due interval not yet computed ends behind
	// the execution time, after the tick, over the environment's models
	// (cadence.Gaps.Lag); 0 when caught up.
	Lag      time.Duration
	Duration time.Duration
	Err      error
}

// Tick runs one pass over every environment at the execution time (the
// clock's now, or Params.ExecutionTime).
//
// Ingesting: with Params.Ingest, the tick first runs one ingest pass over
// its sources (ingest.Pass), on the warehouse the runs then use, so that
// one process holds an embedded DuckDB file for both; the environments'
// nothing-due checks come after it and see the watermarks it published,
// so the runs compute what the sources now cover. A source that fails
// holds back neither the other sources nor the runs (its readers wait on
// its watermark); the failure is the tick's error.
//
// Stopping: cancelling ctx asks the tick to stop, it is not an abort. The
// tick starts no further environment, run or model (the runs' before-model
// hook refuses), and lets the batch in flight finish: the work runs under a
// context detached from ctx, cancelled only Grace after ctx ends. A batch
// still running then is cancelled, and that records nothing: its warehouse
// statement runs in one transaction bound to the context (DuckDB's and
// PostgreSQL's InsertInterval, MergeByKey and ReplaceTable roll back on
// cancel), and execute.Executor records a batch's interval in state only
// after that transaction committed, in one state transaction of its own.
// So a stop leaves every batch either committed and recorded, or rolled back
// and unrecorded (or, if cancelled between the two, committed and
// unrecorded: the rows are replaced exactly by the run that recomputes the
// interval, see execute.Executor.Execute). Leases are released and the
// warehouse is closed before Tick returns.
func (s *Scheduler) Tick(ctx context.Context) (TickResult, error) {
	s.tickMu.Lock()
	defer s.tickMu.Unlock()
	work, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	var (
		mu    sync.Mutex
		timer clockwork.Timer
		done  bool
	)
	stopWatch := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return
		}
		if s.p.Grace < 0 {
			cancel()
			return
		}
		s.emit(StopRequested{Grace: s.p.Grace})
		timer = s.clock.AfterFunc(s.p.Grace, func() {
			s.emit(GraceOver{})
			cancel()
		})
	})
	defer func() {
		stopWatch()
		mu.Lock()
		done = true
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
	}()
	return s.tick(work, ctx)
}

// tick does Tick's work under work; stop ending means a stop was asked for.
func (s *Scheduler) tick(work, stop context.Context) (TickResult, error) {
	began := s.clock.Now()
	exec := s.p.ExecutionTime
	if exec.IsZero() {
		exec = began
	}
	exec = exec.UTC()
	res := TickResult{ExecutionTime: exec}
	s.setInTick(began)

	var engine warehouse.Engine
	defer func() {
		if engine == nil {
			return
		}
		if err := engine.Close(); err != nil {
			s.emit(EngineCloseFailed{Err: err})
		}
	}()
	open := func() (warehouse.Engine, error) {
		if engine != nil {
			return engine, nil
		}
		e, err := s.p.OpenEngine(work)
		if err != nil {
			return nil, fmt.Errorf("opening the warehouse: %w", err)
		}
		engine, res.OpenedEngine = e, true
		return e, nil
	}

	if stop.Err() == nil {
		res.Ingest, res.IngestErr = s.ingest(work, open)
	}
	for _, env := range s.p.Envs {
		if stop.Err() != nil {
			res.Stopped = true
			break
		}
		er := s.tickEnv(work, stop, env, exec, open)
		res.Stopped = res.Stopped || er.Stopped
		res.Envs = append(res.Envs, er)
	}
	s.metrics.ticks.Inc()
	err := res.Err()
	s.setTicked(s.clock.Now(), err)
	// The per-environment lines come once the tick is counted, so whoever
	// reads a "scheduler tick" line finds /healthz already counting it.
	for _, er := range res.Envs {
		s.record(er)
	}
	return res, err
}

// tickEnv is one environment's part of a tick.
//
// It follows promotions: a run stopped by its circuit breaker or a fenced
// write (a *run.StoppedError), or a run that found the environment at
// another generation than the check did, is followed by a fresh check and
// run of the promoted snapshots, at most maxFollow times. A batch that
// fails does not hold the rest of the environment back: the failing model
// is left out (its children then wait for it) and the others run; the
// failure is still the tick's error.
func (s *Scheduler) tickEnv(work, stop context.Context, env string, exec time.Time, open func() (warehouse.Engine, error)) (er EnvResult) {
	began := s.clock.Now()
	er.Env = env
	var errs []error
	defer func() {
		er.Duration = s.clock.Now().Sub(began)
		if er.Err == nil {
			er.Err = errors.Join(errs...)
		}
	}()
	failed := map[string]bool{}
	for first := true; ; first = false {
		c, err := s.check(work, env, exec)
		if err != nil {
			er.Err = err
			return er
		}
		if c.absent {
			er.Absent = true
			return er
		}
		er.Generation, er.Lag = c.generation, c.lag
		if first {
			er.Due = c.due
		}
		selected := slices.DeleteFunc(slices.Clone(c.due), func(m string) bool { return failed[m] })
		if !c.runnable || len(selected) == 0 {
			return er
		}
		if stop.Err() != nil {
			er.Stopped = true
			return er
		}
		engine, err := open()
		if err != nil {
			s.metrics.runs.WithLabelValues(env, "error").Inc()
			er.Err = err
			return er
		}
		rr, err := run.Once(work, run.Params{
			Env: env, ExecutionTime: exec, Select: selected,
			Store: s.p.Store, Engine: engine, Parser: s.p.Parser, ProjectDir: s.p.ProjectDir,
			Clock: s.clock, Logger: s.log, Hooks: s.hooks(stop), Leases: &s.p.Lease, Known: c.known,
			Stop: stop.Done(), Statements: s.p.Statements,
		})
		if rr != nil {
			s.account(&er, rr, c.units)
		}
		var (
			stopped *run.StoppedError
			batch   *execute.BatchError
		)
		// promoted: the run stopped on a promotion, or ran (or failed)
		// against another generation than the check saw.
		promoted := errors.As(err, &stopped) ||
			(err == nil && rr.Generation != c.generation) ||
			(err != nil && !stoppingErr(err) && s.moved(work, env, c.generation))
		switch {
		case promoted:
			s.metrics.runs.WithLabelValues(env, "fenced").Inc()
			s.metrics.fenced.WithLabelValues(env).Inc()
			er.Followed++
			if er.Followed > maxFollow {
				er.Err = fmt.Errorf("environment %s was promoted %d times during one tick; the next tick carries on: %w", env, er.Followed, err)
				return er
			}
			s.emit(PromotionFollowed{Environment: env, From: c.generation, Reason: err})
			continue
		case stoppingErr(err):
			s.metrics.runs.WithLabelValues(env, "stopped").Inc()
			er.Stopped = true
		case errors.As(err, &batch) && !failed[batch.Model]:
			s.metrics.runs.WithLabelValues(env, "error").Inc()
			errs = append(errs, err)
			failed[batch.Model] = true
			if rr != nil {
				for _, m := range rr.Models {
					if m.Err != nil {
						failed[m.Model] = true // run.Once ran the independent branches already
					}
				}
			}
			s.emit(ModelFailed{Environment: env, Model: batch.Model, Err: err})
			continue
		case err != nil:
			s.metrics.runs.WithLabelValues(env, "error").Inc()
			errs = append(errs, err)
			return er
		default:
			s.metrics.runs.WithLabelValues(env, "ok").Inc()
		}
		// What is left behind after the run, for the lag.
		if after, cerr := s.check(work, env, exec); cerr == nil && !after.absent {
			er.Lag = after.lag
		}
		return er
	}
}

// moved reports whether env is no longer at generation g (read errors
// count as not moved: the run's own error is reported instead).
func (s *Scheduler) moved(ctx context.Context, env string, g int64) bool {
	cur, invalidated, err := s.p.Store.EnvironmentGeneration(ctx, env)
	if errors.Is(err, state.ErrNotFound) {
		return true
	}
	return err == nil && (invalidated || cur != g)
}

// hooks are the runs' hooks: Params.Hooks, behind a before-model check that
// refuses to start a model once a stop was asked for.
//
// (Within a model, run.Params.Stop keeps the next batch from starting.)
func (s *Scheduler) hooks(stop context.Context) run.Hooks {
	h := s.p.Hooks
	before := h.BeforeModel
	h.BeforeModel = func(ctx context.Context, model string) error {
		if stop.Err() != nil {
			return errStopping
		}
		if before != nil {
			return before(ctx, model)
		}
		return nil
	}
	return h
}

// account adds a run's per-model results to er.
func (s *Scheduler) account(er *EnvResult, rr *run.Result, units map[string]interval.Unit) {
	er.Generation = rr.Generation
	for _, m := range rr.Models {
		er.Models = append(er.Models, m)
		if m.Batches > 0 {
			er.Ran++
		}
		n := m.Recorded.Buckets(units[m.Model])
		er.Intervals += n
		s.metrics.intervals.WithLabelValues(er.Env).Add(float64(n))
		if m.DeferredBy != "" {
			er.Deferred = append(er.Deferred, m.Model)
			s.metrics.deferred.WithLabelValues(er.Env, "leased").Inc()
		}
	}
}

// record logs one line for the environment's tick and sets its lag gauge.
func (s *Scheduler) record(er EnvResult) {
	if er.Absent {
		s.emit(EnvironmentAbsent{Environment: er.Env})
		return
	}
	if er.Err == nil {
		s.metrics.lag.WithLabelValues(er.Env).Set(er.Lag.Seconds())
	}
	s.emit(Ticked{Result: er})
}

// check is the nothing-due check of one environment, from state alone.
type check struct {
	absent     bool
	generation int64
	// due names the models with due work (missing intervals), in the
	// environment's order; runnable says whether a run would compute
	// anything now: some model has work its parents already cover (or is
	// built whole). A model whose work waits for parents that have nothing
	// to do makes no run: nothing would change.
	due      []string
	runnable bool
	lag      time.Duration
	units    map[string]interval.Unit
	// known are the served snapshots, by key, for the run.
	known map[state.SnapshotKey]*snapshot.Snapshot
}

// check reads env and every served version's intervals in one call, and
// evaluates each model with run.DueWork. The environment's snapshots come
// from its view (see view).
func (s *Scheduler) check(ctx context.Context, name string, exec time.Time) (check, error) {
	env, err := s.p.Store.GetEnvironment(ctx, name)
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		return check{}, fmt.Errorf("reading environment %s: %w", name, err)
	}
	if err != nil || env.Invalidated {
		if _, ok := s.views[name]; ok {
			delete(s.views, name)
			s.evict()
		}
		return check{absent: true}, nil
	}
	v, err := s.view(ctx, env)
	if err != nil {
		return check{}, err
	}
	covered, err := s.p.Store.GetIntervals(ctx, v.versions)
	if err != nil {
		return check{}, fmt.Errorf("reading the intervals of environment %s: %w", name, err)
	}
	c := check{generation: env.Generation, units: v.units, known: v.known}
	for _, m := range v.models {
		// A model is due when it has gaps (cadence.Gaps, what status
		// lists), and the environment's lag is its oldest gap's.
		gaps := m.spec.Gaps(covered[state.VersionKey{Name: m.snap.Name, Version: m.snap.Version}], exec)
		if gaps.Empty() {
			continue
		}
		c.due = append(c.due, m.snap.Name)
		if !run.DueWork(m.snap, m.spec, v.set, covered, exec).Work.IsEmpty() {
			c.runnable = true
		}
		c.lag = max(c.lag, gaps.Lag(exec))
	}
	return c, nil
}

// view is what the scheduler derives from the snapshots an environment
// serves, kept while the environment serves exactly the same ones (the
// served list is compared, not trusted by generation), so that a tick with
// nothing due builds nothing per model.
type view struct {
	refs []state.SnapshotRef
	set  map[string]*snapshot.Snapshot
	// models are the scheduled models (not EXTERNAL, with a valid
	// schedule), in the environment's order; versions their interval
	// records.
	models   []*entry
	versions []state.VersionKey
	units    map[string]interval.Unit
	known    map[state.SnapshotKey]*snapshot.Snapshot
}

// view returns env's view, building it if env serves other snapshots than
// last time: only the snapshots not cached yet are read (in one call), and
// the cache then forgets the snapshots no view serves any more.
func (s *Scheduler) view(ctx context.Context, env *state.Environment) (*view, error) {
	if v, ok := s.views[env.Name]; ok && slices.Equal(v.refs, env.Snapshots) {
		return v, nil
	}
	var missing []state.SnapshotKey
	for _, r := range env.Snapshots {
		if _, ok := s.cache[r.Key()]; !ok {
			missing = append(missing, r.Key())
		}
	}
	if len(missing) > 0 {
		got, err := s.p.Store.GetSnapshots(ctx, missing)
		if err != nil {
			return nil, fmt.Errorf("reading the snapshots of environment %s: %w", env.Name, err)
		}
		for k, snap := range got {
			e := &entry{snap: snap}
			if snap.Model.Kind != model.KindExternal {
				e.spec, e.specErr = cadence.ForModel(snap.Model)
			}
			s.cache[k] = e
		}
	}
	n := len(env.Snapshots)
	v := &view{
		refs: slices.Clone(env.Snapshots), set: make(map[string]*snapshot.Snapshot, n),
		units: make(map[string]interval.Unit, n), known: make(map[state.SnapshotKey]*snapshot.Snapshot, n),
	}
	for _, r := range env.Snapshots {
		e, ok := s.cache[r.Key()]
		if !ok {
			return nil, fmt.Errorf("snapshot %s@%s of environment %s: %w", r.Name, r.Fingerprint, env.Name, state.ErrNotFound)
		}
		v.set[r.Name], v.known[r.Key()] = e.snap, e.snap
		switch {
		case e.snap.Model.Source:
			// Its readers are due only where it has published coverage.
			v.versions = append(v.versions, state.SourceKey(r.Name))
		case e.snap.Model.Kind == model.KindExternal:
		case e.specErr != nil:
			s.emit(ModelUnscheduled{Environment: env.Name, Model: r.Name, Err: e.specErr})
		default:
			v.models = append(v.models, e)
			v.versions = append(v.versions, r.VersionKey())
			v.units[r.Name] = e.spec.Unit
		}
	}
	s.views[env.Name] = v
	s.evict()
	return v, nil
}

// evict forgets the cached snapshots that no view serves.
func (s *Scheduler) evict() {
	live := map[state.SnapshotKey]bool{}
	for _, v := range s.views {
		for _, r := range v.refs {
			live[r.Key()] = true
		}
	}
	for k := range s.cache {
		if !live[k] {
			delete(s.cache, k)
		}
	}
}

// Run ticks at once, then on the clock every Tick (plus jitter), until ctx
// ends; it then returns nil after the tick in progress has stopped cleanly
// (see Tick). A tick's errors are logged and counted, never fatal: the next
// tick tries again.
func (s *Scheduler) Run(ctx context.Context) error {
	s.emit(Started{Environments: s.p.Envs, Tick: s.p.Tick, Jitter: s.p.Jitter, Owner: s.p.Lease.Owner,
		Host: s.p.Lease.Holder.Host, PID: s.p.Lease.Holder.PID})
	// Errors are logged per environment by the tick itself.
	_, _ = s.Tick(ctx)
	// The ticker starts after the first tick, so that a test's fake clock
	// sees it (BlockUntil) only once that tick is done.
	ticker := s.clock.NewTicker(s.p.Tick)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			s.emit(Stopped{})
			return nil
		case <-ticker.Chan():
		}
		if s.p.Jitter > 0 {
			select {
			case <-ctx.Done():
				s.emit(Stopped{})
				return nil
			case <-s.clock.After(jitter(s.p.Jitter)):
			}
		}
		_, _ = s.Tick(ctx)
	}
}

// EnvNames returns the environments the scheduler keeps fresh.
func (s *Scheduler) EnvNames() []string { return slices.Clone(s.p.Envs) }

// jitter is a random duration in [0, max).
func jitter(max time.Duration) time.Duration { return rand.N(max) }
