package janitor

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/state"
)

// The janitor's decisions: pure functions of what one read of state
// returned, with no store and no warehouse. The executor (janitor.go)
// reads, asks them, and carries out their answer. The snapshot_ttl rule is
// state.RetainUnserved.

// expired reports whether e is to be removed at exec: invalidated, or past
// its expiry (ExpiresAt at or before exec). prod never expires.
func expired(e *state.Environment, exec time.Time) bool {
	if e.Name == plan.Prod {
		return false
	}
	pastExpiry := !e.ExpiresAt.IsZero() && !e.ExpiresAt.After(exec)
	return e.Invalidated || pastExpiry
}

// openRemovals returns the janitor's removals whose views were never
// dropped (an earlier janitor stopped between deleting the environment's
// row and dropping its views), oldest first: among evs (in id order), the
// environment_removing events without their environment_views_dropped.
// Events of other kinds are ignored.
func openRemovals(evs []state.Event) ([]removedEnv, error) {
	closed := map[int64]bool{}
	for _, e := range evs {
		if e.Kind != state.EventEnvironmentViewsDropped {
			continue
		}
		var d removalData
		if err := json.Unmarshal(e.Data, &d); err != nil {
			return nil, fmt.Errorf("janitor: event %d: %w", e.ID, err)
		}
		closed[d.Removing] = true
	}
	var out []removedEnv
	for _, e := range evs {
		if e.Kind != state.EventEnvironmentRemoving || closed[e.ID] {
			continue
		}
		var d removalData
		if err := json.Unmarshal(e.Data, &d); err != nil {
			return nil, fmt.Errorf("janitor: event %d: %w", e.ID, err)
		}
		out = append(out, removedEnv{name: e.Environment, views: d.Views, removing: e.ID})
	}
	return out, nil
}

// planActivity decides from a saved plan's creation time and application
// history (in order) whether its application may still be running at exec
// (active) and when it was last active. last is the latest of created and
// every record's time. The application is over once its finalize stage
// finished or a stage recorded it ended (apply.StatusEnded: the plan was
// refused), unless a stage started after that (the plan was applied
// again); it is active if it is not over and last is within grace of exec.
func planActivity(created time.Time, apps []state.Application, exec time.Time, grace time.Duration) (active bool, last time.Time) {
	last = created
	over := false
	for _, a := range apps {
		if a.At.After(last) {
			last = a.At
		}
		switch {
		case a.Status == apply.StatusEnded,
			a.Stage == string(apply.StageFinalize) && a.Status == apply.StatusFinished:
			over = true
		case a.Status == apply.StatusStarted:
			over = false
		}
	}
	return !over && exec.Sub(last) < grace, last
}

// inUse is what the live environments envs use: the versions and
// snapshots they serve, and the view and physical schemas they use, each
// mapped to the environment that uses it.
func inUse(envs []*state.Environment) (versions map[state.VersionKey]bool, snaps map[state.SnapshotKey]bool, schemas map[string]string) {
	versions = map[state.VersionKey]bool{}
	snaps = map[state.SnapshotKey]bool{}
	schemas = map[string]string{}
	for _, e := range envs {
		for _, r := range e.Snapshots {
			versions[r.VersionKey()] = true
			snaps[r.Key()] = true
			schema := (&model.Model{Name: r.Name}).Schema()
			schemas[execute.ViewSchema(schema, e.Name)] = e.Name
			schemas["gapless__"+schema] = e.Name
		}
	}
	return versions, snaps, schemas
}

// sameGenerations reports whether a and b list the same environments at the
// same generations, in the same order: nothing was promoted between the two
// reads.
func sameGenerations(a, b []*state.Environment) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Generation != b[i].Generation {
			return false
		}
	}
	return true
}

// sortedKeys returns the non-empty keys of m, sorted.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		if k != "" {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
