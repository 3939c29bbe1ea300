package plan

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/model"
)

// Scenario: prod serves the fixture; the project changes demo.events and
// demo.totals. `plan --select-model demo.daily` takes demo.daily and its
// upstream (demo.events, with its change), keeps prod's demo.totals (its
// change waits), and leaves out a new model that is not selected. Without
// a selection the project is taken as is.
func TestSelectTakesTheSelectionAndItsUpstream(t *testing.T) {
	t.Parallel()
	base, _ := newFixture().snapshots(t)
	f := newFixture().
		edit("demo.events", func(m *model.Model) { m.Query = "SELECT ts, 1 AS x FROM src.events" }).
		edit("demo.totals", func(m *model.Model) { m.Query = "SELECT count(*) + 1 FROM demo.daily" })
	f.models["demo.new"] = &model.Model{Name: "demo.new", Kind: model.KindFull, Dialect: model.DialectDuckDB, Cron: "@daily",
		IntervalUnit: f.models["demo.totals"].IntervalUnit, Enabled: true, Query: "SELECT 1"}
	f.edges = map[string][]string{"src.events": nil, "demo.events": {"src.events"}, "demo.daily": {"demo.events"},
		"demo.totals": {"demo.daily"}, "demo.new": nil}
	project, graph := f.snapshots(t)

	next, g, err := Select(project, graph, base, []string{"demo.daily"})
	require.NoError(t, err)
	require.Same(t, project["demo.events"], next["demo.events"], "upstream of the selection: the project's")
	require.Same(t, project["demo.daily"], next["demo.daily"])
	require.Same(t, base["demo.totals"], next["demo.totals"], "outside the selection: what prod serves")
	require.NotContains(t, next, "demo.new", "a new model not selected is left out")
	require.ElementsMatch(t, []string{"src.events", "demo.events", "demo.daily", "demo.totals"}, g.Nodes())

	same, sameGraph, err := Select(project, graph, base, nil)
	require.NoError(t, err)
	require.Equal(t, project, same)
	require.Same(t, graph, sameGraph)
}
