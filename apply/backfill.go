package apply

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/state"
)

// backfill computes the plan's work in DAG order on a bounded worker pool.
//
// Invariants:
//   - a model starts only once every ancestor with work in this plan has
//     finished (transitively: an unchanged model in between does not hide
//     a changed grandparent);
//   - each model's intervals are re-read right before it starts, and only
//     the part of the plan's ranges not yet covered is computed;
//   - the first failure is the error returned and stops the rest: no model
//     starts after it and no further batch of a running model starts, while
//     a batch already in flight finishes and is recorded (it is not
//     interrupted, so every batch is committed and recorded or not started);
//     models downstream of the failure never start. Cancelling ctx still
//     interrupts in-flight batches, which then roll back unrecorded;
//   - a version the plan reuses instead of backfilling must still be built
//     (checkReuses), or nothing is computed and the apply fails.
func (a *applier) backfill(ctx context.Context, res *Result) error {
	if err := a.checkReuses(ctx); err != nil {
		return err
	}
	if err := a.clearRestated(ctx); err != nil {
		return err
	}
	models, err := a.runWork(ctx, a.Plan.Backfills, a.Plan.ExecutionTime, true)
	res.Models = append(res.Models, models...)
	return err
}

// runWork computes work in DAG order on the bounded worker pool (see
// backfill for the invariants), with macros at exec. With skipCovered each
// model computes only what state does not cover yet; without it every
// range is recomputed (each interval's rows replaced, never duplicated).
func (a *applier) runWork(ctx context.Context, backfills []plan.Backfill, exec time.Time, skipCovered bool) ([]ModelResult, error) {
	work := map[string]plan.Backfill{}
	for _, b := range backfills {
		work[b.Name] = b
	}
	deps := a.workAncestors(work)
	served, err := a.servedVersions(ctx)
	if err != nil {
		return nil, err
	}

	// stop keeps work from starting after the first failure. It is not a
	// cancellation of ctx: interrupting another model's in-flight statement
	// would roll back work that is about to commit, and an interrupted
	// DuckDB statement can keep its database instance alive after Close, so
	// that reopening the file in the same process spins forever
	// (duckdb/duckdb#25965).
	stop := make(chan struct{})
	var stopOnce sync.Once
	done := map[string]chan struct{}{}
	for name := range work {
		done[name] = make(chan struct{})
	}
	var (
		mu       sync.Mutex
		firstErr error
		results  = map[string]ModelResult{}
		wg       sync.WaitGroup
		sem      = make(chan struct{}, a.Workers)
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
		stopOnce.Do(func() { close(stop) })
	}
	for _, s := range a.Plan.Snapshots {
		b, ok := work[s.Name]
		if !ok {
			continue
		}
		wg.Go(func() {
			defer close(done[s.Name])
			for _, d := range deps[s.Name] {
				select {
				case <-done[d]:
				case <-stop:
					return
				case <-ctx.Done():
					return
				}
			}
			select {
			case sem <- struct{}{}:
			case <-stop:
				return
			case <-ctx.Done():
				return
			}
			defer func() { <-sem }()
			select {
			case <-stop:
				return
			default:
			}
			if ctx.Err() != nil {
				return
			}
			r, err := a.backfillModel(ctx, b, exec, skipCovered, served[state.VersionKey{Name: b.Name, Version: b.Version}], stop)
			if err != nil {
				fail(err)
				a.emit(ctx, ModelFailed{Model: b.Name, Version: b.Version, Err: err})
				return
			}
			mu.Lock()
			results[s.Name] = r
			mu.Unlock()
		})
	}
	wg.Wait()
	var out []ModelResult
	for _, s := range a.Plan.Snapshots {
		if r, ok := results[s.Name]; ok {
			out = append(out, r)
		}
	}
	if firstErr != nil {
		return out, firstErr
	}
	return out, ctx.Err()
}

// backfillModel runs one model's share of the plan.
//
// A version some environment serves computes its batches in order (see
// execute.Work.InOrder); others may run them concurrently.
func (a *applier) backfillModel(ctx context.Context, b plan.Backfill, exec time.Time, skipCovered, served bool, stop <-chan struct{}) (ModelResult, error) {
	if a.Hooks.BeforeModel != nil {
		if err := a.Hooks.BeforeModel(ctx, b.Name); err != nil {
			return ModelResult{}, fmt.Errorf("before-model hook for %s: %w", b.Name, err)
		}
	}
	if _, ok := a.snaps[b.Name]; !ok {
		return ModelResult{}, fmt.Errorf("plan %s backfills %s, which is not among its snapshots", a.Plan.ID, b.Name)
	}
	t, err := a.template(ctx, b.Name)
	if err != nil {
		return ModelResult{}, err
	}
	if t.Snapshot.Version != b.Version {
		return ModelResult{}, fmt.Errorf("plan %s backfills %s at version %s, but its snapshot has version %s", a.Plan.ID, b.Name, b.Version, t.Snapshot.Version)
	}
	a.emit(ctx, ModelStarted{Model: b.Name, Version: b.Version, Ranges: b.Ranges, Whole: b.Whole})
	r, err := a.x.Execute(ctx, execute.Work{Template: t, Ranges: b.Ranges, Whole: b.Whole,
		Execution: exec, SkipCovered: skipCovered, InOrder: served, Stop: stop})
	if err != nil {
		return ModelResult{}, err
	}
	mr := ModelResult{Model: b.Name, Version: b.Version, Batches: r.Batches, Rows: r.Rows, Recorded: r.Recorded, Skipped: r.Skipped}
	a.emit(ctx, ModelFinished{Model: b.Name, Version: b.Version, Batches: r.Batches, Rows: r.Rows, Skipped: r.Skipped})
	return mr, nil
}

// servedVersions is every model version some environment serves now,
// invalidated ones included (their views stand until the janitor runs).
func (a *applier) servedVersions(ctx context.Context) (map[state.VersionKey]bool, error) {
	envs, err := a.Store.ListEnvironments(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading which versions environments serve: %w", err)
	}
	out := map[state.VersionKey]bool{}
	for _, e := range envs {
		for _, r := range e.Snapshots {
			out[state.VersionKey{Name: r.Name, Version: r.Version}] = true
		}
	}
	return out, nil
}

// workAncestors maps each model with work to every ancestor with work.
func (a *applier) workAncestors(work map[string]plan.Backfill) map[string][]string {
	parents := map[string][]string{}
	for _, s := range a.Plan.Snapshots {
		parents[s.Name] = s.Parents
	}
	out := map[string][]string{}
	for name := range work {
		seen := map[string]bool{}
		stack := slices.Clone(parents[name])
		for len(stack) > 0 {
			p := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if seen[p] {
				continue
			}
			seen[p] = true
			if _, ok := work[p]; ok {
				out[name] = append(out[name], p)
			}
			stack = append(stack, parents[p]...)
		}
		slices.Sort(out[name])
	}
	return out
}

// restated is every model whose backfill recomputes covered intervals: the
// plan's restated models and everything downstream of them.
func (a *applier) restated() map[string]bool {
	out := map[string]bool{}
	for _, n := range a.Plan.Options.Restate {
		out[n] = true
	}
	if len(out) == 0 {
		return out
	}
	// Snapshots are in topological order: one pass propagates downstream.
	for _, s := range a.Plan.Snapshots {
		for _, p := range s.Parents {
			if out[p] {
				out[s.Name] = true
			}
		}
	}
	return out
}

// clearRestated removes, once per plan, the intervals a restatement
// recomputes, so that the backfill (which skips covered intervals) computes
// them again. The application history marks it done: a resumed apply does
// not clear again, so batches restated before an interruption are not
// redone. Until a restated interval is recomputed, state shows it missing
// while the old rows still serve: honest, and a scheduler run may fill it
// (InsertInterval replaces exactly its rows either way).
func (a *applier) clearRestated(ctx context.Context) error {
	restated := a.restated()
	if len(restated) == 0 {
		return nil
	}
	apps, err := a.Store.ListApplications(ctx, a.Plan.ID)
	if err != nil {
		return fmt.Errorf("reading the application history: %w", err)
	}
	for _, app := range apps {
		if app.Stage == string(StageBackfill) && app.Status == StatusRestateCleared {
			return nil
		}
	}
	for _, b := range a.Plan.Backfills {
		if !restated[b.Name] {
			continue
		}
		ranges := b.Ranges
		if b.Whole {
			s := a.snaps[b.Name]
			if s == nil {
				continue
			}
			if r, ok := execute.WholeRange(s.Model, a.Plan.ExecutionTime); ok {
				ranges = interval.NewSet(r)
			}
		}
		if ranges.IsEmpty() {
			continue
		}
		err := a.Store.RemoveIntervals(ctx, state.IntervalsParams{Key: state.VersionKey{Name: b.Name, Version: b.Version}, Ranges: ranges, Now: a.now()})
		if err != nil {
			return fmt.Errorf("clearing restated intervals of %s: %w", b.Name, err)
		}
		a.log.InfoContext(ctx, "restating", slog.String(logkey.Model, b.Name), slog.String(logkey.Version, b.Version), slog.String(logkey.Interval, ranges.String()))
	}
	return a.record(ctx, StageBackfill, StatusRestateCleared, nil)
}
