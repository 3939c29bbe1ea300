package plan

import (
	"fmt"

	"github.com/gapless-dev/gapless/dag"
	"github.com/gapless-dev/gapless/snapshot"
)

// Select restricts the next state of a plan to the selected models
// (`plan --select-model`) and their upstream models.
//
// Invariant: every model outside the selection keeps the snapshot base
// serves (a change to it waits for a later plan), a new model that is not
// selected is left out, and a model base serves that the project no longer
// has stays served. Without a selection it returns project and graph as
// they are.
func Select(project map[string]*snapshot.Snapshot, graph *dag.Graph, base map[string]*snapshot.Snapshot, selected []string) (map[string]*snapshot.Snapshot, *dag.Graph, error) {
	if len(selected) == 0 {
		return project, graph, nil
	}
	take := map[string]bool{}
	for _, n := range append(graph.Upstream(selected...), selected...) {
		take[n] = true
	}
	next := map[string]*snapshot.Snapshot{}
	edges := map[string][]string{}
	keep := func(s *snapshot.Snapshot) {
		next[s.Name] = s
		edges[s.Name] = s.Parents
	}
	for name, s := range project {
		if take[name] {
			keep(s)
		} else if b, ok := base[name]; ok {
			keep(b)
		}
	}
	for name, b := range base {
		if _, ok := next[name]; !ok {
			keep(b) // removed from the project but not selected: still served
		}
	}
	g, err := dag.New(edges)
	if err != nil {
		return nil, nil, fmt.Errorf("--select-model: %w", err)
	}
	return next, g, nil
}
