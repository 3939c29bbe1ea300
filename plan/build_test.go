package plan

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/dag"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/sqlite"
)

// fixture is a small project: src.events (EXTERNAL) -> demo.events (hourly,
// incremental) -> demo.daily (daily, incremental) -> demo.totals (FULL).
type fixture struct {
	models map[string]*model.Model
	edges  map[string][]string
}

func newFixture() fixture {
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	inc := func(name, cron string, unit interval.Unit, q string) *model.Model {
		return &model.Model{Name: name, Kind: model.KindIncrementalByTimeRange, TimeColumn: "ts",
			Dialect: model.DialectDuckDB, Cron: cron, IntervalUnit: unit, Enabled: true, Start: start, Query: q}
	}
	return fixture{
		models: map[string]*model.Model{
			"src.events":  {Name: "src.events", Kind: model.KindExternal, Dialect: model.DialectDuckDB, Cron: "@daily", IntervalUnit: interval.Day, Enabled: true},
			"demo.events": inc("demo.events", "@hourly", interval.Hour, "SELECT ts FROM src.events"),
			"demo.daily":  inc("demo.daily", "@daily", interval.Day, "SELECT date_trunc('day', ts) AS ts FROM demo.events"),
			"demo.totals": {Name: "demo.totals", Kind: model.KindFull, Dialect: model.DialectDuckDB, Cron: "@daily", IntervalUnit: interval.Day, Enabled: true, Query: "SELECT count(*) FROM demo.daily"},
		},
		edges: map[string][]string{"src.events": nil, "demo.events": {"src.events"}, "demo.daily": {"demo.events"}, "demo.totals": {"demo.daily"}},
	}
}

func (f fixture) edit(name string, fn func(m *model.Model)) fixture {
	c := fixture{models: map[string]*model.Model{}, edges: f.edges}
	for k, m := range f.models {
		mm := *m
		c.models[k] = &mm
	}
	fn(c.models[name])
	return c
}

func (f fixture) snapshots(t *testing.T) (map[string]*snapshot.Snapshot, *dag.Graph) {
	t.Helper()
	g, err := dag.New(f.edges)
	require.NoError(t, err)
	in := map[string]snapshot.Input{}
	for name, m := range f.models {
		in[name] = snapshot.Input{Model: m, Canonical: m.Query}
	}
	s, err := snapshot.BuildAll(g, in)
	require.NoError(t, err)
	return s, g
}

func openStore(t *testing.T) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	return st
}

func at(d, h int) time.Time { return time.Date(2024, 1, d, h, 0, 0, 0, time.UTC) }

func build(t *testing.T, st state.Store, env string, cur *state.Environment, base map[string]*snapshot.Snapshot, f fixture, exec time.Time, opts Options) *Plan {
	t.Helper()
	next, g := f.snapshots(t)
	p, err := Build(context.Background(), BuildParams{
		ID: "p-" + exec.Format("0215"), Environment: env, Current: cur, Base: base, Next: next, Graph: g,
		Intervals: st, ExecutionTime: exec, Now: exec, Options: opts,
	})
	require.NoError(t, err)
	return p
}

// Scenario: the first plan of a project on an empty state adds every model;
// incremental models backfill [start, due bound), FULL models are built whole.
func TestBuildFirstPlan(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	p := build(t, st, Prod, nil, nil, newFixture(), at(2, 10).Add(30*time.Minute), Options{})
	require.Equal(t, Expected{}, p.Expected)
	require.Len(t, p.Changes, 4)
	for _, c := range p.Changes {
		require.Equal(t, snapshot.Added, c.Category, c.Name)
	}
	ev, ok := p.BackfillFor("demo.events")
	require.True(t, ok)
	require.Equal(t, "{[2024-01-01T00:00:00Z, 2024-01-02T10:00:00Z)}", ev.Ranges.String())
	require.Equal(t, 34, ev.Buckets)
	daily, ok := p.BackfillFor("demo.daily")
	require.True(t, ok)
	require.Equal(t, 1, daily.Buckets, "only the 1st is a complete, due day")
	tot, ok := p.BackfillFor("demo.totals")
	require.True(t, ok)
	require.True(t, tot.Whole)
	_, ok = p.BackfillFor("src.events")
	require.False(t, ok, "EXTERNAL tables are never built")
	require.Empty(t, p.Incumbents)
}

// Scenario: prod serves v1 of demo.events, computed through 10:00. A breaking
// change is planned at 12:30. The prod plan bounds the replacement's backfill
// to the incumbent's frontier at build time (10:00), records that frontier,
// and leaves the rest to the scheduler and the promotion check. The same
// change planned for a dev environment is bounded by the schedule only.
func TestBuildBoundsProdBackfillToIncumbentFrontier(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	base, _ := newFixture().snapshots(t)
	for _, name := range []string{"demo.events", "demo.daily"} {
		require.NoError(t, st.AddIntervals(ctx, state.IntervalsParams{
			Key:    state.VersionKey{Name: name, Version: base[name].Version},
			Ranges: interval.NewSet(interval.NewRange(at(1, 0), at(1, 10))), Now: at(1, 10),
		}))
	}
	cur := &state.Environment{Name: Prod, PlanID: "p-0", Generation: 4}
	changed := newFixture().edit("demo.events", func(m *model.Model) { m.Query = "SELECT ts FROM src.events WHERE ts > '2000-01-01'" })

	p := build(t, st, Prod, cur, base, changed, at(1, 12).Add(30*time.Minute), Options{})
	require.Equal(t, Expected{PlanID: "p-0", Generation: 4}, p.Expected)
	ev, ok := p.BackfillFor("demo.events")
	require.True(t, ok)
	require.Equal(t, "{[2024-01-01T00:00:00Z, 2024-01-01T10:00:00Z)}", ev.Ranges.String())
	require.Equal(t, at(1, 10), ev.End)
	require.Len(t, p.Incumbents, 3, "events, daily and totals are replaced")
	require.Equal(t, "demo.daily", p.Incumbents[1].Name)
	require.Equal(t, at(1, 10), p.Incumbents[0].Frontier)
	require.Equal(t, base["demo.events"].Version, p.Incumbents[0].Snapshot.Version)
	cats := map[string]snapshot.Category{}
	for _, c := range p.Changes {
		cats[c.Name] = c.Category
	}
	require.Equal(t, map[string]snapshot.Category{"demo.events": snapshot.Breaking, "demo.daily": snapshot.IndirectBreaking, "demo.totals": snapshot.IndirectBreaking}, cats)
	require.Contains(t, p.Changes[0].Diff, "+SELECT ts FROM src.events WHERE ts > '2000-01-01'")

	dev := build(t, st, "dev", nil, base, changed, at(1, 12).Add(30*time.Minute), Options{})
	ev, ok = dev.BackfillFor("demo.events")
	require.True(t, ok)
	require.Equal(t, "{[2024-01-01T00:00:00Z, 2024-01-01T12:00:00Z)}", ev.Ranges.String())
}

// Scenario: a metadata-only change and a forward-only change reuse their
// tables: no backfill, no incumbent to replace.
func TestBuildReusesTables(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	base, _ := newFixture().snapshots(t)
	cur := &state.Environment{Name: Prod, PlanID: "p-0", Generation: 1}
	meta := newFixture().edit("demo.events", func(m *model.Model) { m.Owner = "someone" })
	p := build(t, st, Prod, cur, base, meta, at(2, 0), Options{})
	require.Empty(t, p.Backfills)
	require.Empty(t, p.Incumbents)
	require.Equal(t, snapshot.MetadataOnly, p.Changes[0].Category)

	fwd := newFixture().edit("demo.events", func(m *model.Model) { m.Query = "SELECT ts FROM src.events LIMIT 5" })
	p = build(t, st, Prod, cur, base, fwd, at(2, 0), Options{ForwardOnly: true})
	require.Empty(t, p.Backfills)
	require.Empty(t, p.Incumbents)
	for _, s := range p.Snapshots {
		require.Equal(t, base[s.Name].Version, s.Version, s.Name)
	}
}

// Scenario: restating an unchanged model recomputes its window and its
// downstream, even where intervals are recorded; --start/--end clip it.
func TestBuildRestatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	base, _ := newFixture().snapshots(t)
	require.NoError(t, st.AddIntervals(ctx, state.IntervalsParams{
		Key:    state.VersionKey{Name: "demo.events", Version: base["demo.events"].Version},
		Ranges: interval.NewSet(interval.NewRange(at(1, 0), at(3, 0))), Now: at(3, 0),
	}))
	cur := &state.Environment{Name: Prod, PlanID: "p-0", Generation: 1}
	p := build(t, st, Prod, cur, base, newFixture(), at(3, 0), Options{Restate: []string{"demo.events"}, Start: at(2, 0), End: at(2, 6)})
	ev, ok := p.BackfillFor("demo.events")
	require.True(t, ok)
	require.Equal(t, "{[2024-01-02T00:00:00Z, 2024-01-02T06:00:00Z)}", ev.Ranges.String())
	_, ok = p.BackfillFor("demo.daily")
	require.False(t, ok, "the daily window [2nd, 2nd 06:00) floors to nothing complete")
	tot, ok := p.BackfillFor("demo.totals")
	require.True(t, ok)
	require.True(t, tot.Whole)

	_, err := Build(ctx, BuildParams{Environment: Prod, Next: base, Graph: mustGraph(t), Intervals: st, Options: Options{Restate: []string{"demo.nope"}}})
	require.ErrorContains(t, err, "--restate-model demo.nope: no such model")
}

func mustGraph(t *testing.T) *dag.Graph {
	_, g := newFixture().snapshots(t)
	return g
}
