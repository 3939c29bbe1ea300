// Package janitor removes what no environment needs any more: the tables
// and markers of retired source generations, expired and invalidated
// environments (their state, views and view schemas), then the tables,
// intervals and snapshots of versions nothing serves once their
// snapshot_ttl has passed, and last the saved plans nothing needs any more
// (prunePlans).
//
// It is split as a reconcile from its apply: decide.go (and retain.go, the
// snapshot_ttl rule) holds the pure decisions (which environment is expired, which removals an earlier pass
// left half-done, what removing an environment takes down, whether a saved
// plan is still in flight, what the live environments use, and, in retire,
// which versions are dropped, retained by snapshot_ttl or dead), plain
// functions over plain data tested without a store; janitor.go is the
// executor that reads state, asks them, and carries out what they decide.
package janitor

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/gapless-dev/gapless/backend"
	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

// DefaultGrace is how long after its last recorded activity a plan
// whose application has not finished keeps every version it references
// (gapless janitor --grace). Every plan saved within it is considered, promoted or
// not: apply saves the plan in its first stage, before it builds anything.
const DefaultGrace = 24 * time.Hour

// Report is what one janitor pass removed (or, with --dry-run, would
// remove); its JSON form is stable: every list is present, possibly empty.
type Report struct {
	DryRun bool `json:"dry_run"`
	// Environments removed: expired or invalidated, never prod.
	Environments []string `json:"environments"`
	// Views of the removed environments.
	Views []string `json:"views"`
	// Schemas dropped: the removed environments' view schemas
	// (<schema>__<env>) and physical schemas (gapless__<schema>) left
	// empty.
	Schemas []string `json:"schemas"`
	// KeptSchemas are schemas of removed environments or retired versions
	// that were not dropped, with why (never a schema holding anything
	// gapless did not create for what it removed).
	KeptSchemas []KeptSchema `json:"kept_schemas"`
	// Tables are the physical tables (or views, for VIEW models) dropped.
	Tables []string `json:"tables"`
	// Versions whose intervals were deleted with their tables.
	Versions []state.VersionKey `json:"versions"`
	// Snapshots is how many snapshot records were deleted.
	Snapshots int `json:"snapshots"`
	// InFlight names the plans whose application has not finished and was
	// active within the grace period, promoted or not: every version they
	// reference is kept.
	InFlight []string `json:"in_flight_plans"`
	// Retained are the versions no environment serves and no plan in
	// flight references that are kept because their snapshot_ttl has not
	// passed since they were last used: a revert finds their tables and
	// intervals.
	Retained []RetainedVersion `json:"retained"`
	// PrunedPlans are the saved plans deleted (see prunePlans): finished,
	// inactive for --grace, neither served nor an environment's previous
	// plan, and naming no snapshot that is kept unserved.
	PrunedPlans []string `json:"pruned_plans"`
	// Skipped names environments left alone because they were promoted
	// while the janitor ran.
	Skipped []string `json:"skipped,omitempty"`
	// Resumed names environments an earlier janitor removed without
	// dropping their views (it stopped half-way); this one dropped them.
	Resumed []string `json:"resumed,omitempty"`
	// SourceTables are the tables of retired source generations dropped
	// (gapless__raw.<schema>__<table>__g<N>), SourceMarkers how many of
	// their markers in gapless__ingest were deleted with them.
	SourceTables  []string `json:"source_tables"`
	SourceMarkers int64    `json:"source_markers"`
	// KeptGenerations are retired source generations kept: retired within
	// --grace, or still named by the warehouse fence.
	KeptGenerations []KeptGeneration `json:"kept_generations"`
}

// RetainedVersion is a version kept by snapshot_ttl.
type RetainedVersion struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Table   string `json:"table"`
	// UnusedSince is when it was last used: the promotion (or environment
	// removal) that stopped serving it, or the last activity of a plan
	// that references it, whichever is later.
	UnusedSince time.Time `json:"unused_since"`
	// ExpiresAt is when the janitor may drop it; absent under
	// snapshot_ttl: never.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

// KeptSchema is a schema the janitor left in place, and why.
type KeptSchema struct {
	Schema string `json:"schema"`
	Reason string `json:"reason"`
}

// Options configure one janitor pass.
type Options struct {
	// Log receives the pass's records (nil: discarded).
	Log *slog.Logger
	// DryRun computes everything and changes nothing.
	DryRun bool
	// Grace: see DefaultGrace.
	Grace time.Duration
	// SnapshotTTL is how long a version no environment serves is kept
	// after it was last used (snapshot_ttl; see RetainUnserved): 0
	// drops it at once, Forever never.
	SnapshotTTL time.Duration
	// BeforeRemove, when set, runs after the janitor read environment e and
	// decided to remove it, before the generation-pinned removal (tests).
	BeforeRemove func(ctx context.Context, e *state.Environment) error
	// AfterRemove, when set, runs right after environment e's row was
	// deleted, before its views are dropped (tests: an error there is a
	// janitor that stopped half-way).
	AfterRemove func(ctx context.Context, e *state.Environment) error
}

// executor carries out one pass.
type executor struct {
	log *slog.Logger
}

// removedEnv is an environment the janitor removed (or would remove) and
// the views it served.
type removedEnv struct {
	name  string
	views []warehouse.Table
	// removing is the id of the environment_removing event that listed
	// the views (0 in a dry run); dropping them appends its
	// environment_views_dropped event.
	removing int64
}

// removalData is the Data of environment_removing and
// environment_views_dropped events.
type removalData struct {
	Generation int64             `json:"generation,omitempty"`
	Views      []warehouse.Table `json:"views,omitempty"`
	// Removing is, on environment_views_dropped, the id of the
	// environment_removing event it closes.
	Removing int64 `json:"removing,omitempty"`
	// Outcome is, on environment_views_dropped, "dropped" or why the views
	// were left ("created again").
	Outcome string `json:"outcome,omitempty"`
}

// interruptedRemovals reads the janitor's removal events and returns the
// removals an earlier janitor left half-done (see openRemovals).
func interruptedRemovals(ctx context.Context, st state.Store) ([]removedEnv, error) {
	evs, err := st.ListEvents(ctx, state.EventFilter{Kinds: []string{state.EventEnvironmentRemoving, state.EventEnvironmentViewsDropped}})
	if err != nil {
		return nil, fmt.Errorf("janitor: reading earlier removals: %w", err)
	}
	return openRemovals(evs)
}

// closeRemoval appends the environment_views_dropped event of r.
func closeRemoval(ctx context.Context, st state.Store, r removedEnv, at time.Time, outcome string) error {
	if r.removing == 0 {
		return nil
	}
	data, err := json.Marshal(removalData{Removing: r.removing, Outcome: outcome})
	if err != nil {
		return fmt.Errorf("janitor: %w", err)
	}
	_, err = st.AppendEvents(ctx, state.Event{At: at, Kind: state.EventEnvironmentViewsDropped, Environment: r.name, Data: data})
	if err != nil {
		return fmt.Errorf("janitor: recording that the views of %s were dropped: %w", r.name, err)
	}
	return nil
}

// Run removes expired environments, then retired versions, at exec.
//
// Invariants:
//   - nothing a live environment serves is dropped: its views and view
//     schemas are never touched, and "in use" is every version that a live
//     environment serves, read after the removals;
//   - an environment is removed in one store transaction, a
//     compare-and-swap on the generation read (state.Store.RemoveEnvironment),
//     before its views are dropped, so an environment promoted meanwhile
//     keeps its row, its views and its debts; the removal supersedes its
//     open debts, whose versions' intervals this pass may delete;
//   - a removal is never left half-done: with the delete, an
//     environment_removing event lists the views to drop, and an
//     environment_views_dropped event closes it once they are dropped; a
//     janitor stopped in between leaves the event open, and the next one
//     drops those views first (unless the environment exists again);
//   - a schema is dropped only if gapless named it for what is removed (the
//     removed environment's <schema>__<env>, or a gapless__<schema> no live
//     environment and no in-flight plan uses) and it holds nothing else:
//     DROP SCHEMA ... RESTRICT, after checking it is empty;
//   - tables are dropped only if no environment's generation changed
//     between the read that chose them and the drop (a promotion meanwhile
//     aborts the table drops), and never a version that a plan whose
//     application has not finished, active within opts.Grace, references.
//     The plans examined for that are every plan the store lists
//     (state.Store.ListPlans): apply saves its plan in its first stage, so
//     a plan still building its tables, or one whose backfill failed, is
//     found; a refused plan's application has ended (apply.StatusEnded);
//   - a version nothing serves and no plan in flight references is dropped
//     only once opts.SnapshotTTL has passed since it was last used
//     (RetainUnserved): since an environment stopped serving it
//     (state.Store.LastServed; now, for an environment removed in this
//     pass), or since the last activity of a plan that references it.
//     Until then its table, intervals and snapshots stay, so a revert is a
//     view swap;
//   - a retired source generation's table and markers are dropped only
//     once opts.Grace has passed since it was retired, and never while the
//     warehouse fence plans or serves it (dropRetiredGenerations): the
//     serving and building generations, and the markers the fence checks
//     batches, swaps and catch-ups against, stay;
//   - a snapshot record a kept saved plan names is never deleted (the plan
//     must resolve it: see plan.StoredFormat), and a saved plan is pruned
//     only when nothing it names is still to be tracked (prunePlans), after
//     the snapshot deletions, in a store transaction that keeps it anyway
//     when an environment serves it or served it before, or it was active
//     within opts.Grace (state.Store.DeletePlans).
func Run(ctx context.Context, b *backend.Backend, exec time.Time, opts Options) (*Report, error) {
	g := &executor{log: opts.Log}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	rep := &Report{DryRun: opts.DryRun, Environments: []string{}, Views: []string{}, Schemas: []string{},
		KeptSchemas: []KeptSchema{}, Tables: []string{}, Versions: []state.VersionKey{}, InFlight: []string{},
		Retained: []RetainedVersion{}, PrunedPlans: []string{}, SourceTables: []string{}, KeptGenerations: []KeptGeneration{}}
	// Retired source generations first: they depend on no environment.
	if err := g.dropRetiredGenerations(ctx, b.Store, b.Engine, exec, opts, rep); err != nil {
		return nil, err
	}
	envs, err := b.Store.ListEnvironments(ctx)
	if err != nil {
		return nil, fmt.Errorf("janitor: listing environments: %w", err)
	}
	retired := map[state.SnapshotKey]*snapshot.Snapshot{}
	// Versions the removed environments served: they stop being served now.
	removedVersions := map[state.VersionKey]bool{}
	// Removals an earlier janitor left half-done come first.
	removed, err := interruptedRemovals(ctx, b.Store)
	if err != nil {
		return nil, err
	}
	for _, r := range removed {
		rep.Resumed = append(rep.Resumed, r.name)
	}
	for _, e := range envs {
		if !expired(e, exec) {
			continue
		}
		snaps, err := plan.Served(ctx, b.Store, e)
		if err != nil {
			return nil, fmt.Errorf("janitor: %w", err)
		}
		r, retiring := removal(e, snaps)
		if opts.BeforeRemove != nil {
			if err := opts.BeforeRemove(ctx, e); err != nil {
				return nil, fmt.Errorf("janitor: before deleting %s: %w", e.Name, err)
			}
		}
		if !opts.DryRun {
			// The environment_removing event is written with the delete, so
			// that a janitor stopped between the delete and the view drops
			// leaves the next one the list of views to drop.
			data, err := json.Marshal(removalData{Generation: e.Generation, Views: r.views})
			if err != nil {
				return nil, fmt.Errorf("janitor: %w", err)
			}
			ev, err := b.Store.RemoveEnvironment(ctx, state.RemoveEnvironmentParams{Name: e.Name, Generation: e.Generation,
				Now: exec, Data: data})
			if errors.Is(err, state.ErrConflictingPlan) || errors.Is(err, state.ErrNotFound) {
				g.log.Info("janitor: environment changed meanwhile, left alone", logkey.Environment, e.Name, logkey.Generation, e.Generation)
				rep.Skipped = append(rep.Skipped, e.Name)
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("janitor: removing environment %s: %w", e.Name, err)
			}
			r.removing = ev.ID
			g.log.Info("janitor: environment removed", logkey.Environment, e.Name, logkey.Generation, e.Generation,
				logkey.ExpiresAt, e.ExpiresAt, logkey.Invalidated, e.Invalidated)
			if opts.AfterRemove != nil {
				if err := opts.AfterRemove(ctx, e); err != nil {
					return nil, fmt.Errorf("janitor: after deleting %s: %w", e.Name, err)
				}
			}
		}
		rep.Environments = append(rep.Environments, e.Name)
		for _, s := range retiring {
			retired[state.KeyOf(s)] = s
			removedVersions[state.VersionKey{Name: s.Name, Version: s.Version}] = true
		}
		removed = append(removed, r)
	}

	// What the remaining environments serve. A dry run removed nothing: the
	// environments it would remove are left out by name.
	live, err := b.Store.ListEnvironments(ctx)
	if err != nil {
		return nil, fmt.Errorf("janitor: listing environments: %w", err)
	}
	if opts.DryRun {
		live = slices.DeleteFunc(live, func(e *state.Environment) bool { return slices.Contains(rep.Environments, e.Name) })
	}
	servedVersions, servedSnaps, usedSchemas := inUse(live)

	for _, r := range removed {
		if err := g.removeViews(ctx, b, r, usedSchemas, exec, opts.DryRun, rep); err != nil {
			return nil, err
		}
	}

	// Every saved plan, promoted or not (apply saves its plan before it
	// builds anything): their snapshots are the candidates for retirement,
	// those of a plan still being applied are kept, and each plan's last
	// activity counts as a use of its versions (see RetainUnserved).
	saved, err := b.Store.ListPlans(ctx, state.PlanFilter{})
	if err != nil {
		return nil, fmt.Errorf("janitor: listing the saved plans: %w", err)
	}
	slices.SortFunc(saved, func(a, b state.Plan) int { return cmp.Compare(a.ID, b.ID) })
	protectedVersions := map[state.VersionKey]bool{}
	protectedSnaps := map[state.SnapshotKey]bool{}
	lastPlanned := map[state.VersionKey]time.Time{}
	uses, err := g.readPlans(ctx, b.Store, saved, exec, opts.Grace)
	if err != nil {
		return nil, err
	}
	for _, pu := range uses {
		id := pu.id
		if pu.active {
			rep.InFlight = append(rep.InFlight, id)
		}
		for _, s := range pu.plan.Snapshots {
			if s == nil || s.Model == nil {
				continue
			}
			vk := state.VersionKey{Name: s.Name, Version: s.Version}
			if pu.active {
				protectedVersions[vk] = true
				protectedSnaps[state.KeyOf(s)] = true
				usedSchemas[s.PhysicalSchema()] = "plan " + id
				continue
			}
			retired[state.KeyOf(s)] = s
			if pu.last.After(lastPlanned[vk]) {
				lastPlanned[vk] = pu.last
			}
		}
	}

	// The candidates' last-served times: the last read the decision needs.
	lastServed, err := b.Store.LastServed(ctx, candidateVersions(retired))
	if err != nil {
		return nil, fmt.Errorf("janitor: reading when versions were last served: %w", err)
	}
	dec := retire(retireInput{Candidates: retired, ServedVersions: servedVersions, ServedSnaps: servedSnaps,
		InFlightVersions: protectedVersions, InFlightSnaps: protectedSnaps, LastServed: lastServed,
		LastPlanned: lastPlanned, RemovedNow: removedVersions, SnapshotTTL: opts.SnapshotTTL, Exec: exec})

	// Pin: if any environment moved since the read above, drop nothing.
	again, err := b.Store.ListEnvironments(ctx)
	if err != nil {
		return nil, fmt.Errorf("janitor: listing environments: %w", err)
	}
	if opts.DryRun {
		again = slices.DeleteFunc(again, func(e *state.Environment) bool { return slices.Contains(rep.Environments, e.Name) })
	}
	if !sameGenerations(live, again) {
		g.log.Info("janitor: an environment was promoted meanwhile; no table dropped")
		rep.Skipped = append(rep.Skipped, "(tables: run the janitor again)")
		return rep, nil
	}

	// The plans pruned, and the snapshots the kept ones name: a kept plan
	// must still resolve every snapshot key it names.
	prune, named := prunePlans(pruneInput{Plans: uses, Live: live, ServedSnaps: servedSnaps,
		DeadSnaps: dec.DeadSnapshots, Exec: exec, Grace: opts.Grace})
	deadSnaps := make([]state.SnapshotKey, 0, len(dec.DeadSnapshots))
	for _, k := range dec.DeadSnapshots {
		if !named[k] {
			deadSnaps = append(deadSnaps, k)
		}
	}
	physical := map[string][]string{} // physical schema -> tables dropped from it
	// One catalog question for every table the decision names (in DuckDB
	// each lookup scans the whole catalog, so one per table would make a
	// pass over many versions quadratic).
	lookup := make([]warehouse.Table, 0, len(dec.Drop)+len(dec.Retain))
	for _, d := range dec.Drop {
		lookup = append(lookup, d.Table)
	}
	for _, r := range dec.Retain {
		lookup = append(lookup, r.Table)
	}
	found, err := b.Engine.TablesExist(ctx, lookup)
	if err != nil {
		return nil, fmt.Errorf("janitor: looking for the tables of %d versions: %w", len(lookup), err)
	}
	for i, d := range dec.Drop {
		if !found[i] {
			continue // an earlier pass removed it
		}
		if !opts.DryRun {
			drop := b.Engine.DropTable
			if d.Kind == model.KindView {
				drop = b.Engine.DropView
			}
			if err := drop(ctx, d.Table); err != nil {
				return nil, fmt.Errorf("janitor: dropping %s (model %s, version %s): %w", d.Table, d.Key.Name, d.Key.Version, err)
			}
		}
		physical[d.Table.Schema] = append(physical[d.Table.Schema], d.Table.Name)
		rep.Tables = append(rep.Tables, d.Table.String())
		rep.Versions = append(rep.Versions, d.Key)
	}
	for i, r := range dec.Retain {
		if found[len(dec.Drop)+i] {
			rep.Retained = append(rep.Retained, RetainedVersion{Name: r.Key.Name, Version: r.Key.Version, Table: r.Table.String(),
				UnusedSince: r.UnusedSince, ExpiresAt: r.ExpiresAt})
		}
	}
	if len(rep.Versions) > 0 && !opts.DryRun {
		if err := b.Store.DeleteIntervals(ctx, rep.Versions); err != nil {
			return nil, fmt.Errorf("janitor: deleting intervals: %w", err)
		}
	}
	if len(deadSnaps) > 0 {
		// Count only those still recorded: an earlier pass may have removed some.
		still, err := b.Store.GetSnapshots(ctx, deadSnaps)
		if err != nil {
			return nil, fmt.Errorf("janitor: reading snapshots: %w", err)
		}
		deadSnaps = deadSnaps[:0]
		for k := range still {
			deadSnaps = append(deadSnaps, k)
		}
	}
	if len(deadSnaps) > 0 && !opts.DryRun {
		if err := b.Store.DeleteSnapshots(ctx, deadSnaps); err != nil {
			return nil, fmt.Errorf("janitor: deleting snapshots: %w", err)
		}
	}
	rep.Snapshots = len(deadSnaps)

	// Plans last, after the snapshots: a pass stopped in between leaves
	// plans naming snapshots that are gone, which the next pass prunes,
	// never snapshots no plan names.
	rep.PrunedPlans = prune
	if len(prune) > 0 && !opts.DryRun {
		deleted, err := b.Store.DeletePlans(ctx, state.DeletePlansParams{IDs: prune, Before: exec.Add(-opts.Grace)})
		if err != nil {
			return nil, fmt.Errorf("janitor: pruning %d finished plan(s): %w", len(prune), err)
		}
		rep.PrunedPlans = deleted
	}

	// Physical schemas emptied by these drops, when nothing live uses them.
	for _, schema := range sortedKeys(physical) {
		if by, ok := usedSchemas[schema]; ok {
			g.log.Debug("janitor: physical schema still used", logkey.Schema, schema, logkey.By, by)
			continue
		}
		if err := g.dropEmptySchema(ctx, b.Engine, schema, physical[schema], opts.DryRun, rep); err != nil {
			return nil, err
		}
	}
	g.log.Info("janitor done", logkey.DryRun, opts.DryRun, logkey.Environments, len(rep.Environments), logkey.Views, len(rep.Views),
		logkey.Schemas, len(rep.Schemas), logkey.Tables, len(rep.Tables), logkey.Snapshots, rep.Snapshots)
	return rep, nil
}

// removeViews drops the views of removed environment r, then its view
// schemas <schema>__<env> that are left empty. If the environment exists
// again (a new plan created it after the janitor deleted it), its views
// are the new environment's: nothing is dropped and it is reported.
func (g *executor) removeViews(ctx context.Context, b *backend.Backend, r removedEnv, usedSchemas map[string]string,
	exec time.Time, dry bool, rep *Report) error {
	if !dry {
		_, err := b.Store.GetEnvironment(ctx, r.name)
		if err == nil {
			g.log.Info("janitor: environment created again after its removal; its views left alone", logkey.Environment, r.name)
			rep.Skipped = append(rep.Skipped, r.name+" (views: created again meanwhile)")
			return closeRemoval(ctx, b.Store, r, exec, "created again")
		}
		if !errors.Is(err, state.ErrNotFound) {
			return fmt.Errorf("janitor: reading environment %s: %w", r.name, err)
		}
	}
	bySchema := map[string][]string{}
	for _, v := range r.views {
		if !dry {
			if err := b.Engine.DropView(ctx, v); err != nil {
				return fmt.Errorf("janitor: dropping view %s of %s: %w", v, r.name, err)
			}
		}
		rep.Views = append(rep.Views, v.String())
		bySchema[v.Schema] = append(bySchema[v.Schema], v.Name)
	}
	for _, schema := range sortedKeys(bySchema) {
		// Only a schema gapless named for this environment: <schema>__<env>,
		// with a non-empty <schema>, never prod's, and none that a live
		// environment uses (a model schema may itself contain "__").
		base, ok := strings.CutSuffix(schema, "__"+r.name)
		if !ok || base == "" || r.name == plan.Prod {
			continue
		}
		if by, ok := usedSchemas[schema]; ok {
			rep.KeptSchemas = append(rep.KeptSchemas, KeptSchema{Schema: schema, Reason: "used by " + by})
			continue
		}
		if err := g.dropEmptySchema(ctx, b.Engine, schema, bySchema[schema], dry, rep); err != nil {
			return err
		}
	}
	if dry {
		return nil
	}
	return closeRemoval(ctx, b.Store, r, exec, "dropped")
}

// dropEmptySchema drops schema if, once the janitor's own objects (mine,
// already dropped unless dry) are gone, it holds nothing: DROP SCHEMA ...
// RESTRICT, so that whatever the engine sees in it and the catalog query
// did not (objects other than tables and views, or invisible to this user)
// still keeps it. A schema that holds anything else is kept and reported;
// one that does not exist is skipped.
func (g *executor) dropEmptySchema(ctx context.Context, e warehouse.Engine, schema string, mine []string, dry bool, rep *Report) error {
	exists, err := e.Query(ctx, "SELECT schema_name FROM information_schema.schemata WHERE schema_name = $1", schema)
	if err != nil {
		return fmt.Errorf("janitor: looking for schema %s: %w", schema, err)
	}
	if len(exists.Rows) == 0 {
		return nil
	}
	res, err := e.Query(ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name", schema)
	if err != nil {
		return fmt.Errorf("janitor: listing schema %s: %w", schema, err)
	}
	var others []string
	for _, row := range res.Rows {
		name := fmt.Sprint(row[0])
		if dry && slices.Contains(mine, name) {
			continue // would be dropped first
		}
		others = append(others, name)
	}
	if len(others) > 0 {
		reason := fmt.Sprintf("it holds %d object(s) gapless did not create for what it removed: %s", len(others), strings.Join(others, ", "))
		g.log.Info("janitor: schema kept", logkey.Schema, schema, logkey.Reason, reason)
		rep.KeptSchemas = append(rep.KeptSchemas, KeptSchema{Schema: schema, Reason: reason})
		return nil
	}
	if !dry {
		if _, err := e.Query(ctx, "DROP SCHEMA "+e.QuoteIdent(schema)+" RESTRICT"); err != nil {
			// Not empty after all (an object the catalog query does not
			// list, or one created meanwhile): kept, and said so.
			g.log.Warn("janitor: schema kept: the warehouse refused to drop it", logkey.Schema, schema, logkey.Error, err)
			rep.KeptSchemas = append(rep.KeptSchemas, KeptSchema{Schema: schema, Reason: "the warehouse refused to drop it: " + err.Error()})
			return nil
		}
	}
	rep.Schemas = append(rep.Schemas, schema)
	return nil
}

// planUse is what the janitor reads of one saved plan.
type planUse struct {
	// id is the saved plan's id; base the plan it is stored as a change
	// of (plan.Plan.StoredBase), "" when stored whole.
	id, base string
	plan     *plan.Plan
	// active: its application may still be running (see readPlans).
	active bool
	// last is its last recorded activity: its creation, or any record of
	// its application history.
	last time.Time
}

// readPlans decodes the saved plans and reads each one's application
// history; whether an application may still be running is planActivity's
// decision. A plan saved in the stored format names its snapshots by key,
// through a chain of the saved plans (plan.StoredFormat), read from saved
// itself; the snapshots of every plan are read in one batch. A plan that
// cannot be decoded is left out: its snapshots are neither candidates nor
// protected, and it is not pruned. A plan whose chain is broken (a plan of
// it is gone) names nothing, and is pruned like any other. A plan
// naming snapshots the store lacks keeps those found, with a warning:
// there is nothing to drop or keep of the others.
func (g *executor) readPlans(ctx context.Context, store state.Store, saved []state.Plan, exec time.Time, grace time.Duration) ([]*planUse, error) {
	byID := make(savedPlans, len(saved))
	for i := range saved {
		byID[saved[i].ID] = &saved[i]
	}
	chains := plan.NewChainReader(byID)
	uses := make([]*planUse, 0, len(saved))
	plans := make([]*plan.Plan, 0, len(saved))
	for i := range saved {
		sp := &saved[i]
		pl, err := chains.Decode(ctx, sp)
		var broken *plan.MissingBaseError
		switch {
		case errors.As(err, &broken):
			// Its chain goes through a plan that is gone (a janitor pruned
			// it while this plan was being saved against it): it names
			// nothing that can be read, and goes once past the grace.
			g.log.Warn("janitor: plan's chain is broken; it is pruned once past the grace", logkey.Plan, sp.ID, logkey.Error, err)
			pl = &plan.Plan{ID: sp.ID}
		case err != nil:
			g.log.Warn("janitor: plan not decodable; its tables are left alone", logkey.Plan, sp.ID, logkey.Error, err)
			continue
		}
		apps, err := store.ListApplications(ctx, sp.ID)
		if err != nil {
			return nil, fmt.Errorf("janitor: reading the application history of plan %s: %w", sp.ID, err)
		}
		active, last := planActivity(sp.CreatedAt, apps, exec, grace)
		uses = append(uses, &planUse{id: sp.ID, base: pl.StoredBase(), plan: pl, active: active, last: last})
		plans = append(plans, pl)
	}
	if err := plan.ResolveSnapshots(ctx, store, plans...); err != nil {
		var missing *plan.MissingSnapshotsError
		if !errors.As(err, &missing) {
			return nil, fmt.Errorf("janitor: %w", err)
		}
		g.log.Warn("janitor: saved plans name snapshots the state store does not hold", logkey.Error, err)
	}
	return uses, nil
}

// savedPlans is the saved plans one pass listed, by id: the chains of the
// stored plans are read from them (plan.SavedPlans).
type savedPlans map[string]*state.Plan

// GetPlan returns the listed plan id or an error wrapping state.ErrNotFound.
func (s savedPlans) GetPlan(_ context.Context, id string) (*state.Plan, error) {
	if p, ok := s[id]; ok {
		return p, nil
	}
	return nil, fmt.Errorf("plan %s: %w", id, state.ErrNotFound)
}
