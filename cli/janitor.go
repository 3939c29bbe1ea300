package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gapless-dev/gapless/apply"
	"github.com/gapless-dev/gapless/backend"
	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

// DefaultJanitorGrace is how long after its last recorded activity a plan
// whose application has not finished keeps every version it references
// (janitor --grace). Every plan saved within it is considered, promoted or
// not: apply saves the plan in its first stage, before it builds anything.
const DefaultJanitorGrace = 24 * time.Hour

// janitorReport is what one janitor pass removed (or, with --dry-run, would
// remove); its JSON form is stable: every list is present, possibly empty.
type janitorReport struct {
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
	KeptSchemas []keptSchema `json:"kept_schemas"`
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
	// Skipped names environments left alone because they were promoted
	// while the janitor ran.
	Skipped []string `json:"skipped,omitempty"`
	// Resumed names environments an earlier janitor removed without
	// dropping their views (it stopped half-way); this one dropped them.
	Resumed []string `json:"resumed,omitempty"`
}

// keptSchema is a schema the janitor left in place, and why.
type keptSchema struct {
	Schema string `json:"schema"`
	Reason string `json:"reason"`
}

// janitorOptions configure one janitor pass.
type janitorOptions struct {
	// DryRun computes everything and changes nothing.
	DryRun bool
	// Grace: see DefaultJanitorGrace.
	Grace time.Duration
	// beforeDelete, when set, runs after the janitor read environment e and
	// decided to remove it, before the generation-pinned delete (tests).
	beforeDelete func(ctx context.Context, e *state.Environment) error
	// afterDelete, when set, runs right after environment e's row was
	// deleted, before its views are dropped (tests: an error there is a
	// janitor that stopped half-way).
	afterDelete func(ctx context.Context, e *state.Environment) error
}

func newJanitorCmd(g *globals) *cobra.Command {
	var asJSON bool
	opts := janitorOptions{}
	cmd := &cobra.Command{
		Use:   "janitor",
		Short: "Drop the views, schemas, tables and state of expired environments and of versions no environment serves",
		Long: `Removes every environment that is invalidated or expired at
--execution-time (never prod; an environment expires environment_ttl after
its latest promotion, see gapless.yaml). For each: its state row first, as
a compare-and-swap on the generation it read (an environment promoted
meanwhile is left alone and reported), then its views, then its view
schemas <schema>__<env> when they are left empty (a schema holding anything
else is kept and reported).

Then it drops the physical tables, intervals and snapshots of the versions
no remaining environment serves, among those the removed environments
served, those of every plan the history names and those of every plan saved
within --grace. A version referenced by a plan whose application has not
finished and was active within --grace is kept: that apply may still be
building it, also when it has not reached its promotion yet (apply saves
its plan first). Physical schemas gapless__<schema> left empty are dropped
too. If any environment is promoted while it works, it drops no table and
asks to be run again.

--dry-run prints what it would remove and changes nothing.`,
		Args: rangeArgs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			ctx := cmd.Context()
			exec, err := g.execTime()
			if err != nil {
				return err
			}
			if opts.Grace < 0 {
				return usagef("--grace must not be negative, got %s", opts.Grace)
			}
			_, b, err := g.open(ctx, false)
			if err != nil {
				return err
			}
			defer g.closeBackend(b, &err)
			rep, err := g.janitor(ctx, b, exec, opts)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(g.env.Stdout, rep)
			}
			printJanitor(g.env.Stdout, rep)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&opts.DryRun, "dry-run", false, "print what would be removed; change nothing")
	cmd.Flags().DurationVar(&opts.Grace, "grace", DefaultJanitorGrace,
		"keep every version of a plan whose application has not finished and was active this recently")
	return cmd
}

func printJanitor(out io.Writer, rep *janitorReport) {
	verb := "Removed"
	if rep.DryRun {
		verb = "Would remove"
	}
	fmt.Fprintf(out, "%s %d environment(s), %d view(s), %d schema(s), %d table(s), the intervals of %d version(s) and %d snapshot(s).\n",
		verb, len(rep.Environments), len(rep.Views), len(rep.Schemas), len(rep.Tables), len(rep.Versions), rep.Snapshots)
	for _, list := range []struct {
		what  string
		items []string
	}{{"environment", rep.Environments}, {"view", rep.Views}, {"schema", rep.Schemas}, {"table", rep.Tables}} {
		for _, it := range list.items {
			fmt.Fprintf(out, "  %s %s\n", list.what, it)
		}
	}
	for _, k := range rep.KeptSchemas {
		fmt.Fprintf(out, "Kept schema %s: %s.\n", k.Schema, k.Reason)
	}
	for _, p := range rep.InFlight {
		fmt.Fprintf(out, "Kept the versions of plan %s: its application has not finished.\n", p)
	}
	for _, s := range rep.Skipped {
		fmt.Fprintf(out, "Left %s alone: it was promoted while the janitor ran.\n", s)
	}
}

// expired: invalidated, or past its expiry at exec. prod never expires.
func expired(e *state.Environment, exec time.Time) bool {
	if e.Name == plan.Prod {
		return false
	}
	pastExpiry := !e.ExpiresAt.IsZero() && !e.ExpiresAt.After(exec)
	return e.Invalidated || pastExpiry
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

// interruptedRemovals returns the janitor's removals whose views were never
// dropped (an earlier janitor stopped between deleting the environment's
// row and dropping its views), oldest first: environment_removing events
// without their environment_views_dropped.
func interruptedRemovals(ctx context.Context, st state.Store) ([]removedEnv, error) {
	evs, err := st.ListEvents(ctx, state.EventFilter{Kinds: []string{state.EventEnvironmentRemoving, state.EventEnvironmentViewsDropped}})
	if err != nil {
		return nil, fmt.Errorf("janitor: reading earlier removals: %w", err)
	}
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

// janitor removes expired environments, then retired versions.
//
// Invariants:
//   - nothing a live environment serves is dropped: its views and view
//     schemas are never touched, and "in use" is every version that a live
//     environment serves, read after the removals;
//   - an environment row is deleted by a compare-and-swap on the generation
//     read (state.Store.DeleteEnvironment), before its views are dropped, so
//     an environment promoted meanwhile keeps its row and its views;
//   - a removal is never left half-done: before the delete, an
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
//     The plans examined for that are those the history names and every
//     plan the store lists as created within opts.Grace of exec
//     (state.Store.ListPlans): apply saves its plan in its first stage and
//     the history names it only from its promotion on, so a plan still
//     building its tables, or one whose backfill failed, is found by the
//     listing alone.
func (g *globals) janitor(ctx context.Context, b *backend.Backend, exec time.Time, opts janitorOptions) (*janitorReport, error) {
	rep := &janitorReport{DryRun: opts.DryRun, Environments: []string{}, Views: []string{}, Schemas: []string{},
		KeptSchemas: []keptSchema{}, Tables: []string{}, Versions: []state.VersionKey{}, InFlight: []string{}}
	envs, err := b.Store.ListEnvironments(ctx)
	if err != nil {
		return nil, fmt.Errorf("janitor: listing environments: %w", err)
	}
	retired := map[state.SnapshotKey]*snapshot.Snapshot{}
	planIDs := map[string]bool{}
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
		r := removedEnv{name: e.Name}
		var retiring []*snapshot.Snapshot
		for _, ref := range e.Snapshots { // sorted by name
			s := snaps[ref.Name]
			retiring = append(retiring, s)
			if s.Model.Kind != model.KindExternal {
				r.views = append(r.views, execute.ViewTable(s, e.Name))
			}
		}
		if opts.beforeDelete != nil {
			if err := opts.beforeDelete(ctx, e); err != nil {
				return nil, fmt.Errorf("janitor: before deleting %s: %w", e.Name, err)
			}
		}
		if !opts.DryRun {
			// Written before the delete, so that a janitor stopped between
			// the delete and the view drops leaves the next one the list of
			// views to drop.
			data, err := json.Marshal(removalData{Generation: e.Generation, Views: r.views})
			if err != nil {
				return nil, fmt.Errorf("janitor: %w", err)
			}
			evs, err := b.Store.AppendEvents(ctx, state.Event{At: exec, Kind: state.EventEnvironmentRemoving,
				Environment: e.Name, PlanID: e.PlanID, Data: data})
			if err != nil {
				return nil, fmt.Errorf("janitor: recording the removal of %s: %w", e.Name, err)
			}
			r.removing = evs[0].ID
			err = b.Store.DeleteEnvironment(ctx, state.DeleteEnvironmentParams{Name: e.Name, Generation: e.Generation, Now: exec})
			if errors.Is(err, state.ErrConflictingPlan) || errors.Is(err, state.ErrNotFound) {
				g.log.Info("janitor: environment changed meanwhile, left alone", "environment", e.Name, "generation", e.Generation)
				rep.Skipped = append(rep.Skipped, e.Name)
				if err := closeRemoval(ctx, b.Store, r, exec, "changed meanwhile"); err != nil {
					return nil, err
				}
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("janitor: removing environment %s: %w", e.Name, err)
			}
			g.log.Info("janitor: environment removed", "environment", e.Name, "generation", e.Generation,
				"expires_at", e.ExpiresAt, "invalidated", e.Invalidated)
			if opts.afterDelete != nil {
				if err := opts.afterDelete(ctx, e); err != nil {
					return nil, fmt.Errorf("janitor: after deleting %s: %w", e.Name, err)
				}
			}
		}
		rep.Environments = append(rep.Environments, e.Name)
		planIDs[e.PlanID], planIDs[e.PreviousPlanID] = true, true
		for _, s := range retiring {
			retired[state.KeyOf(s)] = s
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
	servedVersions := map[state.VersionKey]bool{}
	servedSnaps := map[state.SnapshotKey]bool{}
	usedSchemas := map[string]string{} // view and physical schemas live environments use -> by which
	for _, e := range live {
		planIDs[e.PlanID], planIDs[e.PreviousPlanID] = true, true
		for _, r := range e.Snapshots {
			servedVersions[r.VersionKey()] = true
			servedSnaps[r.Key()] = true
			schema := (&model.Model{Name: r.Name}).Schema()
			usedSchemas[execute.ViewSchema(schema, e.Name)] = e.Name
			usedSchemas["gapless__"+schema] = e.Name
		}
	}

	for _, r := range removed {
		if err := g.removeViews(ctx, b, r, usedSchemas, exec, opts.DryRun, rep); err != nil {
			return nil, err
		}
	}

	// Every plan the history names, and every plan saved within the grace
	// period (promoted or not: apply saves its plan before it builds
	// anything, and the history names it only from its promotion on):
	// their snapshots are the candidates for retirement, and those of a plan
	// still being applied are kept.
	if err := historyPlanIDs(ctx, b.Store, planIDs); err != nil {
		return nil, err
	}
	saved, err := recentPlans(ctx, b.Store, exec, opts.Grace)
	if err != nil {
		return nil, err
	}
	for id := range saved {
		planIDs[id] = true
	}
	protectedVersions := map[state.VersionKey]bool{}
	protectedSnaps := map[state.SnapshotKey]bool{}
	for _, id := range sortedKeys(planIDs) {
		pl, active, err := g.readPlan(ctx, b.Store, id, saved[id], exec, opts.Grace)
		if err != nil {
			return nil, err
		}
		if pl == nil {
			continue
		}
		if active {
			rep.InFlight = append(rep.InFlight, id)
		}
		for _, s := range pl.Snapshots {
			if s == nil || s.Model == nil {
				continue
			}
			if active {
				protectedVersions[state.VersionKey{Name: s.Name, Version: s.Version}] = true
				protectedSnaps[state.KeyOf(s)] = true
				usedSchemas[s.PhysicalSchema()] = "plan " + id
				continue
			}
			retired[state.KeyOf(s)] = s
		}
	}

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

	var deadSnaps []state.SnapshotKey
	dropped := map[state.VersionKey]bool{}
	physical := map[string][]string{} // physical schema -> tables dropped from it
	keys := make([]state.SnapshotKey, 0, len(retired))
	for k := range retired {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b state.SnapshotKey) int {
		return cmp.Compare(a.Name+"@"+a.Fingerprint, b.Name+"@"+b.Fingerprint)
	})
	for _, k := range keys {
		s := retired[k]
		if !servedSnaps[k] && !protectedSnaps[k] {
			deadSnaps = append(deadSnaps, k)
		}
		vk := state.VersionKey{Name: s.Name, Version: s.Version}
		inUse := servedVersions[vk] || protectedVersions[vk]
		if inUse || dropped[vk] || s.Model.Kind == model.KindExternal {
			continue
		}
		t := execute.PhysicalTable(s)
		exists, err := b.Engine.TableExists(ctx, t)
		if err != nil {
			return nil, fmt.Errorf("janitor: looking for %s: %w", t, err)
		}
		dropped[vk] = true
		if !exists {
			continue // an earlier pass removed it
		}
		if !opts.DryRun {
			drop := b.Engine.DropTable
			if s.Model.Kind == model.KindView {
				drop = b.Engine.DropView
			}
			if err := drop(ctx, t); err != nil {
				return nil, fmt.Errorf("janitor: dropping %s (model %s, version %s): %w", t, s.Name, s.Version, err)
			}
		}
		physical[t.Schema] = append(physical[t.Schema], t.Name)
		rep.Tables = append(rep.Tables, t.String())
		rep.Versions = append(rep.Versions, vk)
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

	// Physical schemas emptied by these drops, when nothing live uses them.
	for _, schema := range sortedKeys(physical) {
		if by, ok := usedSchemas[schema]; ok {
			g.log.Debug("janitor: physical schema still used", "schema", schema, "by", by)
			continue
		}
		if err := g.dropEmptySchema(ctx, b.Engine, schema, physical[schema], opts.DryRun, rep); err != nil {
			return nil, err
		}
	}
	g.log.Info("janitor done", "dry_run", opts.DryRun, "environments", len(rep.Environments), "views", len(rep.Views),
		"schemas", len(rep.Schemas), "tables", len(rep.Tables), "snapshots", rep.Snapshots)
	return rep, nil
}

// removeViews drops the views of removed environment r, then its view
// schemas <schema>__<env> that are left empty. If the environment exists
// again (a new plan created it after the janitor deleted it), its views
// are the new environment's: nothing is dropped and it is reported.
func (g *globals) removeViews(ctx context.Context, b *backend.Backend, r removedEnv, usedSchemas map[string]string,
	exec time.Time, dry bool, rep *janitorReport) error {
	if !dry {
		_, err := b.Store.GetEnvironment(ctx, r.name)
		if err == nil {
			g.log.Info("janitor: environment created again after its removal; its views left alone", "environment", r.name)
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
			rep.KeptSchemas = append(rep.KeptSchemas, keptSchema{Schema: schema, Reason: "used by " + by})
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
func (g *globals) dropEmptySchema(ctx context.Context, e warehouse.Engine, schema string, mine []string, dry bool, rep *janitorReport) error {
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
		g.log.Info("janitor: schema kept", "schema", schema, "reason", reason)
		rep.KeptSchemas = append(rep.KeptSchemas, keptSchema{Schema: schema, Reason: reason})
		return nil
	}
	if !dry {
		if _, err := e.Query(ctx, "DROP SCHEMA "+e.QuoteIdent(schema)+" RESTRICT"); err != nil {
			// Not empty after all (an object the catalog query does not
			// list, or one created meanwhile): kept, and said so.
			g.log.Warn("janitor: schema kept: the warehouse refused to drop it", "schema", schema, "error", err)
			rep.KeptSchemas = append(rep.KeptSchemas, keptSchema{Schema: schema, Reason: "the warehouse refused to drop it: " + err.Error()})
			return nil
		}
	}
	rep.Schemas = append(rep.Schemas, schema)
	return nil
}

// historyKinds are the event kinds that name a plan that was applied up to
// its promotion (accepted or refused).
var historyKinds = []string{state.EventPlanApplied, state.EventPromotionAccepted, state.EventPromotionRejected,
	state.EventGapAccepted, state.EventReplan, state.EventCatchUp}

// historyPlanIDs adds to ids every plan the event history names.
func historyPlanIDs(ctx context.Context, store state.Store, ids map[string]bool) error {
	const page = 1000
	var after int64
	for {
		evs, err := store.ListEvents(ctx, state.EventFilter{Kinds: historyKinds, AfterID: after, Limit: page})
		if err != nil {
			return fmt.Errorf("janitor: reading the history of plans: %w", err)
		}
		for _, ev := range evs {
			if ev.PlanID != "" {
				ids[ev.PlanID] = true
			}
			after = ev.ID
		}
		if len(evs) < page {
			return nil
		}
	}
}

// recentPlans returns, by id, every plan saved with a creation time within
// grace of exec (created after exec - grace), whether or not it was ever
// promoted.
func recentPlans(ctx context.Context, store state.Store, exec time.Time, grace time.Duration) (map[string]*state.Plan, error) {
	list, err := store.ListPlans(ctx, state.PlanFilter{CreatedAfter: exec.Add(-grace)})
	if err != nil {
		return nil, fmt.Errorf("janitor: listing the plans saved within the grace period: %w", err)
	}
	out := make(map[string]*state.Plan, len(list))
	for i := range list {
		out[list[i].ID] = &list[i]
	}
	return out, nil
}

// readPlan reads plan id (sp, when the caller already has it) and says
// whether its application may still be running: it has not finished (no
// finalize stage finished) and its last recorded activity (creation, or
// any stage) is within grace of exec. A plan the store does not have, or
// that cannot be decoded, is skipped (nil): its snapshots are neither
// candidates nor protected.
func (g *globals) readPlan(ctx context.Context, store state.Store, id string, sp *state.Plan, exec time.Time, grace time.Duration) (*plan.Plan, bool, error) {
	if id == "" {
		return nil, false, nil
	}
	if sp == nil {
		var err error
		sp, err = store.GetPlan(ctx, id)
		if errors.Is(err, state.ErrNotFound) {
			g.log.Debug("janitor: plan not in the store", "plan", id)
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("janitor: reading plan %s: %w", id, err)
		}
	}
	var pl plan.Plan
	if err := json.Unmarshal(sp.Payload, &pl); err != nil {
		g.log.Warn("janitor: plan not decodable; its tables are left alone", "plan", id, "error", err)
		return nil, false, nil
	}
	apps, err := store.ListApplications(ctx, id)
	if err != nil {
		return nil, false, fmt.Errorf("janitor: reading the application history of plan %s: %w", id, err)
	}
	last := sp.CreatedAt
	finished := false
	for _, a := range apps {
		if a.At.After(last) {
			last = a.At
		}
		if a.Stage == string(apply.StageFinalize) && a.Status == apply.StatusFinished {
			finished = true
		}
	}
	recent := exec.Sub(last) < grace
	return &pl, !finished && recent, nil
}

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
