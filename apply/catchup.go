package apply

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/gapless-dev/gapless/cadence"
	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/state"
)

// CatchUpRound is what one catch-up round computed beyond the plan.
type CatchUpRound struct {
	Round  int           `json:"round"`
	Models []ModelResult `json:"models"`
}

// catchUp is one round of the catch-up policy, run just before a strict
// promotion attempt. It refreshes the incumbents' frontiers from state and
// computes the work the scheduler created after the plan was built:
//   - for every model in scope (see scope), what the replacement misses of
//     [incumbent's frontier at plan time, incumbent's frontier now);
//   - for every incremental downstream candidate that does not reuse the
//     environment's table, its covered intervals overlapping that work
//     (widened to its own unit): they were computed before their parent's
//     new rows existed, and would otherwise stay stale;
//   - for every whole-built downstream candidate (FULL), a rebuild.
//
// A child reusing the environment's table (forward-only) keeps its rows.
// The plan's own ranges are not widened (invariant 5): this work is
// reported separately, in Result.CatchUp, in the application history
// (stage catch_up) and as catch_up events. A round with nothing to do
// computes and records nothing.
func (a *applier) catchUp(ctx context.Context, res *Result, incumbents map[string]*snapshot.Snapshot, round int) error {
	work, err := a.catchUpWork(ctx, incumbents)
	if err != nil {
		return fmt.Errorf("catch-up round %d: %w", round, err)
	}
	if len(work) == 0 {
		return nil
	}
	exec := a.now()
	a.log.InfoContext(ctx, "catching up", slog.Int(logkey.Round, round), slog.Int(logkey.Models, len(work)))
	if err := a.record(ctx, StageCatchUp, StatusStarted, map[string]any{"round": round, "work": work}); err != nil {
		return err
	}
	models, err := a.runWork(ctx, work, exec, false)
	res.CatchUp = append(res.CatchUp, CatchUpRound{Round: round, Models: models})
	if err != nil {
		if rerr := a.record(context.WithoutCancel(ctx), StageCatchUp, StatusFailed, map[string]any{"round": round, "error": err.Error()}); rerr != nil {
			a.log.ErrorContext(ctx, "recording a failed catch-up", slog.Any(logkey.Error, rerr))
		}
		return fmt.Errorf("catch-up round %d: %w", round, err)
	}
	evs := make([]state.Event, 0, len(models))
	for _, m := range models {
		evs = append(evs, state.Event{At: a.now(), Kind: state.EventCatchUp, Environment: a.Plan.Environment, Model: m.Model,
			PlanID: a.Plan.ID, Reason: "catch_up", Data: mustJSON(map[string]any{"round": round, "version": m.Version,
				"recorded": m.Recorded, "rows": m.Rows, "batches": m.Batches})})
	}
	a.appendEvents(ctx, evs)
	return a.record(ctx, StageCatchUp, StatusFinished, map[string]any{"round": round, "models": models})
}

// catchUpWork computes one round's work (see catchUp), in plan order.
func (a *applier) catchUpWork(ctx context.Context, incumbents map[string]*snapshot.Snapshot) ([]plan.Backfill, error) {
	cands := a.scope(incumbents)
	if len(cands) == 0 {
		return nil, nil
	}
	env, err := a.Store.GetEnvironment(ctx, a.Plan.Environment)
	if err != nil {
		return nil, fmt.Errorf("reading environment %s: %w", a.Plan.Environment, err)
	}
	served := map[string]state.SnapshotRef{}
	for _, ref := range env.Snapshots {
		served[ref.Name] = ref
	}
	var keys []state.VersionKey
	for _, s := range a.Plan.Snapshots {
		keys = append(keys, keyOf(s))
	}
	for _, c := range cands {
		keys = append(keys, c.inc.Snapshot.VersionKey())
	}
	covered, err := a.Store.GetIntervals(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("reading intervals: %w", err)
	}

	todo := map[string]interval.Set{}
	for _, c := range cands {
		if served[c.repl.Name] != c.inc.Snapshot {
			continue // another plan won; the promotion will say so
		}
		now := covered[c.inc.Snapshot.VersionKey()].Frontier()
		spec, err := cadence.ForModel(c.repl.Model)
		if err != nil {
			return nil, fmt.Errorf("the schedule of %s: %w", c.repl.Name, err)
		}
		from := spec.Unit.Floor(spec.Start)
		if c.inc.Frontier.After(from) {
			from = c.inc.Frontier
		}
		if tail := covered[keyOf(c.repl)].Missing(interval.NewRange(from, now)); !tail.IsEmpty() {
			todo[c.repl.Name] = tail
		}
	}
	if len(todo) == 0 {
		return nil, nil
	}

	// Propagate downstream in topological order: upstream[m] is every
	// ancestor's caught-up time.
	upstream := map[string]interval.Set{}
	var out []plan.Backfill
	for _, s := range a.Plan.Snapshots {
		var above interval.Set
		for _, p := range s.Parents {
			above = above.Union(upstream[p]).Union(todo[p])
		}
		upstream[s.Name] = above
		own := todo[s.Name]
		reused := served[s.Name].Version == s.Version
		switch {
		case above.IsEmpty() || reused:
		case s.Model.Kind.IsIncremental():
			spec, err := cadence.ForModel(s.Model)
			if err != nil {
				return nil, fmt.Errorf("the schedule of %s: %w", s.Name, err)
			}
			own = own.Union(covered[keyOf(s)].Intersect(widen(above, spec.Unit)))
		case s.Model.Kind == model.KindFull:
			out = append(out, plan.Backfill{Name: s.Name, Version: s.Version, Whole: true})
			todo[s.Name] = above
			continue
		}
		if own.IsEmpty() {
			continue
		}
		todo[s.Name] = own
		b := plan.Backfill{Name: s.Name, Version: s.Version, Ranges: own}
		if spec, err := cadence.ForModel(s.Model); err == nil {
			b.Buckets = own.Buckets(spec.Unit)
		}
		out = append(out, b)
	}
	return out, nil
}

// widen grows every range of s outward to whole buckets of u.
func widen(s interval.Set, u interval.Unit) interval.Set {
	var out interval.Set
	for r := range s.All() {
		out = out.Add(interval.NewRange(u.Floor(r.Start), u.Ceil(r.End)))
	}
	return out
}
