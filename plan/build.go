package plan

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pmezard/go-difflib/difflib"

	"github.com/gapless-dev/gapless/cadence"
	"github.com/gapless-dev/gapless/dag"
	"github.com/gapless-dev/gapless/internal/invariants"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/state"
)

// Prod is the production environment's name (snapshot.Prod).
const Prod = snapshot.Prod

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
//
// Work already done is not listed as work: a new version's backfill is its
// window minus what the version's interval record covers at build time
// (another environment may have built it), and a kind built whole whose
// version already covers the range it would record has no backfill. Each
// such version is listed in Reuses, with what state holds and which
// environments serve it. Apply re-reads state and computes only what is
// still missing within the backfills, never more (invariant 5).
//
// Options that p.Environment may not have are refused (CheckOptions).
// Options.Categories are the operator's category choices; an unsafe one
// fails the build with a *snapshot.ChoiceError.
func Build(ctx context.Context, p BuildParams) (*Plan, error) {
	if err := CheckOptions(p.Environment, p.Options); err != nil {
		return nil, err
	}
	changes, err := snapshot.Categorize(p.Base, p.Next, p.Graph, p.Additive,
		snapshot.Options{ForwardOnly: p.Options.ForwardOnly, Choices: p.Options.Categories})
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
	gates := sourceGates(p.Next, p.Graph)
	for _, name := range gatingSources(gates) {
		keys = append(keys, state.SourceKey(name))
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
		w, err := workFor(c.Next, covered[state.VersionKey{Name: c.Name, Version: c.Next.Version}],
			p, replaced, frontier, restate[c.Name])
		if err != nil {
			return nil, err
		}
		if g := gates[c.Name]; len(g) > 0 && w.todo {
			var wait *SourceWait
			w, wait = gate(w, c.Next, g, covered)
			if wait != nil {
				pl.Waits = append(pl.Waits, *wait)
			}
		}
		switch {
		case w.todo && p.Options.EmptyBackfill:
			if e, ok := emptyWork(w.backfill, c.Next.Model, p.ExecutionTime); ok {
				pl.Empty = append(pl.Empty, e)
			} else {
				// A kind built whole with no range to record (no
				// schedule yet): built as usual, there is nothing to
				// mark as done instead.
				pl.Backfills = append(pl.Backfills, w.backfill)
			}
		case w.todo:
			pl.Backfills = append(pl.Backfills, w.backfill)
		}
		if !w.done.IsEmpty() {
			pl.Reuses = append(pl.Reuses, Reuse{Name: c.Name, Version: c.Next.Version, Covered: w.done, Complete: !w.todo})
		}
	}
	if err := builtBy(ctx, p, pl.Reuses); err != nil {
		return nil, err
	}
	if invariants.Enabled {
		pl.mustBeValid()
	}
	return pl, nil
}

// environmentLister is the part of a state store that lists environments.
// Build names the environments that built a reused version when
// BuildParams.Intervals has it (every state.Store does).
type environmentLister interface {
	ListEnvironments(ctx context.Context) ([]*state.Environment, error)
}

// builtBy fills each reuse's BuiltBy: the other live environments that
// serve its version.
func builtBy(ctx context.Context, p BuildParams, reuses []Reuse) error {
	lister, ok := p.Intervals.(environmentLister)
	if len(reuses) == 0 || !ok {
		return nil
	}
	envs, err := lister.ListEnvironments(ctx)
	if err != nil {
		return fmt.Errorf("reading the environments: %w", err)
	}
	for i := range reuses {
		r := &reuses[i]
		for _, e := range envs { // sorted by name
			if e.Name == p.Environment || e.Invalidated {
				continue
			}
			if slices.ContainsFunc(e.Snapshots, func(s state.SnapshotRef) bool { return s.Name == r.Name && s.Version == r.Version }) {
				r.BuiltBy = append(r.BuiltBy, e.Name)
			}
		}
	}
	return nil
}

// work is one model's share of a plan: what to compute, and what of the
// plan's window state already holds.
type work struct {
	backfill Backfill
	todo     bool         // backfill has something to compute
	done     interval.Set // the window's part already covered (not restated)
}

// workFor computes one model's work: the plan's window for it minus what
// the version's interval record covers (all of the window when restated).
// Kinds without intervals are built whole once per new version, unless the
// version already holds the whole range it would record (see
// wholeRange): then another environment built it at this very bound, and
// apply would skip it.
func workFor(s *snapshot.Snapshot, covered interval.Set, p BuildParams, replaced bool, frontier time.Time, restated bool) (work, error) {
	m := s.Model
	w := work{backfill: Backfill{Name: s.Name, Version: s.Version}}
	switch m.Kind {
	case model.KindExternal:
		return w, nil
	case model.KindFull, model.KindSeed, model.KindView:
		if r, ok := wholeRange(m, p.ExecutionTime); ok && !restated && covered.Covers(r) {
			w.done = interval.NewSet(r)
			return w, nil
		}
		w.backfill.Whole, w.todo = true, true
		return w, nil
	}
	spec, err := cadence.ForModel(m)
	if err != nil {
		return w, err
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
		return w, nil
	}
	todo := covered.Missing(window)
	if restated {
		todo = interval.NewSet(window)
	} else {
		w.done = covered.IntersectRange(window)
	}
	if todo.IsEmpty() {
		return w, nil
	}
	w.backfill.Ranges = todo
	w.backfill.Buckets = todo.Buckets(spec.Unit)
	w.backfill.End = end
	w.todo = true
	return w, nil
}

// sourceGates maps each model to the sources its work is held to: for an
// incremental kind every source upstream of it (a model two steps below a
// source computes nothing its parent could not, and its parent computes
// nothing the source has not published); for a kind built whole the
// sources it reads directly, as run.DueWork holds them.
func sourceGates(next map[string]*snapshot.Snapshot, g *dag.Graph) map[string][]string {
	out := map[string][]string{}
	for _, name := range g.Order() {
		s := next[name]
		if s == nil || s.Model.Kind == model.KindExternal {
			continue
		}
		var srcs []string
		if s.Model.Kind.IsIncremental() {
			for _, u := range g.Upstream(name) {
				if us := next[u]; us != nil && us.Model.Source {
					srcs = append(srcs, u)
				}
			}
		} else {
			for _, u := range g.Parents(name) {
				if us := next[u]; us != nil && us.Model.Source {
					srcs = append(srcs, u)
				}
			}
		}
		if len(srcs) > 0 {
			slices.Sort(srcs)
			out[name] = srcs
		}
	}
	return out
}

// gatingSources is every source some model's work is held to, sorted.
func gatingSources(gates map[string][]string) []string {
	var out []string
	for _, srcs := range gates {
		out = append(out, srcs...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// gate holds w back to what every source in srcs has published: an
// incremental backfill keeps only the whole intervals of its unit they all
// cover (none today: until ingestion publishes, nothing reading a source is
// computed), a kind built whole waits while any of them covers nothing. The
// wait is reported when anything was held back.
func gate(w work, s *snapshot.Snapshot, srcs []string, covered map[state.VersionKey]interval.Set) (work, *SourceWait) {
	wait := &SourceWait{Name: s.Name, Version: s.Version}
	var ready interval.Set
	for i, src := range srcs {
		c := covered[state.SourceKey(src)]
		if i == 0 {
			ready = c
		} else {
			ready = ready.Intersect(c)
		}
		wait.Sources = append(wait.Sources, WaitedSource{Name: src, CompleteThrough: c.Frontier()})
	}
	if w.backfill.Whole {
		for _, src := range srcs {
			if covered[state.SourceKey(src)].IsEmpty() {
				w.todo, wait.Whole = false, true
				return w, wait
			}
		}
		return w, nil
	}
	spec, err := cadence.ForModel(s.Model)
	if err != nil {
		return w, nil // the backfill exists, so its schedule does
	}
	kept := alignedTo(w.backfill.Ranges.Intersect(ready), spec.Unit, s.Model.AllowPartials)
	held := w.backfill.Ranges.Subtract(kept)
	if held.IsEmpty() {
		return w, nil
	}
	wait.Held = held
	w.backfill.Ranges = kept
	w.backfill.Buckets = kept.Buckets(spec.Unit)
	w.todo = !kept.IsEmpty()
	return w, wait
}

// alignedTo shrinks each range of s to whole buckets of u, unless partial
// intervals are allowed (as run clips a child to its parents).
func alignedTo(s interval.Set, u interval.Unit, partials bool) interval.Set {
	if partials {
		return s
	}
	var out []interval.Range
	for r := range s.All() {
		if a := interval.NewRange(u.Ceil(r.Start), u.Floor(r.End)); !a.Empty() {
			out = append(out, a)
		}
	}
	return interval.NewSet(out...)
}

// wholeRange is the range a kind built whole records when it is built at
// exec, exactly as execute.WholeRange computes it (apply skips the build
// when the version covers it): [Unit.Floor(start), schedule Bound(exec)).
// It reports false when there is none (no schedule, or nothing due yet).
func wholeRange(m *model.Model, exec time.Time) (interval.Range, bool) {
	spec, err := cadence.ForModel(m)
	if err != nil {
		return interval.Range{}, false
	}
	r := interval.NewRange(spec.Unit.Floor(spec.Start), spec.Bound(exec))
	return r, !r.Empty()
}

func describeChange(c snapshot.Change) Change {
	out := Change{Name: c.Name, Category: c.Category, Reason: c.Reason, ForwardOnly: c.ForwardOnly,
		ForwardOnlyReason: c.ForwardOnlyReason, MetadataChanged: c.MetadataChanged, Chosen: c.Chosen}
	if c.Chosen != "" {
		out.AutoCategory = c.Auto
	}
	if c.Previous != nil {
		out.PreviousFingerprint = c.Previous.Fingerprint.String()
		out.PreviousVersion = c.Previous.Version
	}
	if c.Next != nil {
		out.Fingerprint = c.Next.Fingerprint.String()
		out.Version = c.Next.Version
	}
	if c.Previous == nil || c.Next == nil {
		return out
	}
	if c.Category.Direct() && c.Previous.Model.Query != c.Next.Model.Query {
		out.Diff = queryDiff(c.Name, c.Previous.Model.Query, c.Next.Model.Query)
	}
	if before, after := renderHeader(c.Previous.Model), renderHeader(c.Next.Model); before != after {
		out.HeaderDiff = queryDiff(c.Name+" header", before, after)
	}
	return out
}

// queryDiff is a unified diff of two texts (queries, headers), for the
// plan's report.
func queryDiff(name, before, after string) string {
	d, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(strings.TrimSpace(before)), B: difflib.SplitLines(strings.TrimSpace(after)),
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
