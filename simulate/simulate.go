// Package simulate is the policy simulator: it runs one randomized
// scenario of deploys racing a scheduler under each promotion policy and
// measures what each policy costs.
//
// It is a discrete-event simulation on an injected clock (a clockwork fake
// clock: no wall-clock sleep) with the real components: the project loader,
// the planner (plan.Build, plan.Rebuild), apply.Apply with its policies,
// the scheduler's unit of work (run.Once, taking version leases as the
// daemon does) and a real SQLite state store, over an in-memory DuckDB
// warehouse holding tiny tables. Only time is simulated.
//
// # The scenario
//
// Every model is an incremental model on Params.Unit's cron; prod is first
// applied at Params.Start (T0) with Params.History of data. Then, in time
// order:
//   - the scheduler ticks at T0 + k*Cadence + jitter (k >= 1), calling
//     run.Once for prod with version leases (owner "scheduler");
//   - deploys start at random times. A deploy edits one random model (a
//     breaking change: a new constant), builds its plan at its start S, and
//     applies it under the policy simulated. Its planned backfill takes D
//     simulated time: the apply's AfterBackfill hook runs every tick in
//     [S, S+D) before the promote stage starts, and the promotion happens
//     at S+D. That is seed 000's race.
//   - Catch-up rounds and replans compute more than the plan; that work
//     takes simulated time at the deploy's own rate, D / (intervals of
//     its plan) per interval, and the ticks falling in it run as it
//     commits (a catch-up or replan can lose the race again).
//   - Under lock, once the deploy holds its leases (Hooks.Locked), the
//     ticks in the next LockHold run, deferring the leased models; the
//     final catch-up and the promotion then happen at the end of the hold.
//   - A deploy never starts before the previous one returned; a failed
//     deploy's edit is reverted (its change is dropped, not retried).
//
// The simulation ends two cadences (plus jitter) after the later of the
// scenario's planned end and the last deploy's end. The deploys (start,
// duration, model) and the ticks' jitter come from Params.Seed alone, in
// two independent random streams, so every policy faces the same scenario.
//
// # The measures (PolicyResult)
//
//   - Success rate: promoted deploys / deploys.
//   - Freshness debt: every debt the promotions accepted (state.ListDebts,
//     a carried debt counted once, with its original), its size as the
//     length of its range in intervals and minutes, and its repair latency:
//     repaired_at - accepted_at, following a carried debt to the repair of
//     the debt it was carried to. Debts still open at the end are counted,
//     not averaged.
//   - Extra compute: the intervals (buckets of the models' unit) a deploy
//     computed beyond its plan's backfill: the catch-up rounds (catch-up,
//     and the lock policy's final catch-up) and the backfills of every
//     replanned plan after the first. It counts every batch committed by
//     the apply after its backfill stage, whether or not it then promoted.
//   - Wasted compute: every interval computed by deploys that did not
//     promote (plan and extra).
//   - Deferred work: each (model, interval) that a tick found due but did
//     not compute because another owner (a deploy under lock) held the
//     version's lease, or, in a tick that deferred something, because a
//     parent did not cover it yet (it waits behind a deferred parent). Its
//     delay is the time from the first tick that
//     deferred it to the scheduler run that computed it, on any version of
//     the model; deferred time is the sum of the delays.
//   - Scheduler runs and the intervals they computed, the intervals deploys
//     computed, and their total.
package simulate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/lease"
	"github.com/gapless-dev/gapless/plan"
	gproject "github.com/gapless-dev/gapless/project"
	"github.com/gapless-dev/gapless/promotion"
	"github.com/gapless-dev/gapless/run"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/sqlparse"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/sqlite"
	"github.com/gapless-dev/gapless/warehouse/duckdb"
)

// leaseTTL is the simulated leases' lifetime: longer than any simulation,
// so that no renewal fires and no lease expires while the fake clock
// jumps (a deploy or tick never holds a lease across a jump it does not
// make itself).
const leaseTTL = 10 * 365 * 24 * time.Hour

// schedulerOwner is the scheduler's lease owner.
const schedulerOwner = "scheduler"

// Run simulates p (defaults filled, see Params.WithDefaults) under each of
// p.Policies in turn, each on a fresh warehouse and state store, and
// reports what each did.
func Run(ctx context.Context, p Params) (*Report, error) {
	p = p.WithDefaults()
	if err := p.Validate(); err != nil {
		return nil, err
	}
	nodes, err := parseDAG(p.DAG)
	if err != nil {
		return nil, err
	}
	log := p.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	parser, err := sqlparse.Open()
	if err != nil {
		return nil, fmt.Errorf("opening the SQL parser: %w", err)
	}
	defer parser.Close()
	sc := newScenario(p, len(nodes))
	rep := &Report{Params: paramsReport(p, len(nodes)), Policies: make([]PolicyResult, len(p.Policies))}
	// Policies run side by side, each on its own warehouse, state store and
	// clock: nothing is shared but the (concurrency-safe) parser, so the
	// results do not depend on the interleaving.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sem := make(chan struct{}, p.Parallel)
	errs := make([]error, len(p.Policies))
	var wg sync.WaitGroup
	for i, name := range p.Policies {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				errs[i] = context.Cause(ctx)
				return
			}
			defer func() { <-sem }()
			pol := p.policyOf(name)
			log.DebugContext(ctx, "simulating", slog.String(logkey.Policy, pol.String()), slog.Int(logkey.Deploys, p.Deploys))
			res, err := runPolicy(ctx, p, sc, nodes, parser, pol)
			if err != nil {
				errs[i] = fmt.Errorf("simulating %s: %w", pol, err)
				cancel(errs[i])
				return
			}
			log.DebugContext(ctx, "simulated", slog.String(logkey.Policy, pol.String()), slog.Int(logkey.Promoted, res.Promoted),
				slog.Int(logkey.Debts, res.Debt.Count))
			rep.Policies[i] = *res
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return nil, err
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return rep, nil
}

// runner is one policy's simulation.
type runner struct {
	prm    Params
	sc     scenario
	pol    promotion.Policy
	pr     *project
	parser *sqlparse.Parser
	engine *duckdb.Engine
	store  *sqlite.Store
	clk    *clockwork.FakeClock
	ticks  *tickStream
	quiet  *slog.Logger
	res    *PolicyResult
	// deferred maps a model to the intervals (bucket starts) a tick
	// deferred and not yet computed, with the first deferral's time.
	deferred map[string]map[time.Time]time.Time
	delays   []time.Duration
}

func runPolicy(ctx context.Context, p Params, sc scenario, nodes []node, parser *sqlparse.Parser, pol promotion.Policy) (_ *PolicyResult, err error) {
	dir, err := os.MkdirTemp("", "gapless-simulate-")
	if err != nil {
		return nil, fmt.Errorf("creating a temporary folder: %w", err)
	}
	defer func() {
		if rerr := os.RemoveAll(dir); rerr != nil && err == nil {
			err = fmt.Errorf("removing %s: %w", dir, rerr)
		}
	}()
	engine, err := duckdb.Open(ctx, "", duckdb.Options{})
	if err != nil {
		return nil, fmt.Errorf("opening an in-memory DuckDB: %w", err)
	}
	defer func() { err = errors.Join(err, engine.Close()) }()
	store, err := sqlite.Open(ctx, filepath.Join(dir, "state", "state.db"))
	if err != nil {
		return nil, fmt.Errorf("opening the state store: %w", err)
	}
	defer func() { err = errors.Join(err, store.Close()) }()

	r := &runner{prm: p, sc: sc, pol: pol, pr: newProject(filepath.Join(dir, "project"), p, nodes), parser: parser,
		engine: engine, store: store, clk: clockwork.NewFakeClockAt(p.Start), ticks: newTicks(p),
		quiet: slog.New(slog.DiscardHandler), deferred: map[string]map[time.Time]time.Time{},
		res: &PolicyResult{Policy: pol.String(), Deploys: p.Deploys, Failures: map[string]int{}, DeployOutcomes: []DeployOutcome{}}}
	if err := r.run(ctx); err != nil {
		return nil, err
	}
	return r.res, nil
}

func (r *runner) run(ctx context.Context) error {
	if err := r.pr.write(); err != nil {
		return err
	}
	if err := r.initial(ctx); err != nil {
		return err
	}
	for i, d := range r.sc.deploys {
		out, err := r.deploy(ctx, i, d)
		if err != nil {
			return err
		}
		r.record(out)
	}
	end := r.sc.end
	if last := r.clk.Now().Add(2*r.prm.Cadence + r.prm.Jitter); last.After(end) {
		end = last
	}
	if _, err := r.ticksBefore(ctx, end); err != nil {
		return err
	}
	r.setClock(end)
	return r.finish(ctx)
}

// initial applies the project to prod at T0.
func (r *runner) initial(ctx context.Context) error {
	p, err := r.plan(ctx, "p0", r.prm.Start)
	if err != nil {
		return err
	}
	if _, err := apply.Apply(ctx, r.applyParams(p, apply.Hooks{}, nil)); err != nil {
		return fmt.Errorf("applying the initial plan: %w", err)
	}
	return nil
}

// plan loads the project and builds a plan for prod at exec, under the
// policy simulated.
func (r *runner) plan(ctx context.Context, id string, exec time.Time) (*plan.Plan, error) {
	proj, _, err := gproject.Load(ctx, r.pr.dir, r.parser)
	if err != nil {
		return nil, fmt.Errorf("loading the simulated project: %w", err)
	}
	p, err := plan.Assemble(ctx, plan.AssembleParams{
		Store: r.store, Environment: plan.Prod, Snapshots: proj.Snapshots, Graph: proj.Graph,
		Additive: gproject.Additive(ctx, r.parser), IDs: plan.Fixed(id), ExecutionTime: exec, Now: exec,
		Options: plan.Options{Policy: r.pol},
	})
	if err != nil {
		return nil, fmt.Errorf("planning %s: %w", id, err)
	}
	return p, nil
}

func (r *runner) applyParams(p *plan.Plan, hooks apply.Hooks, onEvent func(apply.Event)) apply.Params {
	return apply.Params{
		Plan: p, Store: r.store, Engine: r.engine, Parser: r.parser, ProjectDir: r.pr.dir,
		// One worker: batches commit, and ticks run between them, in one
		// deterministic order.
		Workers: 1, Clock: r.clk, Logger: r.quiet, OnEvent: onEvent, Hooks: hooks,
		// Replans of p are p.ID-r1, p.ID-r2, ...
		Replan: plan.Replanner(plan.ReplannerParams{Store: r.store, IDs: plan.Numbered(p.ID + "-r"),
			Additive: func(ctx context.Context) snapshot.Additive { return gproject.Additive(ctx, r.parser) }}),
		// Wait -1: never wait for another owner (nothing else runs while a
		// deploy does; waiting on a fake clock would never end).
		Lease: lease.Options{Clock: r.clk, TTL: leaseTTL, Wait: -1, Logger: r.quiet},
	}
}

// setClock moves the clock forward to t (never back).
func (r *runner) setClock(t time.Time) {
	if d := t.Sub(r.clk.Now()); d > 0 {
		r.clk.Advance(d)
	}
}

// ticksBefore runs every scheduler tick before end, in order, each at its
// own time, and returns how many ran.
func (r *runner) ticksBefore(ctx context.Context, end time.Time) (int, error) {
	n := 0
	for r.ticks.at.Before(end) {
		at := r.ticks.at
		r.setClock(at)
		if err := r.tick(ctx, at); err != nil {
			return n, err
		}
		r.ticks.next()
		n++
	}
	return n, nil
}

// tick is one scheduler run for prod at exec, with version leases.
func (r *runner) tick(ctx context.Context, exec time.Time) error {
	res, err := run.Once(ctx, run.Params{Env: plan.Prod, ExecutionTime: exec, Store: r.store, Engine: r.engine,
		Parser: r.parser, ProjectDir: r.pr.dir, Clock: r.clk, Logger: r.quiet,
		Leases: &lease.Options{Owner: schedulerOwner, Clock: r.clk, TTL: leaseTTL, Logger: r.quiet}})
	if err != nil {
		return fmt.Errorf("scheduler run at %s: %w", exec.Format(time.RFC3339), err)
	}
	r.res.SchedulerRuns++
	now := r.clk.Now()
	leased := slices.ContainsFunc(res.Models, func(m run.ModelResult) bool { return m.DeferredBy != "" })
	for _, m := range res.Models {
		r.res.SchedulerIntervals += m.Recorded.Buckets(r.pr.unit)
		pending := r.deferred[m.Model]
		for b := range r.buckets(m.Recorded) {
			if at, ok := pending[b]; ok {
				r.delays = append(r.delays, now.Sub(at))
				delete(pending, b)
			}
		}
		// What a lease held back: the leased model's due work, and the
		// work waiting behind it (a child waits for its deferred parent).
		held := m.Deferred
		if leased {
			held = held.Union(m.Waiting)
		}
		if held.IsEmpty() {
			continue
		}
		if pending == nil {
			pending = map[time.Time]time.Time{}
			r.deferred[m.Model] = pending
		}
		for b := range r.buckets(held) {
			r.res.Deferred.Ticks++
			if _, ok := pending[b]; !ok {
				pending[b] = now
				r.res.Deferred.Intervals++
			}
		}
	}
	return nil
}

// buckets yields the start of every bucket of the unit in s.
func (r *runner) buckets(s interval.Set) func(func(time.Time) bool) {
	u := r.pr.unit
	return func(yield func(time.Time) bool) {
		for rg := range s.All() {
			for t := u.Floor(rg.Start); t.Before(rg.End); t = u.Add(t, 1) {
				if !yield(t) {
					return
				}
			}
		}
	}
}

// deploy runs deploy i (see the package documentation).
func (r *runner) deploy(ctx context.Context, i int, d deploySpec) (DeployOutcome, error) {
	start := d.Start
	if now := r.clk.Now(); now.After(start) {
		start = now // the previous deploy ran late
	}
	if _, err := r.ticksBefore(ctx, start); err != nil {
		return DeployOutcome{}, err
	}
	r.setClock(start)
	id := fmt.Sprintf("d%02d", i+1)
	out := DeployOutcome{PlanID: id, Model: r.pr.nodes[d.Model].name, Start: start,
		BackfillMinutes: round3(d.Backfill.Minutes())}
	prev := r.pr.consts[d.Model]
	if err := r.pr.set(d.Model, d.Constant); err != nil {
		return out, err
	}
	p, err := r.plan(ctx, id, start)
	if err != nil {
		return out, err
	}
	planned := 0
	for _, b := range p.Backfills {
		planned += b.Buckets
	}
	var perInterval time.Duration
	if planned > 0 {
		perInterval = d.Backfill / time.Duration(planned)
	}
	backfillEnd := start.Add(d.Backfill)
	timedExtra := r.pol.Name == promotion.CatchUp || r.pol.Name == promotion.Replan

	// The hooks and events run on the apply's goroutines, one at a time
	// (one worker), while Apply is blocked on them: no lock is needed.
	afterBackfill := false
	var hookErr error
	hooks := apply.Hooks{
		AfterBackfill: func(ctx context.Context) error {
			if afterBackfill {
				return nil // a replanned plan's backfill: timed by its batches
			}
			afterBackfill = true
			n, err := r.ticksBefore(ctx, backfillEnd)
			out.TicksDuringBackfill = n
			r.setClock(backfillEnd)
			return err
		},
		Locked: func(ctx context.Context) error {
			end := r.clk.Now().Add(r.prm.LockHold)
			n, err := r.ticksBefore(ctx, end)
			out.TicksDuringLock += n
			r.setClock(end)
			return err
		},
	}
	onEvent := func(e apply.Event) {
		switch e := e.(type) {
		case apply.PromotionAccepted, apply.PromotionRejected:
			out.Attempts++
		case apply.BatchCommitted:
			n := interval.NewSet(e.Batch.Interval).Buckets(r.pr.unit)
			if !afterBackfill {
				out.PlanIntervals += n
				return
			}
			out.ExtraIntervals += n
			if !timedExtra || hookErr != nil {
				return
			}
			end := r.clk.Now().Add(time.Duration(n) * perInterval)
			k, err := r.ticksBefore(ctx, end)
			out.TicksDuringExtra += k
			r.setClock(end)
			hookErr = err
		}
	}
	res, err := apply.Apply(ctx, r.applyParams(p, hooks, onEvent))
	out.End = r.clk.Now()
	if hookErr != nil {
		return out, hookErr
	}
	if err == nil {
		out.Promoted = true
		out.Debts = len(res.Debts)
		return out, nil
	}
	var perr *promotion.Error
	if !errors.As(err, &perr) || len(perr.Verdicts) == 0 {
		return out, fmt.Errorf("deploy %s: %w", id, err)
	}
	out.Reason = string(perr.Verdicts[0].Reason)
	return out, r.pr.set(d.Model, prev)
}

// record adds a deploy's outcome to the policy's result.
func (r *runner) record(out DeployOutcome) {
	res := r.res
	res.DeployOutcomes = append(res.DeployOutcomes, out)
	res.ExtraComputeIntervals += out.ExtraIntervals
	res.DeployIntervals += out.PlanIntervals + out.ExtraIntervals
	if out.Promoted {
		res.Promoted++
	} else {
		res.Failures[out.Reason]++
		res.WastedIntervals += out.PlanIntervals + out.ExtraIntervals
	}
}

// finish computes the debt and deferral measures at the end.
func (r *runner) finish(ctx context.Context) error {
	res := r.res
	res.SuccessRate = round3(float64(res.Promoted) / float64(res.Deploys))
	res.TotalIntervals = res.SchedulerIntervals + res.DeployIntervals
	debts, err := r.store.ListDebts(ctx, state.DebtFilter{Environment: plan.Prod})
	if err != nil {
		return fmt.Errorf("reading the freshness debt: %w", err)
	}
	res.Debt = debtStats(debts, r.pr.unit)

	var total, longest time.Duration
	for _, d := range r.delays {
		total += d
		longest = max(longest, d)
	}
	res.Deferred.TotalMinutes = round3(total.Minutes())
	res.Deferred.MaxMinutes = round3(longest.Minutes())
	if len(r.delays) > 0 {
		res.Deferred.MeanMinutes = round3(total.Minutes() / float64(len(r.delays)))
	}
	for _, pending := range r.deferred {
		res.Deferred.Unresolved += len(pending)
	}
	return nil
}

// debtStats measures debts (in ID order). A carried debt is not counted on
// its own: its repair is its original's repair.
func debtStats(debts []state.Debt, u interval.Unit) DebtStats {
	carried := map[int64][]state.Debt{}
	for _, d := range debts {
		if d.CarriedFrom != 0 {
			carried[d.CarriedFrom] = append(carried[d.CarriedFrom], d)
		}
	}
	// repairedAt is when d's gap stopped being served: its own repair, or
	// the last repair of the debts it was carried to (zero while any is
	// open). A debt superseded without a carry is closed then.
	var repairedAt func(d state.Debt) time.Time
	repairedAt = func(d state.Debt) time.Time {
		switch {
		case !d.RepairedAt.IsZero():
			return d.RepairedAt
		case d.SupersededAt.IsZero():
			return time.Time{}
		case len(carried[d.ID]) == 0:
			return d.SupersededAt
		}
		var last time.Time
		for _, c := range carried[d.ID] {
			t := repairedAt(c)
			if t.IsZero() {
				return time.Time{}
			}
			if t.After(last) {
				last = t
			}
		}
		return last
	}
	out := DebtStats{Debts: []DebtRecord{}}
	var sumIntervals int
	var sumMinutes, sumLatency, maxLatency float64
	repaired := 0
	for _, d := range debts {
		if d.CarriedFrom != 0 {
			continue
		}
		n := interval.NewSet(d.Range).Buckets(u)
		mins := d.Range.Duration().Minutes()
		rec := DebtRecord{Model: d.Model, PlanID: d.PlanID, Start: d.Range.Start.UTC(), End: d.Range.End.UTC(),
			Intervals: n, Advances: d.Advances, Bound: d.Bound, AcceptedAt: d.AcceptedAt.UTC()}
		out.Count++
		sumIntervals += n
		sumMinutes += mins
		out.MaxIntervals = max(out.MaxIntervals, n)
		out.MaxMinutes = max(out.MaxMinutes, mins)
		out.MaxAdvances = max(out.MaxAdvances, d.Advances)
		if t := repairedAt(d); t.IsZero() {
			out.OpenAtEnd++
		} else {
			rec.RepairedAt = t.UTC()
			lat := t.Sub(d.AcceptedAt).Minutes()
			sumLatency += lat
			maxLatency = max(maxLatency, lat)
			repaired++
		}
		out.Debts = append(out.Debts, rec)
	}
	if out.Count > 0 {
		out.MeanIntervals = round3(float64(sumIntervals) / float64(out.Count))
		out.MeanMinutes = round3(sumMinutes / float64(out.Count))
		out.MaxMinutes = round3(out.MaxMinutes)
	}
	if repaired > 0 {
		out.RepairLatencyMeanMinutes = round3(sumLatency / float64(repaired))
		out.RepairLatencyMaxMinutes = round3(maxLatency)
	}
	return out
}
