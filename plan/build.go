package plan

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pmezard/go-difflib/difflib"

	"github.com/gapless-dev/gapless/dag"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/schedule"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/state"
)

// Prod is the production environment's name.
const Prod = "prod"

// BuildParams is what a plan is built from.
type BuildParams struct {
	ID          string
	Environment string
	// Current is the environment as read from state now; nil when it does
	// not exist (or is invalidated).
	Current *state.Environment
	// Base is the snapshots the environment serves now, by name. For a new
	// development environment it is what prod serves: the new environment
	// starts as a copy of prod and reuses its tables.
	Base map[string]*snapshot.Snapshot
	// Next is the project's snapshots (fresh versions) and graph.
	Next  map[string]*snapshot.Snapshot
	Graph *dag.Graph
	// Intervals reads covered intervals; the builder asks once, for every
	// version it needs.
	Intervals     state.Reader
	Additive      snapshot.Additive
	ExecutionTime time.Time
	Now           time.Time
	Options       Options
}

// Build categorises the change from Base to Next, assigns versions (reusing
// tables where the category allows), and computes the work: per new version
// (or restated model) the missing intervals up to the bound.
//
// Bounds (invariant 5): every range is inside [model start, due bound at the
// execution time), clipped to Options.Start/End. In prod, a model that
// replaces an incumbent with intervals is further bounded by the
// incumbent's frontier at build time, which is recorded in Incumbents: the
// scheduler keeps the incumbent fresh meanwhile, and promotion checks the
// replacement against the incumbent's frontier as it is then.
func Build(ctx context.Context, p BuildParams) (*Plan, error) {
	changes, err := snapshot.Categorize(p.Base, p.Next, p.Graph, p.Additive, snapshot.Options{ForwardOnly: p.Options.ForwardOnly})
	if err != nil {
		return nil, fmt.Errorf("categorising changes: %w", err)
	}
	snapshot.AssignVersions(changes)

	restate := map[string]bool{}
	for _, name := range p.Options.Restate {
		if _, ok := p.Next[name]; !ok {
			return nil, fmt.Errorf("--restate-model %s: no such model in the project", name)
		}
		restate[name] = true
		// Restating a model restates everything downstream of it: their
		// intervals were computed from the rows being replaced.
		for _, d := range p.Graph.Downstream(name) {
			restate[d] = true
		}
	}

	// One read for every version the plan looks at.
	var keys []state.VersionKey
	for _, c := range changes {
		if c.Next != nil {
			keys = append(keys, state.VersionKey{Name: c.Name, Version: c.Next.Version})
		}
		if c.Previous != nil {
			keys = append(keys, state.VersionKey{Name: c.Name, Version: c.Previous.Version})
		}
	}
	covered, err := p.Intervals.GetIntervals(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("reading intervals: %w", err)
	}

	pl := &Plan{
		ID: p.ID, Environment: p.Environment, ExecutionTime: p.ExecutionTime.UTC(), CreatedAt: p.Now.UTC(),
		Options: p.Options,
	}
	if p.Current != nil {
		pl.Expected = Expected{PlanID: p.Current.PlanID, Generation: p.Current.Generation}
	}
	for _, name := range p.Graph.Order() {
		pl.Snapshots = append(pl.Snapshots, p.Next[name])
	}
	for _, c := range changes {
		if c.Category != snapshot.Unchanged {
			pl.Changes = append(pl.Changes, describeChange(c))
		}
		if c.Next == nil {
			continue
		}
		replaced := c.Previous != nil && c.Previous.Version != c.Next.Version
		var frontier time.Time
		if replaced {
			prevKey := state.VersionKey{Name: c.Name, Version: c.Previous.Version}
			frontier = covered[prevKey].Frontier()
			pl.Incumbents = append(pl.Incumbents, Incumbent{
				Name: c.Name,
				Snapshot: state.SnapshotRef{Name: c.Name, Fingerprint: c.Previous.Fingerprint.String(),
					Version: c.Previous.Version},
				Frontier: frontier,
			})
		}
		isNew := c.Previous == nil || replaced
		if p.Options.SkipBackfill || (!isNew && !restate[c.Name]) {
			continue
		}
		b, ok, err := backfillFor(c.Next, covered[state.VersionKey{Name: c.Name, Version: c.Next.Version}],
			p, replaced, frontier, restate[c.Name])
		if err != nil {
			return nil, err
		}
		if ok {
			pl.Backfills = append(pl.Backfills, b)
		}
	}
	return pl, nil
}

// backfillFor computes one model's work. Kinds without intervals are built
// whole once per new version.
func backfillFor(s *snapshot.Snapshot, covered interval.Set, p BuildParams, replaced bool, frontier time.Time, restated bool) (Backfill, bool, error) {
	m := s.Model
	b := Backfill{Name: s.Name, Version: s.Version}
	switch m.Kind {
	case model.KindExternal:
		return b, false, nil
	case model.KindFull, model.KindSeed, model.KindView:
		b.Whole = true
		return b, true, nil
	}
	spec, err := schedule.ForModel(m)
	if err != nil {
		return b, false, err
	}
	end := spec.Bound(p.ExecutionTime)
	if !p.Options.End.IsZero() && p.Options.End.Before(end) {
		end = p.Options.End.UTC()
		if !m.AllowPartials {
			end = spec.Unit.Floor(end) // only whole intervals, as the schedule's bound
		}
	}
	if p.Environment == Prod && replaced && !frontier.IsZero() && frontier.Before(end) {
		end = frontier
	}
	start := spec.Unit.Floor(m.Start)
	if !p.Options.Start.IsZero() && p.Options.Start.After(start) {
		start = spec.Unit.Floor(p.Options.Start.UTC())
	}
	window := interval.NewRange(start, end)
	if window.Empty() {
		return b, false, nil
	}
	todo := covered.Missing(window)
	if restated {
		todo = interval.NewSet(window)
	}
	if todo.IsEmpty() {
		return b, false, nil
	}
	b.Ranges = todo
	b.Buckets = todo.Buckets(spec.Unit)
	b.End = end
	return b, true, nil
}

func describeChange(c snapshot.Change) Change {
	out := Change{Name: c.Name, Category: c.Category, ForwardOnly: c.ForwardOnly, MetadataChanged: c.MetadataChanged}
	if c.Previous != nil {
		out.PreviousFingerprint = c.Previous.Fingerprint.String()
		out.PreviousVersion = c.Previous.Version
	}
	if c.Next != nil {
		out.Fingerprint = c.Next.Fingerprint.String()
		out.Version = c.Next.Version
	}
	if c.Category.Direct() && c.Previous != nil && c.Next != nil && c.Previous.Model.Query != c.Next.Model.Query {
		out.Diff = queryDiff(c.Name, c.Previous.Model.Query, c.Next.Model.Query)
	}
	return out
}

// queryDiff is a unified diff of two queries, for the plan's report.
func queryDiff(name, before, after string) string {
	d, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(strings.TrimSpace(before) + "\n"), B: difflib.SplitLines(strings.TrimSpace(after) + "\n"),
		FromFile: name + " (current)", ToFile: name + " (new)", Context: 3,
	})
	if err != nil {
		return "" // the diff is a courtesy; the categories are the substance
	}
	return d
}

// BackfillFor returns the plan's backfill for a model, if any.
func (p *Plan) BackfillFor(name string) (Backfill, bool) {
	i := slices.IndexFunc(p.Backfills, func(b Backfill) bool { return b.Name == name })
	if i < 0 {
		return Backfill{}, false
	}
	return p.Backfills[i], true
}

// Builds names the models whose physical objects applying the plan makes or
// fills: every model whose version the plan puts into the environment anew
// (added, or changed into a fresh version) and every model it backfills.
// They are the models to check before anything is written (see
// execute.Check).
func (p *Plan) Builds() map[string]bool {
	out := map[string]bool{}
	for _, c := range p.Changes {
		if c.Version != "" && c.Version != c.PreviousVersion {
			out[c.Name] = true
		}
	}
	for _, b := range p.Backfills {
		out[b.Name] = true
	}
	return out
}
