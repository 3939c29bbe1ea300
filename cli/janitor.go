package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/gapless-dev/gapless/backend"
	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/state"
)

// janitorReport is what one janitor pass removed; its JSON form is stable.
type janitorReport struct {
	Environments []string           `json:"environments"`
	Views        []string           `json:"views"`
	Tables       []string           `json:"tables"`
	Versions     []state.VersionKey `json:"versions"`
	Snapshots    int                `json:"snapshots"`
	// Skipped names environments left alone because they were promoted
	// while the janitor ran.
	Skipped []string `json:"skipped,omitempty"`
}

func newJanitorCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "janitor",
		Short: "Drop the views, tables and state of expired environments and of versions no environment serves",
		Long: `Removes every environment that is invalidated or expired at
--execution-time (never prod): its state row first, as a compare-and-swap
on the generation it read (an environment promoted meanwhile is left
alone), then its views.

Then it drops the physical tables, intervals and snapshots of retired
versions: those the removed environments served and those the live
environments' earlier plans served (up to 20 plans back), when no
environment serves them now.
If any environment is promoted while it works, it drops no table and asks
to be run again.`,
		Args: rangeArgs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			ctx := cmd.Context()
			exec, err := g.execTime()
			if err != nil {
				return err
			}
			_, b, err := g.open(ctx, false)
			if err != nil {
				return err
			}
			defer g.closeBackend(b, &err)
			rep, err := g.janitor(ctx, b, exec)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(g.env.Stdout, rep)
			}
			fmt.Fprintf(g.env.Stdout, "Removed %d environment(s), %d view(s), %d table(s), the intervals of %d version(s) and %d snapshot(s).\n",
				len(rep.Environments), len(rep.Views), len(rep.Tables), len(rep.Versions), rep.Snapshots)
			for _, s := range rep.Skipped {
				fmt.Fprintf(g.env.Stdout, "Left %s alone: it was promoted while the janitor ran.\n", s)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// expired: invalidated, or past its expiry at exec. prod never expires.
func expired(e *state.Environment, exec time.Time) bool {
	if e.Name == plan.Prod {
		return false
	}
	pastExpiry := !e.ExpiresAt.IsZero() && !e.ExpiresAt.After(exec)
	return e.Invalidated || pastExpiry
}

// janitor removes expired environments, then retired versions.
//
// Invariant: nothing an environment serves is dropped. Environment rows are
// deleted by a compare-and-swap on the generation read; tables are dropped
// only if no environment's generation changed between the read that chose
// them and the drop (a promotion meanwhile aborts the table drops).
func (g *globals) janitor(ctx context.Context, b *backend.Backend, exec time.Time) (*janitorReport, error) {
	rep := &janitorReport{Environments: []string{}, Views: []string{}, Tables: []string{}, Versions: []state.VersionKey{}}
	envs, err := b.Store.ListEnvironments(ctx)
	if err != nil {
		return nil, fmt.Errorf("janitor: listing environments: %w", err)
	}
	retired := map[state.SnapshotKey]*snapshot.Snapshot{}
	for _, e := range envs {
		if !expired(e, exec) {
			continue
		}
		snaps, err := plan.Served(ctx, b.Store, e)
		if err != nil {
			return nil, fmt.Errorf("janitor: %w", err)
		}
		err = b.Store.DeleteEnvironment(ctx, e.Name, e.Generation)
		if errors.Is(err, state.ErrConflictingPlan) || errors.Is(err, state.ErrNotFound) {
			g.log.Info("janitor: environment changed meanwhile, left alone", "environment", e.Name, "generation", e.Generation)
			rep.Skipped = append(rep.Skipped, e.Name)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("janitor: removing environment %s: %w", e.Name, err)
		}
		rep.Environments = append(rep.Environments, e.Name)
		g.log.Info("janitor: environment removed", "environment", e.Name, "generation", e.Generation)
		for _, s := range snaps {
			v := execute.ViewTable(s, e.Name)
			if err := b.Engine.DropView(ctx, v); err != nil {
				return nil, fmt.Errorf("janitor: dropping view %s of %s: %w", v, e.Name, err)
			}
			rep.Views = append(rep.Views, v.String())
			retired[state.KeyOf(s)] = s
		}
	}

	live, err := b.Store.ListEnvironments(ctx)
	if err != nil {
		return nil, fmt.Errorf("janitor: listing environments: %w", err)
	}
	servedVersions := map[state.VersionKey]bool{}
	servedSnaps := map[state.SnapshotKey]bool{}
	for _, e := range live {
		for _, r := range e.Snapshots {
			servedVersions[r.VersionKey()] = true
			servedSnaps[r.Key()] = true
		}
		for _, s := range previousPlanSnapshots(ctx, g, b.Store, e.PreviousPlanID) {
			retired[state.KeyOf(s)] = s
		}
	}

	// Pin: if any environment moved since the read above, drop nothing.
	again, err := b.Store.ListEnvironments(ctx)
	if err != nil {
		return nil, fmt.Errorf("janitor: listing environments: %w", err)
	}
	if !sameGenerations(live, again) {
		g.log.Info("janitor: an environment was promoted meanwhile; no table dropped")
		rep.Skipped = append(rep.Skipped, "(tables: run the janitor again)")
		return rep, nil
	}

	var deadSnaps []state.SnapshotKey
	dropped := map[state.VersionKey]bool{}
	keys := make([]state.SnapshotKey, 0, len(retired))
	for k := range retired {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b state.SnapshotKey) int {
		return cmp.Compare(a.Name+"@"+a.Fingerprint, b.Name+"@"+b.Fingerprint)
	})
	for _, k := range keys {
		s := retired[k]
		if !servedSnaps[k] {
			deadSnaps = append(deadSnaps, k)
		}
		vk := state.VersionKey{Name: s.Name, Version: s.Version}
		if servedVersions[vk] || dropped[vk] || s.Model.Kind == model.KindExternal {
			continue
		}
		t := execute.PhysicalTable(s)
		exists, err := b.Engine.TableExists(ctx, t)
		if err != nil {
			return nil, fmt.Errorf("janitor: looking for %s: %w", t, err)
		}
		if !exists {
			dropped[vk] = true // an earlier pass removed it
			continue
		}
		drop := b.Engine.DropTable
		if s.Model.Kind == model.KindView {
			drop = b.Engine.DropView
		}
		if err := drop(ctx, t); err != nil {
			return nil, fmt.Errorf("janitor: dropping %s (model %s, version %s): %w", t, s.Name, s.Version, err)
		}
		dropped[vk] = true
		rep.Tables = append(rep.Tables, t.String())
		rep.Versions = append(rep.Versions, vk)
	}
	if len(rep.Versions) > 0 {
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
	if len(deadSnaps) > 0 {
		if err := b.Store.DeleteSnapshots(ctx, deadSnaps); err != nil {
			return nil, fmt.Errorf("janitor: deleting snapshots: %w", err)
		}
	}
	rep.Snapshots = len(deadSnaps)
	g.log.Info("janitor done", "environments", len(rep.Environments), "tables", len(rep.Tables), "snapshots", rep.Snapshots)
	return rep, nil
}

// janitorHistory bounds how many earlier plans of an environment the
// janitor reads, walking back from its previous plan. Each pass drops what
// it finds, so running the janitor at least every janitorHistory promotions
// misses nothing.
const janitorHistory = 20

// previousPlanSnapshots reads the snapshots the environment's earlier plans
// served, walking back from id through each plan's expected predecessor. A
// plan the store no longer has, or cannot be read as a plan, ends the walk:
// the janitor then leaves older tables alone rather than guess.
func previousPlanSnapshots(ctx context.Context, g *globals, store state.Store, id string) []*snapshot.Snapshot {
	var out []*snapshot.Snapshot
	seen := map[string]bool{}
	for i := 0; i < janitorHistory && id != "" && !seen[id]; i++ {
		seen[id] = true
		sp, err := store.GetPlan(ctx, id)
		if err != nil {
			g.log.Debug("janitor: earlier plan not readable", "plan", id, "error", err)
			break
		}
		var pl plan.Plan
		if err := json.Unmarshal(sp.Payload, &pl); err != nil {
			g.log.Debug("janitor: earlier plan not decodable", "plan", id, "error", err)
			break
		}
		for _, s := range pl.Snapshots {
			if s != nil && s.Model != nil {
				out = append(out, s)
			}
		}
		id = pl.Expected.PlanID
	}
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
