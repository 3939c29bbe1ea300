package janitor

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

// The janitor's decisions: pure functions of what one read of state
// returned, with no store and no warehouse. The executor (janitor.go)
// reads, asks them, and carries out their answer. The snapshot_ttl rule is
// RetainUnserved.

// expired reports whether e is to be removed at exec: invalidated, or past
// its expiry (ExpiresAt at or before exec). prod never expires.
func expired(e *state.Environment, exec time.Time) bool {
	if e.Name == plan.Prod {
		return false
	}
	pastExpiry := !e.ExpiresAt.IsZero() && !e.ExpiresAt.After(exec)
	return e.Invalidated || pastExpiry
}

// removal is what removing environment e takes down, given served, the
// snapshots it serves by model name (each of e.Snapshots present): its
// views, in e's snapshot order (by name), none for an EXTERNAL model
// (gapless made no view of it), and the snapshots that stop being served.
func removal(e *state.Environment, served map[string]*snapshot.Snapshot) (removedEnv, []*snapshot.Snapshot) {
	r := removedEnv{name: e.Name}
	retiring := make([]*snapshot.Snapshot, 0, len(e.Snapshots))
	for _, ref := range e.Snapshots {
		s := served[ref.Name]
		retiring = append(retiring, s)
		if s.Model.Kind != model.KindExternal {
			r.views = append(r.views, execute.ViewTable(s, e.Name))
		}
	}
	return r, retiring
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

// candidateVersions returns the distinct versions of the candidate
// snapshots, sorted (state.SortVersionKeys).
func candidateVersions(candidates map[state.SnapshotKey]*snapshot.Snapshot) []state.VersionKey {
	seen := map[state.VersionKey]bool{}
	out := make([]state.VersionKey, 0, len(candidates))
	for _, s := range candidates {
		k := state.VersionKey{Name: s.Name, Version: s.Version}
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	state.SortVersionKeys(out)
	return out
}

// retireInput is what one read of state says about the versions the
// janitor may retire.
type retireInput struct {
	// Candidates are the snapshots that may be retired: those the removed
	// environments served and those of every saved plan not in flight.
	Candidates map[state.SnapshotKey]*snapshot.Snapshot
	// ServedVersions and ServedSnaps are what the live environments serve.
	ServedVersions map[state.VersionKey]bool
	ServedSnaps    map[state.SnapshotKey]bool
	// InFlightVersions and InFlightSnaps are what the plans in flight
	// reference.
	InFlightVersions map[state.VersionKey]bool
	InFlightSnaps    map[state.SnapshotKey]bool
	// LastServed is state.Store.LastServed of the candidates' versions;
	// LastPlanned the last activity of the latest plan, not in flight,
	// that references each.
	LastServed  map[state.VersionKey]time.Time
	LastPlanned map[state.VersionKey]time.Time
	// RemovedNow are the versions of the environments removed in this
	// pass: they stopped being served at Exec (a dry run has not recorded
	// it).
	RemovedNow  map[state.VersionKey]bool
	SnapshotTTL time.Duration
	Exec        time.Time
}

// tableDrop is a version whose table the janitor drops, with its intervals.
type tableDrop struct {
	Key   state.VersionKey
	Kind  model.Kind
	Table warehouse.Table
}

// tableRetained is a version kept by snapshot_ttl, with its table.
type tableRetained struct {
	Retained
	Table warehouse.Table
}

// retirement is what the janitor retires, and what it keeps and why.
type retirement struct {
	// Drop: one per version nothing uses and whose snapshot_ttl has
	// passed, in the order of the candidates' names and fingerprints;
	// never an EXTERNAL model's (gapless has no table of it).
	Drop []tableDrop
	// DeadSnapshots are the candidate snapshots nothing serves, no plan in
	// flight references and snapshot_ttl does not keep, in the same order.
	DeadSnapshots []state.SnapshotKey
	// Retain are the versions snapshot_ttl keeps (RetainUnserved's
	// keep, in its order), EXTERNAL models left out.
	Retain []tableRetained
}

// retire decides which candidate versions are dropped and which are kept
// (see RetainUnserved, the snapshot_ttl rule): a version a live
// environment serves or a plan in flight references is never dropped, nor
// one used within the TTL.
func retire(in retireInput) retirement {
	versions := candidateVersions(in.Candidates)
	uses := make([]VersionUse, 0, len(versions))
	for _, k := range versions {
		u := VersionUse{Key: k, Served: in.ServedVersions[k], InFlight: in.InFlightVersions[k],
			LastServed: in.LastServed[k], LastPlanned: in.LastPlanned[k]}
		if in.RemovedNow[k] && in.Exec.After(u.LastServed) {
			u.LastServed = in.Exec // removed now (a dry run has not recorded it)
		}
		uses = append(uses, u)
	}
	drop, keep := RetainUnserved(uses, in.SnapshotTTL, in.Exec)
	expired := make(map[state.VersionKey]bool, len(drop))
	for _, k := range drop {
		expired[k] = true
	}
	retained := make(map[state.VersionKey]bool, len(keep))
	for _, r := range keep {
		retained[r.Key] = true
	}

	var out retirement
	keys := make([]state.SnapshotKey, 0, len(in.Candidates))
	for k := range in.Candidates {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b state.SnapshotKey) int {
		return cmp.Compare(a.Name+"@"+a.Fingerprint, b.Name+"@"+b.Fingerprint)
	})
	dropped := map[state.VersionKey]bool{}
	retainedTables := map[state.VersionKey]warehouse.Table{}
	for _, k := range keys {
		s := in.Candidates[k]
		vk := state.VersionKey{Name: s.Name, Version: s.Version}
		if !in.ServedSnaps[k] && !in.InFlightSnaps[k] && !retained[vk] {
			out.DeadSnapshots = append(out.DeadSnapshots, k)
		}
		if retained[vk] && s.Model.Kind != model.KindExternal {
			retainedTables[vk] = execute.PhysicalTable(s)
		}
		if !expired[vk] || dropped[vk] || s.Model.Kind == model.KindExternal {
			continue
		}
		dropped[vk] = true
		out.Drop = append(out.Drop, tableDrop{Key: vk, Kind: s.Model.Kind, Table: execute.PhysicalTable(s)})
	}
	for _, r := range keep {
		if t, ok := retainedTables[r.Key]; ok {
			out.Retain = append(out.Retain, tableRetained{Retained: r, Table: t})
		}
	}
	return out
}

// pruneInput is what one read of state says about the saved plans the
// janitor may prune.
type pruneInput struct {
	// Plans are the decodable saved plans, their snapshots resolved.
	Plans []*planUse
	// Live are the environments that remain.
	Live []*state.Environment
	// ServedSnaps are the snapshots Live serve; DeadSnaps those retire
	// found dead (nothing serves them, no plan in flight references them,
	// snapshot_ttl keeps nothing of them).
	ServedSnaps map[state.SnapshotKey]bool
	DeadSnaps   []state.SnapshotKey
	Exec        time.Time
	Grace       time.Duration
}

// prunePlans decides which saved plans the janitor deletes, sorted, and
// returns the snapshot keys the plans it keeps name.
//
// Invariants: a plan is pruned only when
//   - no live environment serves it or served it before (its PlanID or
//     PreviousPlanID: a rollback reads the previous plan);
//   - its last activity (creation, or any record of its application) is
//     older than Grace, so a plan saved and not yet applied, or one being
//     applied, within the grace period is kept;
//   - every snapshot it names is served by a live environment or dead: a
//     snapshot that stopped being served and that snapshot_ttl keeps is
//     found by the janitor through the saved plans that name it, so they
//     stay until it is dropped (a served one is named by the plan that
//     serves it, which is kept);
//   - no kept plan is stored as a change of it, directly or through other
//     plans (plan.StoredFormat): a kept plan is read through its chain.
//
// The snapshots the kept plans name are never deleted, so a kept plan
// always resolves every snapshot key it names.
func prunePlans(in pruneInput) (prune []string, named map[state.SnapshotKey]bool) {
	pinned := map[string]bool{}
	for _, e := range in.Live {
		pinned[e.PlanID] = true
		if e.PreviousPlanID != "" {
			pinned[e.PreviousPlanID] = true
		}
	}
	dead := make(map[state.SnapshotKey]bool, len(in.DeadSnaps))
	for _, k := range in.DeadSnaps {
		dead[k] = true
	}
	cutoff := in.Exec.Add(-in.Grace)
	byID := make(map[string]*planUse, len(in.Plans))
	kept := map[string]bool{}
	for _, pu := range in.Plans {
		byID[pu.id] = pu
		tracked := func(k state.SnapshotKey) bool { return !in.ServedSnaps[k] && !dead[k] }
		if pinned[pu.id] || pu.active || !pu.last.Before(cutoff) || slices.ContainsFunc(pu.plan.SnapshotKeys(), tracked) {
			kept[pu.id] = true
		}
	}
	// A kept stored plan is read through its chain: every plan of it stays.
	for _, pu := range in.Plans {
		if !kept[pu.id] {
			continue
		}
		base := pu.base
		for steps := 0; base != "" && byID[base] != nil && steps <= plan.MaxChain; steps++ {
			kept[base] = true
			base = byID[base].base
		}
	}
	named = map[state.SnapshotKey]bool{}
	prune = []string{}
	for _, pu := range in.Plans {
		if !kept[pu.id] {
			prune = append(prune, pu.id)
			continue
		}
		for _, k := range pu.plan.SnapshotKeys() {
			named[k] = true
		}
	}
	slices.Sort(prune)
	return prune, named
}
