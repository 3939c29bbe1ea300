// Package dag holds the dependency graph between models: deterministic
// topological order, cycle detection, and upstream/downstream closure.
//
// The graph knows only names. Who references whom is decided elsewhere (by
// parsing each model's SQL); this package guarantees that every question
// asked of the graph gets the same answer on every machine and every run.
package dag

import (
	"container/heap"
	"fmt"
	"slices"
	"strings"

	"github.com/gapless-dev/gapless/internal/invariants"
)

// Graph is an immutable directed acyclic graph of named nodes, where an edge
// runs from a parent (a node that is read) to a child (a node that reads it).
//
// Invariant: a Graph value never contains a cycle, every parent named by an
// edge is itself a node, and every slice it returns is sorted or in
// topological order, so iteration order never depends on map order.
type Graph struct {
	nodes    []string // sorted
	parents  map[string][]string
	children map[string][]string
	order    []string // topological, ties broken by name
	index    map[string]int
}

// UnknownNodeError reports an edge whose parent is not a node of the graph.
type UnknownNodeError struct {
	Node   string // the node that names the parent
	Parent string
}

func (e *UnknownNodeError) Error() string {
	return fmt.Sprintf("%s depends on %s, which is not in the graph", e.Node, e.Parent)
}

// CycleError reports a dependency cycle. Cycle lists the nodes in order and
// repeats the first one at the end, so "a -> b -> a" reads naturally.
type CycleError struct {
	Cycle []string
}

func (e *CycleError) Error() string {
	return "dependency cycle: " + strings.Join(e.Cycle, " -> ")
}

// New builds a graph from a map of node to its parents. Every key is a node;
// every parent must also be a key. Duplicate parents and self-edges are
// rejected: a self-edge is reported as a one-node cycle.
//
// It returns *UnknownNodeError for a dangling parent and *CycleError (naming
// one cycle, found deterministically) when the edges are not acyclic.
func New(parents map[string][]string) (*Graph, error) {
	g := &Graph{
		parents:  make(map[string][]string, len(parents)),
		children: make(map[string][]string, len(parents)),
	}
	for n := range parents {
		g.nodes = append(g.nodes, n)
	}
	slices.Sort(g.nodes)
	for _, n := range g.nodes {
		ps := slices.Clone(parents[n])
		slices.Sort(ps)
		ps = slices.Compact(ps)
		for _, p := range ps {
			if _, ok := parents[p]; !ok {
				return nil, &UnknownNodeError{Node: n, Parent: p}
			}
			g.children[p] = append(g.children[p], n)
		}
		g.parents[n] = ps
	}
	for _, n := range g.nodes {
		slices.Sort(g.children[n])
	}
	if err := g.sort(); err != nil {
		return nil, err
	}
	if invariants.Enabled {
		g.mustBeValid()
	}
	return g, nil
}

// graphInvariant names the Graph invariant in a violation's panic.
const graphInvariant = "dag.Graph is acyclic and its order topological"

// mustBeValid panics, naming the Graph invariant, when g breaks it: a bug
// in New, since a cycle or dangling edge is refused with an error first.
func (g *Graph) mustBeValid() {
	if err := g.check(); err != nil {
		invariants.Violated(graphInvariant, err)
	}
}

// check verifies the Graph invariant in O(V + E log E): nodes sorted and
// unique, parents and children sorted, unique, known and mirror images of
// each other, and order a permutation of the nodes (index its inverse) in
// which every node comes after each of its parents, which is what makes the
// graph acyclic.
func (g *Graph) check() error {
	if !slices.IsSorted(g.nodes) || len(slices.Compact(slices.Clone(g.nodes))) != len(g.nodes) {
		return fmt.Errorf("nodes %v are not sorted and unique", g.nodes)
	}
	if len(g.order) != len(g.nodes) || len(g.index) != len(g.nodes) {
		return fmt.Errorf("order %v is not a permutation of the nodes %v", g.order, g.nodes)
	}
	for i, n := range g.order {
		if j, ok := g.index[n]; !ok || j != i {
			return fmt.Errorf("order %v is not a permutation of the nodes %v", g.order, g.nodes)
		}
	}
	edges := 0
	for _, n := range g.nodes {
		ps := g.parents[n]
		if !slices.IsSorted(ps) || len(slices.Compact(slices.Clone(ps))) != len(ps) {
			return fmt.Errorf("parents %v of %s are not sorted and unique", ps, n)
		}
		for _, p := range ps {
			ip, ok := g.index[p]
			if !ok {
				return fmt.Errorf("parent %s of %s is not a node", p, n)
			}
			if ip >= g.index[n] {
				return fmt.Errorf("%s comes before its parent %s in order %v (a cycle, or a wrong order)", n, p, g.order)
			}
			if _, ok := slices.BinarySearch(g.children[p], n); !ok {
				return fmt.Errorf("%s is a parent of %s but %s is not its child", p, n, n)
			}
		}
		edges += len(ps)
		if !slices.IsSorted(g.children[n]) {
			return fmt.Errorf("children %v of %s are not sorted", g.children[n], n)
		}
	}
	for _, cs := range g.children {
		edges -= len(cs)
	}
	if edges != 0 {
		return fmt.Errorf("children and parents do not mirror each other (%d edges more on the parents' side)", edges)
	}
	return nil
}

// sort computes the topological order with Kahn's algorithm, always taking
// the smallest ready name, so the order is a pure function of the edges.
func (g *Graph) sort() error {
	indeg := make(map[string]int, len(g.nodes))
	ready := &nameHeap{}
	for _, n := range g.nodes {
		indeg[n] = len(g.parents[n])
		if indeg[n] == 0 {
			heap.Push(ready, n)
		}
	}
	g.order = make([]string, 0, len(g.nodes))
	for ready.Len() > 0 {
		n := heap.Pop(ready).(string)
		g.order = append(g.order, n)
		for _, c := range g.children[n] {
			indeg[c]--
			if indeg[c] == 0 {
				heap.Push(ready, c)
			}
		}
	}
	if len(g.order) != len(g.nodes) {
		return &CycleError{Cycle: g.findCycle(indeg)}
	}
	g.index = make(map[string]int, len(g.order))
	for i, n := range g.order {
		g.index[n] = i
	}
	return nil
}

// findCycle walks parent edges among the nodes Kahn could not order (all of
// which lie on or behind a cycle) until a node repeats. Starting from the
// smallest such node and following the smallest remaining parent makes the
// reported cycle deterministic.
func (g *Graph) findCycle(indeg map[string]int) []string {
	stuck := func(n string) bool { return indeg[n] > 0 }
	var start string
	for _, n := range g.nodes {
		if stuck(n) {
			start = n
			break
		}
	}
	seen := map[string]int{}
	var path []string
	n := start
	for {
		if i, ok := seen[n]; ok {
			cyc := slices.Clone(path[i:])
			slices.Reverse(cyc) // parent walk is backwards; present parent -> child
			// Rotate so the cycle starts at its smallest name: the same
			// cycle always reads the same way.
			m := slices.Index(cyc, slices.Min(cyc))
			cyc = append(cyc[m:], cyc[:m]...)
			return append(cyc, cyc[0])
		}
		seen[n] = len(path)
		path = append(path, n)
		for _, p := range g.parents[n] {
			if stuck(p) {
				n = p
				break
			}
		}
	}
}

// Nodes returns every node, sorted by name.
func (g *Graph) Nodes() []string { return slices.Clone(g.nodes) }

// Order returns every node in topological order: each node after all of its
// parents, ties broken by name.
func (g *Graph) Order() []string { return slices.Clone(g.order) }

// Has reports whether n is a node.
func (g *Graph) Has(n string) bool { _, ok := g.parents[n]; return ok }

// Parents returns n's direct parents, sorted.
func (g *Graph) Parents(n string) []string { return slices.Clone(g.parents[n]) }

// Children returns n's direct children, sorted.
func (g *Graph) Children(n string) []string { return slices.Clone(g.children[n]) }

// Upstream returns every transitive parent of the given nodes (excluding the
// nodes themselves unless one is upstream of another), in topological order.
func (g *Graph) Upstream(ns ...string) []string { return g.closure(ns, g.parents) }

// Downstream returns every transitive child of the given nodes (excluding
// the nodes themselves unless one is downstream of another), in topological
// order.
func (g *Graph) Downstream(ns ...string) []string { return g.closure(ns, g.children) }

func (g *Graph) closure(start []string, next map[string][]string) []string {
	seen := map[string]bool{}
	stack := []string{}
	for _, n := range start {
		stack = append(stack, next[n]...)
	}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[n] {
			continue
		}
		seen[n] = true
		stack = append(stack, next[n]...)
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	g.SortTopo(out)
	return out
}

// SortTopo sorts names in place into topological order. Names that are not
// nodes sort last, by name.
func (g *Graph) SortTopo(names []string) {
	slices.SortFunc(names, func(a, b string) int {
		ia, oka := g.index[a]
		ib, okb := g.index[b]
		switch {
		case oka && okb:
			return ia - ib
		case oka:
			return -1
		case okb:
			return 1
		default:
			return strings.Compare(a, b)
		}
	})
}

type nameHeap []string

func (h nameHeap) Len() int           { return len(h) }
func (h nameHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h nameHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *nameHeap) Push(x any)        { *h = append(*h, x.(string)) }
func (h *nameHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
