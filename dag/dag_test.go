package dag

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/gapless-dev/gapless/internal/invariants"
)

func TestOrderIsTopologicalAndTieBrokenByName(t *testing.T) {
	t.Parallel()
	g, err := New(map[string][]string{
		"raw.events":  nil,
		"raw.users":   nil,
		"stg.events":  {"raw.events"},
		"mart.daily":  {"stg.events", "raw.users"},
		"a.first":     nil,
		"mart.weekly": {"mart.daily"},
	})
	require.NoError(t, err)
	require.Equal(t, []string{"a.first", "raw.events", "raw.users", "stg.events", "mart.daily", "mart.weekly"}, g.Order())
	require.Equal(t, []string{"raw.users", "stg.events"}, g.Parents("mart.daily"))
	require.Equal(t, []string{"mart.daily"}, g.Children("raw.users"))
	require.Equal(t, []string{"raw.events", "raw.users", "stg.events"}, g.Upstream("mart.daily"))
	require.Equal(t, []string{"stg.events", "mart.daily", "mart.weekly"}, g.Downstream("raw.events"))
	require.Empty(t, g.Downstream("mart.weekly"))
}

func TestCycleIsReportedWithItsPath(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		edges map[string][]string
		want  []string
	}{
		{"self", map[string][]string{"s.a": {"s.a"}}, []string{"s.a", "s.a"}},
		{"two", map[string][]string{"s.a": {"s.b"}, "s.b": {"s.a"}}, []string{"s.a", "s.b", "s.a"}},
		{"three behind a tail", map[string][]string{
			"s.root": nil, "s.a": {"s.root", "s.c"}, "s.b": {"s.a"}, "s.c": {"s.b"}, "s.tail": {"s.c"},
		}, []string{"s.a", "s.b", "s.c", "s.a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := New(tc.edges)
			var ce *CycleError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, tc.want, ce.Cycle)
			// every step of the reported cycle is a real edge parent -> child
			for i := 0; i+1 < len(ce.Cycle); i++ {
				require.Contains(t, tc.edges[ce.Cycle[i+1]], ce.Cycle[i])
			}
		})
	}
}

func TestUnknownParent(t *testing.T) {
	t.Parallel()
	_, err := New(map[string][]string{"s.a": {"s.missing"}})
	var ue *UnknownNodeError
	require.True(t, errors.As(err, &ue))
	require.Equal(t, "s.a", ue.Node)
	require.Equal(t, "s.missing", ue.Parent)
}

// Property: for random acyclic graphs the order puts every parent before its
// child and does not depend on how the input map was built.
func TestOrderProperties(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 30).Draw(t, "n")
		names := make([]string, n)
		for i := range names {
			names[i] = string(rune('a'+i%26)) + "." + string(rune('a'+i/26))
		}
		edges := map[string][]string{}
		for i, name := range names {
			edges[name] = nil
			for j := 0; j < i; j++ { // only earlier nodes: acyclic by construction
				if rapid.Bool().Draw(t, "edge") {
					edges[name] = append(edges[name], names[j])
				}
			}
		}
		g, err := New(edges)
		require.NoError(t, err)
		pos := map[string]int{}
		for i, x := range g.Order() {
			pos[x] = i
		}
		require.Len(t, pos, n)
		for c, ps := range edges {
			for _, p := range ps {
				require.Less(t, pos[p], pos[c])
			}
		}
		// rebuild from shuffled parent lists: same order
		shuffled := map[string][]string{}
		for k, v := range edges {
			v2 := append([]string(nil), v...)
			rand.Shuffle(len(v2), func(i, j int) { v2[i], v2[j] = v2[j], v2[i] })
			shuffled[k] = v2
		}
		g2, err := New(shuffled)
		require.NoError(t, err)
		require.Equal(t, g.Order(), g2.Order())
	})
}

// New checks the Graph invariant in invariants builds (the race builds of
// the suite): graphs that break it, built here as only a bug in New could,
// panic naming it.
func TestNewChecksTheGraphInvariant(t *testing.T) {
	t.Parallel()
	if !invariants.Enabled {
		t.Skip("the checks run in builds tagged invariants or race")
	}
	valid := func() *Graph {
		g, err := New(map[string][]string{"a": nil, "b": {"a"}, "c": {"b"}})
		require.NoError(t, err)
		return g
	}
	for name, breakIt := range map[string]func(g *Graph){
		"cycle": func(g *Graph) { // a -> b -> c -> a, in an order that hides nothing
			g.parents["a"] = []string{"c"}
			g.children["c"] = []string{"a"}
		},
		"order not topological": func(g *Graph) {
			g.order = []string{"b", "a", "c"}
			g.index = map[string]int{"b": 0, "a": 1, "c": 2}
		},
		"order misses a node":   func(g *Graph) { g.order = g.order[:2] },
		"dangling parent":       func(g *Graph) { g.parents["b"] = []string{"z"} },
		"unsorted nodes":        func(g *Graph) { g.nodes = []string{"b", "a", "c"} },
		"children not mirrored": func(g *Graph) { g.children["a"] = nil },
		"extra child":           func(g *Graph) { g.children["c"] = []string{"a"} },
	} {
		t.Run(name, func(t *testing.T) {
			g := valid()
			breakIt(g)
			err := g.check()
			require.Error(t, err)
			require.PanicsWithValue(t, "invariant violated: "+graphInvariant+": "+err.Error(), g.mustBeValid)
		})
	}
	require.NotPanics(t, valid().mustBeValid)
}
