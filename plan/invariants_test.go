package plan

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/dag"
	"github.com/gapless-dev/gapless/internal/invariants"
	"github.com/gapless-dev/gapless/interval"
)

// Build checks its plan in invariants builds (the race builds of the
// suite): plans that break what Build guarantees, made here by editing a
// built plan as only a bug in Build could, panic naming the invariant.
func TestBuildChecksThePlanInvariant(t *testing.T) {
	t.Parallel()
	if !invariants.Enabled {
		t.Skip("the checks run in builds tagged invariants or race")
	}
	st := openStore(t)
	exec := at(2, 10).Add(30 * time.Minute)
	bounded := Options{Start: at(1, 2), End: at(2, 8)}
	valid := func(t *testing.T, o Options) *Plan {
		p := build(t, st, Prod, nil, nil, newFixture(), exec, o)
		_, ok := p.BackfillFor("demo.events")
		require.True(t, ok)
		return p
	}
	events := func(p *Plan) *Backfill {
		return &p.Backfills[slices.IndexFunc(p.Backfills, func(b Backfill) bool { return b.Name == "demo.events" })]
	}
	hours := func(from, to time.Time) interval.Set { return interval.NewSet(interval.NewRange(from, to)) }
	for name, c := range map[string]struct {
		opts    Options
		want    string // in the violation
		breakIt func(p *Plan)
	}{
		"snapshots not topological":      {bounded, "snapshots are not in topological order", func(p *Plan) { p.Snapshots[0], p.Snapshots[1] = p.Snapshots[1], p.Snapshots[0] }},
		"snapshot twice":                 {bounded, "listed twice", func(p *Plan) { p.Snapshots = append(p.Snapshots, p.Snapshots[0]) }},
		"backfill of no snapshot":        {bounded, "not a snapshot of the plan", func(p *Plan) { p.Backfills = append(p.Backfills, Backfill{Name: "demo.nothing", Whole: true}) }},
		"backfill twice":                 {bounded, "backfilled twice", func(p *Plan) { p.Backfills = append(p.Backfills, *events(p)) }},
		"backfill at another version":    {bounded, "at version v0", func(p *Plan) { events(p).Version = "v0" }},
		"incumbent of no snapshot":       {bounded, "incumbent of demo.nothing", func(p *Plan) { p.Incumbents = append(p.Incumbents, Incumbent{Name: "demo.nothing"}) }},
		"whole build with ranges":        {bounded, "a whole build with ranges", func(p *Plan) { events(p).Whole = true }},
		"no ranges, not whole":           {bounded, "no ranges", func(p *Plan) { events(p).Ranges = interval.Set{} }},
		"range before the model's start": {Options{}, "before the model's start", func(p *Plan) { b := events(p); b.Ranges = b.Ranges.Union(hours(at(1, 0).Add(-time.Hour), at(1, 0))) }},
		"range before the plan's start":  {bounded, "before the plan's start", func(p *Plan) { b := events(p); b.Ranges = b.Ranges.Union(hours(at(1, 0), at(1, 1))) }},
		"range past the backfill's end":  {bounded, "past the backfill's end", func(p *Plan) { b := events(p); b.Ranges = b.Ranges.Union(hours(b.End, b.End.Add(time.Hour))) }},
		"end past the plan's end":        {bounded, "past the plan's end", func(p *Plan) { events(p).End = at(2, 9) }},
		"wrong bucket count":             {bounded, "31 buckets", func(p *Plan) { events(p).Buckets++ }},
	} {
		t.Run(name, func(t *testing.T) {
			p := valid(t, c.opts)
			c.breakIt(p)
			err := p.check()
			require.ErrorContains(t, err, c.want)
			require.PanicsWithValue(t, "invariant violated: "+planInvariant+": "+err.Error(), p.mustBeValid)
		})
	}
	p := valid(t, bounded)
	require.Equal(t, "{[2024-01-01T02:00:00Z, 2024-01-02T08:00:00Z)}", events(p).Ranges.String())
	require.NotPanics(t, p.mustBeValid)
	require.NotPanics(t, valid(t, Options{}).mustBeValid)
}

// Build runs the check on the plan it returns: given a graph that
// contradicts the snapshots' parents (a caller's bug: the project loader
// builds both from the same models), it lists the snapshots in the graph's
// order, which is not topological for their parents, and panics naming the
// invariant.
func TestBuildPanicsOnAPlanItCannotKeep(t *testing.T) {
	t.Parallel()
	if !invariants.Enabled {
		t.Skip("the checks run in builds tagged invariants or race")
	}
	st := openStore(t)
	next, _ := newFixture().snapshots(t)
	flat := map[string][]string{}
	for name := range next {
		flat[name] = nil
	}
	g, err := dag.New(flat) // no edges: ordered by name, demo.daily before demo.events
	require.NoError(t, err)
	exec := at(2, 10)
	require.PanicsWithValue(t, "invariant violated: "+planInvariant+
		": snapshot demo.daily comes before its parent demo.events: snapshots are not in topological order", func() {
		_, _ = Build(t.Context(), BuildParams{ID: "p", Environment: Prod, Next: next, Graph: g,
			Intervals: st, ExecutionTime: exec, Now: exec})
	})
}
