package janitor

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

var t0 = time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)

// Scenario: an environment is removed once invalidated or once exec has
// reached its expiry (the instant itself included), never before, never
// one without an expiry, and never prod, even invalidated or past an
// expiry.
func TestExpired(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  state.Environment
		want bool
	}{
		{"no expiry", state.Environment{Name: "dev"}, false},
		{"before its expiry", state.Environment{Name: "dev", ExpiresAt: t0.Add(time.Second)}, false},
		{"at its expiry", state.Environment{Name: "dev", ExpiresAt: t0}, true},
		{"past its expiry", state.Environment{Name: "dev", ExpiresAt: t0.Add(-time.Hour)}, true},
		{"invalidated", state.Environment{Name: "dev", Invalidated: true, ExpiresAt: t0.Add(time.Hour)}, true},
		{"prod past an expiry", state.Environment{Name: "prod", ExpiresAt: t0.Add(-time.Hour)}, false},
		{"prod invalidated", state.Environment{Name: "prod", Invalidated: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, expired(&tc.env, t0))
		})
	}
}

func removalEvent(t *testing.T, id int64, kind, env string, d removalData) state.Event {
	t.Helper()
	raw, err := json.Marshal(d)
	require.NoError(t, err)
	return state.Event{ID: id, Kind: kind, Environment: env, Data: raw}
}

// Scenario: three removals were started (dev, qa, dev again); dev's first
// and qa's views were dropped, the second removal of dev was not (a janitor
// stopped half-way). Only that one is open, with the views it listed and
// its event id; other event kinds are ignored, and an event whose data is
// not JSON is an error naming it.
func TestOpenRemovals(t *testing.T) {
	t.Parallel()
	views := []warehouse.Table{{Schema: "demo__dev", Name: "daily"}}
	evs := []state.Event{
		removalEvent(t, 1, state.EventEnvironmentRemoving, "dev", removalData{Generation: 1}),
		removalEvent(t, 2, state.EventEnvironmentRemoving, "qa", removalData{Generation: 3}),
		removalEvent(t, 3, state.EventEnvironmentViewsDropped, "dev", removalData{Removing: 1, Outcome: "dropped"}),
		{ID: 4, Kind: state.EventGapSuperseded, Environment: "dev", Data: json.RawMessage(`{}`)},
		removalEvent(t, 5, state.EventEnvironmentViewsDropped, "qa", removalData{Removing: 2, Outcome: "created again"}),
		removalEvent(t, 6, state.EventEnvironmentRemoving, "dev", removalData{Generation: 2, Views: views}),
	}
	got, err := openRemovals(evs)
	require.NoError(t, err)
	require.Equal(t, []removedEnv{{name: "dev", views: views, removing: 6}}, got)

	none, err := openRemovals(evs[:3])
	require.NoError(t, err)
	require.Equal(t, []removedEnv{{name: "qa", removing: 2}}, none)

	_, err = openRemovals([]state.Event{{ID: 9, Kind: state.EventEnvironmentRemoving, Data: json.RawMessage(`{`)}})
	require.ErrorContains(t, err, "event 9")
}

// Scenario: a saved plan's application is in flight while it is not over
// and was active within the grace period; it is over once finalize
// finished or a stage ended it (refused), unless a stage started again
// after that; its last activity is the latest record, or its creation.
func TestPlanActivity(t *testing.T) {
	t.Parallel()
	grace := 24 * time.Hour
	rec := func(h int, stage apply.Stage, status string) state.Application {
		return state.Application{Stage: string(stage), Status: status, At: t0.Add(time.Duration(h) * time.Hour)}
	}
	for _, tc := range []struct {
		name       string
		apps       []state.Application
		exec       time.Time
		wantActive bool
		wantLast   time.Time
	}{
		{"saved, nothing recorded, within grace", nil, t0.Add(time.Hour), true, t0},
		{"saved, nothing recorded, grace passed", nil, t0.Add(grace), false, t0},
		{"backfilling", []state.Application{rec(1, apply.StageRecordSnapshots, apply.StatusFinished), rec(2, apply.StageBackfill, apply.StatusStarted)},
			t0.Add(3 * time.Hour), true, t0.Add(2 * time.Hour)},
		{"finalized", []state.Application{rec(1, apply.StageFinalize, apply.StatusStarted), rec(2, apply.StageFinalize, apply.StatusFinished)},
			t0.Add(3 * time.Hour), false, t0.Add(2 * time.Hour)},
		{"refused", []state.Application{rec(1, apply.StageCheck, apply.StatusStarted), rec(2, apply.StageCheck, apply.StatusEnded)},
			t0.Add(3 * time.Hour), false, t0.Add(2 * time.Hour)},
		{"applied again after a refusal", []state.Application{rec(1, apply.StageCheck, apply.StatusEnded), rec(5, apply.StageCheck, apply.StatusStarted)},
			t0.Add(6 * time.Hour), true, t0.Add(5 * time.Hour)},
		{"stalled past grace", []state.Application{rec(1, apply.StageBackfill, apply.StatusStarted)},
			t0.Add(time.Hour + grace), false, t0.Add(time.Hour)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			active, last := planActivity(t0, tc.apps, tc.exec, grace)
			require.Equal(t, tc.wantActive, active)
			require.Equal(t, tc.wantLast, last)
		})
	}
}

// Scenario: prod serves demo.a@v1 and dev serves demo.a@v2: both versions
// and snapshots are in use, dev's view schema demo__dev by dev, prod's
// (demo) and the physical schema gapless__demo by one of them.
func TestInUse(t *testing.T) {
	t.Parallel()
	a1 := state.SnapshotRef{Name: "demo.a", Fingerprint: "f1", Version: "v1"}
	a2 := state.SnapshotRef{Name: "demo.a", Fingerprint: "f2", Version: "v2"}
	versions, snaps, schemas := inUse([]*state.Environment{
		{Name: "dev", Snapshots: []state.SnapshotRef{a2}},
		{Name: "prod", Snapshots: []state.SnapshotRef{a1}},
	})
	require.Equal(t, map[state.VersionKey]bool{a1.VersionKey(): true, a2.VersionKey(): true}, versions)
	require.Equal(t, map[state.SnapshotKey]bool{a1.Key(): true, a2.Key(): true}, snaps)
	require.Equal(t, "dev", schemas["demo__dev"])
	require.Equal(t, "prod", schemas["demo"])
	require.Contains(t, schemas, "gapless__demo")
	require.Len(t, schemas, 3)
}

// Scenario: two reads of the environments are the same only if they list
// the same names at the same generations.
func TestSameGenerations(t *testing.T) {
	t.Parallel()
	a := []*state.Environment{{Name: "dev", Generation: 2}, {Name: "prod", Generation: 5}}
	require.True(t, sameGenerations(a, []*state.Environment{{Name: "dev", Generation: 2}, {Name: "prod", Generation: 5}}))
	require.False(t, sameGenerations(a, []*state.Environment{{Name: "dev", Generation: 3}, {Name: "prod", Generation: 5}}))
	require.False(t, sameGenerations(a, []*state.Environment{{Name: "qa", Generation: 2}, {Name: "prod", Generation: 5}}))
	require.False(t, sameGenerations(a, a[:1]))
}

// snap is a snapshot of model name at version, of kind k; fp tells two
// snapshots of one version apart.
func snap(name, version, fp string, k model.Kind) *snapshot.Snapshot {
	return &snapshot.Snapshot{Name: name, Version: version, Fingerprint: snapshot.Fingerprint{DataHash: version, MetadataHash: fp},
		Model: &model.Model{Name: name, Kind: k}}
}

// Scenario: the candidates are five versions of demo models and one
// EXTERNAL model's, with snapshot_ttl 1h at 12:00:
//   - demo.served@v1 is served: kept, its snapshot too, and not reported
//     retained;
//   - demo.inflight@v1 is referenced by a plan in flight: kept likewise;
//   - demo.recent@v1 stopped being served at 11:30: retained until 12:30,
//     with its table;
//   - demo.old@v1, two snapshots of one version, stopped being served at
//     09:00: its table is dropped once, both snapshots are dead;
//   - demo.removed@v1 belonged to an environment removed in this pass (at
//     12:00, its recorded last-served time older): retained, unused since
//     12:00;
//   - ext.src@v1, EXTERNAL, unused for long: never a table to drop, but its
//     snapshot is dead.
func TestRetire(t *testing.T) {
	t.Parallel()
	exec := t0.Add(12 * time.Hour)
	served, inflight := snap("demo.served", "v1", "a", model.KindFull), snap("demo.inflight", "v1", "a", model.KindFull)
	recent := snap("demo.recent", "v1", "a", model.KindView)
	old1, old2 := snap("demo.old", "v1", "a", model.KindFull), snap("demo.old", "v1", "b", model.KindFull)
	removed, ext := snap("demo.removed", "v1", "a", model.KindFull), snap("ext.src", "v1", "a", model.KindExternal)
	vk := func(s *snapshot.Snapshot) state.VersionKey { return state.VersionKey{Name: s.Name, Version: s.Version} }
	candidates := map[state.SnapshotKey]*snapshot.Snapshot{}
	for _, s := range []*snapshot.Snapshot{served, inflight, recent, old1, old2, removed, ext} {
		candidates[state.KeyOf(s)] = s
	}
	got := retire(retireInput{
		Candidates:       candidates,
		ServedVersions:   map[state.VersionKey]bool{vk(served): true},
		ServedSnaps:      map[state.SnapshotKey]bool{state.KeyOf(served): true},
		InFlightVersions: map[state.VersionKey]bool{vk(inflight): true},
		InFlightSnaps:    map[state.SnapshotKey]bool{state.KeyOf(inflight): true},
		LastServed: map[state.VersionKey]time.Time{vk(recent): t0.Add(11*time.Hour + 30*time.Minute),
			vk(old1): t0.Add(9 * time.Hour), vk(removed): t0.Add(time.Hour), vk(ext): t0},
		RemovedNow:  map[state.VersionKey]bool{vk(removed): true},
		SnapshotTTL: time.Hour,
		Exec:        exec,
	})
	require.Equal(t, []tableDrop{{Key: vk(old1), Kind: model.KindFull, Table: execute.PhysicalTable(old1)}}, got.Drop)
	wantDead := []state.SnapshotKey{state.KeyOf(old1), state.KeyOf(old2), state.KeyOf(ext)}
	require.ElementsMatch(t, wantDead, got.DeadSnapshots)
	require.Len(t, got.Retain, 2)
	byName := map[string]tableRetained{}
	for _, r := range got.Retain {
		byName[r.Key.Name] = r
	}
	require.Equal(t, execute.PhysicalTable(recent), byName["demo.recent"].Table)
	require.Equal(t, t0.Add(11*time.Hour+30*time.Minute), byName["demo.recent"].UnusedSince)
	require.Equal(t, t0.Add(12*time.Hour+30*time.Minute), byName["demo.recent"].ExpiresAt)
	require.Equal(t, exec, byName["demo.removed"].UnusedSince, "removed in this pass: unused since now")

	// The same candidates with snapshot_ttl 0: everything unused goes,
	// the removed environment's version included; served and in-flight
	// versions stay.
	none := retire(retireInput{Candidates: candidates, ServedVersions: map[state.VersionKey]bool{vk(served): true},
		ServedSnaps: map[state.SnapshotKey]bool{state.KeyOf(served): true}, InFlightVersions: map[state.VersionKey]bool{vk(inflight): true},
		InFlightSnaps: map[state.SnapshotKey]bool{state.KeyOf(inflight): true}, RemovedNow: map[state.VersionKey]bool{vk(removed): true},
		Exec: exec})
	var dropped []string
	for _, d := range none.Drop {
		dropped = append(dropped, d.Key.Name)
	}
	require.ElementsMatch(t, []string{"demo.recent", "demo.old", "demo.removed"}, dropped)
	require.Empty(t, none.Retain)
	require.Equal(t, model.KindView, none.Drop[slices.IndexFunc(none.Drop, func(d tableDrop) bool { return d.Key.Name == "demo.recent" })].Kind)
}

// Scenario: dev serves demo.a, demo.b and the EXTERNAL ext.src. Removing
// it takes down dev's views of demo.a and demo.b, in name order, in dev's
// view schema demo__dev, and no view of ext.src; all three snapshots stop
// being served.
func TestRemoval(t *testing.T) {
	t.Parallel()
	a, bb, ext := snap("demo.a", "v1", "a", model.KindFull), snap("demo.b", "v2", "a", model.KindView),
		snap("ext.src", "v1", "a", model.KindExternal)
	e := &state.Environment{Name: "dev", Snapshots: []state.SnapshotRef{
		{Name: "demo.a", Version: "v1"}, {Name: "demo.b", Version: "v2"}, {Name: "ext.src", Version: "v1"}}}
	r, retiring := removal(e, map[string]*snapshot.Snapshot{"demo.a": a, "demo.b": bb, "ext.src": ext})
	require.Equal(t, "dev", r.name)
	require.Equal(t, []warehouse.Table{{Schema: "demo__dev", Name: "a"}, {Schema: "demo__dev", Name: "b"}}, r.views)
	require.Zero(t, r.removing)
	require.Equal(t, []*snapshot.Snapshot{a, bb, ext}, retiring)
}

// Scenario: six saved plans, the grace 24 h. prod serves p-cur after
// p-prev; p-old and p-dead are finished and older than the grace, p-old
// naming only what prod serves and p-dead also a snapshot retire found
// dead; p-kept names a snapshot that is neither served nor dead (a
// version snapshot_ttl keeps); p-recent was last active an hour ago and
// p-busy is in flight. Only p-dead and p-old are pruned, and the kept
// plans' snapshots are named, the dead one only if a kept plan names it.
// A plan a kept one is stored as a change of, directly or not, is kept.
func TestPrunePlans(t *testing.T) {
	t.Parallel()
	snap := func(name, fp string) *snapshot.Snapshot {
		return &snapshot.Snapshot{Name: name, Version: fp, Fingerprint: snapshot.Fingerprint{DataHash: fp}, Model: &model.Model{Name: name}}
	}
	served, dead, retained := snap("demo.a", "1"), snap("demo.a", "0"), snap("demo.b", "0")
	exec := t0.Add(48 * time.Hour)
	use := func(id string, last time.Time, active bool, snaps ...*snapshot.Snapshot) *planUse {
		return &planUse{id: id, plan: &plan.Plan{ID: id, Snapshots: snaps}, active: active, last: last}
	}
	in := pruneInput{
		Plans: []*planUse{
			use("p-cur", t0, false, served), use("p-prev", t0, false, dead),
			use("p-old", t0, false, served), use("p-dead", t0, false, served, dead),
			use("p-kept", t0, false, served, retained),
			use("p-recent", exec.Add(-time.Hour), false, dead), use("p-busy", exec.Add(-2*time.Hour), true, served),
		},
		Live:        []*state.Environment{{Name: "prod", PlanID: "p-cur", PreviousPlanID: "p-prev"}},
		ServedSnaps: map[state.SnapshotKey]bool{state.KeyOf(served): true},
		DeadSnaps:   []state.SnapshotKey{state.KeyOf(dead)},
		Exec:        exec, Grace: 24 * time.Hour,
	}
	prune, named := prunePlans(in)
	require.Equal(t, []string{"p-dead", "p-old"}, prune)
	require.Equal(t, map[state.SnapshotKey]bool{state.KeyOf(served): true, state.KeyOf(dead): true, state.KeyOf(retained): true}, named)

	// p-old and p-dead go unless a kept plan is stored as a change of
	// them: p-kept of p-dead, itself a change of p-old.
	in.Plans[4].base, in.Plans[3].base = "p-dead", "p-old"
	prune, _ = prunePlans(in)
	require.Empty(t, prune)
	in.Plans[4].base, in.Plans[3].base = "", ""

	// Once p-prev and p-recent are gone, nothing kept names the dead
	// snapshot.
	in.Plans = slices.DeleteFunc(in.Plans, func(u *planUse) bool { return u.id == "p-prev" || u.id == "p-recent" })
	_, named = prunePlans(in)
	require.False(t, named[state.KeyOf(dead)])
}
