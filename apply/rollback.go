package apply

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gapless-dev/gapless/execute"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/plan"
	"github.com/gapless-dev/gapless/promotion"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

// ErrNoRollback is wrapped when an environment has nothing to roll back
// to: it does not exist, is invalidated, or has had one plan only.
var ErrNoRollback = errors.New("nothing to roll back to")

// RollbackParams are the parameters of RollbackPlan.
type RollbackParams struct {
	Store  state.Store
	Engine warehouse.Engine
	// Environment is the environment to roll back.
	Environment string
	// ID is the id of the plan RollbackPlan builds (a fresh one: the plan
	// id an environment is at only ever changes to a new one, so a
	// compare-and-swap on it is never fooled by a return to an old value).
	ID            string
	ExecutionTime time.Time
	Now           time.Time
}

// Rollback is the plan that promotes an environment's previous plan again,
// and what it changes.
type Rollback struct {
	Plan *plan.Plan
	// From is the plan the environment serves now; To is its previous
	// plan, whose snapshots Plan serves again.
	From, To string
	// Swaps lists every model whose served version changes, in Plan's
	// order, then the models the rollback stops serving.
	Swaps []Swap
}

// Swap is one model whose view a rollback repoints.
type Swap struct {
	Model string `json:"model"`
	// From is the version served now, To the version served after; ""
	// when the model is not served on that side.
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
}

// DroppedError refuses a rollback whose previous plan serves versions the
// janitor has dropped since (their snapshot_ttl passed): their tables are
// gone, so the rollback cannot be a view swap.
type DroppedError struct {
	Environment, To string
	// Tables names each dropped version's physical table, by model.
	Tables []DroppedTable
}

// DroppedTable is one version a rollback needs and the janitor dropped.
type DroppedTable struct {
	Model, Version string
	Table          warehouse.Table
}

func (e *DroppedError) Error() string {
	parts := make([]string, len(e.Tables))
	for i, t := range e.Tables {
		parts[i] = fmt.Sprintf("%s at version %s (table %s)", t.Model, t.Version, t.Table)
	}
	return fmt.Sprintf("cannot roll %s back to plan %s: the janitor dropped what it served that %s does not serve now "+
		"(kept for snapshot_ttl after it was last used): %s; revert the change in the project and run `gapless plan %s`, which rebuilds them",
		e.Environment, e.To, e.Environment, strings.Join(parts, ", "), e.Environment)
}

// RollbackPlan builds the plan that promotes p.Environment's previous plan
// (Environment.PreviousPlanID) again, as a plan of its own (p.ID) that
// Apply applies like any other: the strict no-gap check at promotion,
// views updated in one engine transaction, finalised.
//
// The plan serves exactly the previous plan's snapshots, at their recorded
// versions, and computes nothing: it has no backfill, so promoting it is a
// view swap. It expects the environment as it is now (its plan id and
// generation), so a promotion meanwhile refuses it as stale, and it
// records, for every model whose version it changes, the version served
// now with its frontier as the incumbent: the strict check then refuses
// the rollback, naming each gap, when a previous table no longer covers
// what the environment serves now (see RollbackRefusal).
//
// Rolling back twice returns to where the environment was: the rollback
// plan becomes the environment's plan, and the one it replaced its
// previous plan.
//
// It refuses, before anything is written: an environment without a
// previous plan (ErrNoRollback), and a previous plan whose versions the
// janitor dropped (*DroppedError, naming their tables).
func RollbackPlan(ctx context.Context, p RollbackParams) (*Rollback, error) {
	env := p.Environment
	cur, err := p.Store.GetEnvironment(ctx, env)
	if errors.Is(err, state.ErrNotFound) {
		return nil, fmt.Errorf("%w: environment %s does not exist", ErrNoRollback, env)
	}
	if err != nil {
		return nil, fmt.Errorf("reading environment %s: %w", env, err)
	}
	switch {
	case cur.Invalidated:
		return nil, fmt.Errorf("%w: environment %s is invalidated", ErrNoRollback, env)
	case cur.PreviousPlanID == "":
		return nil, fmt.Errorf("%w: %s has served plan %s only", ErrNoRollback, env, cur.PlanID)
	}
	saved, err := p.Store.GetPlan(ctx, cur.PreviousPlanID)
	if err != nil {
		return nil, fmt.Errorf("reading %s's previous plan %s: %w", env, cur.PreviousPlanID, err)
	}
	prev, err := plan.LoadStored(ctx, p.Store, saved)
	if err != nil {
		return nil, fmt.Errorf("%s's previous plan %s: %w", env, cur.PreviousPlanID, err)
	}
	served, err := plan.Served(ctx, p.Store, cur)
	if err != nil {
		return nil, err
	}

	// Every table the previous plan serves and the environment does not
	// serve now must still exist: one existence question for them all
	// (each one scans DuckDB's catalog).
	dropped := &DroppedError{Environment: env, To: prev.ID}
	var wanted []*snapshot.Snapshot
	var tables []warehouse.Table
	for _, s := range prev.Snapshots {
		if s.Model.Kind == model.KindExternal || (served[s.Name] != nil && served[s.Name].Version == s.Version) {
			continue
		}
		wanted = append(wanted, s)
		tables = append(tables, execute.PhysicalTable(s))
	}
	found, err := p.Engine.TablesExist(ctx, tables)
	if err != nil {
		return nil, fmt.Errorf("looking for the %d tables of %s's previous plan %s: %w", len(tables), env, prev.ID, err)
	}
	for i, s := range wanted {
		if !found[i] {
			dropped.Tables = append(dropped.Tables, DroppedTable{Model: s.Name, Version: s.Version, Table: tables[i]})
		}
	}
	if len(dropped.Tables) > 0 {
		return nil, dropped
	}

	pl := &plan.Plan{
		ID: p.ID, Environment: env, ExecutionTime: p.ExecutionTime.UTC(), CreatedAt: p.Now.UTC(),
		Expected:  plan.Expected{PlanID: cur.PlanID, Generation: cur.Generation},
		Options:   plan.Options{Policy: promotion.Default},
		Snapshots: prev.Snapshots,
	}
	rb := &Rollback{Plan: pl, From: cur.PlanID, To: prev.ID}
	var keys []state.VersionKey
	next := map[string]*snapshot.Snapshot{}
	for _, s := range prev.Snapshots {
		next[s.Name] = s
		if old := served[s.Name]; old != nil && old.Version != s.Version {
			keys = append(keys, keyOf(old))
		}
	}
	covered, err := p.Store.GetIntervals(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("reading the intervals %s serves: %w", env, err)
	}
	for _, s := range prev.Snapshots {
		old := served[s.Name]
		switch {
		case old == nil:
			pl.Changes = append(pl.Changes, plan.Change{Name: s.Name, Category: snapshot.Added,
				Fingerprint: s.Fingerprint.String(), Version: s.Version})
			rb.Swaps = append(rb.Swaps, Swap{Model: s.Name, To: s.Version})
		case old.Version != s.Version:
			pl.Changes = append(pl.Changes, plan.Change{Name: s.Name, Category: snapshot.Breaking,
				PreviousFingerprint: old.Fingerprint.String(), PreviousVersion: old.Version,
				Fingerprint: s.Fingerprint.String(), Version: s.Version})
			pl.Incumbents = append(pl.Incumbents, plan.Incumbent{Name: s.Name,
				Snapshot: state.SnapshotRef{Name: s.Name, Fingerprint: old.Fingerprint.String(), Version: old.Version},
				Frontier: covered[keyOf(old)].Frontier()})
			rb.Swaps = append(rb.Swaps, Swap{Model: s.Name, From: old.Version, To: s.Version})
		case old.Fingerprint != s.Fingerprint:
			pl.Changes = append(pl.Changes, plan.Change{Name: s.Name, Category: snapshot.MetadataOnly,
				PreviousFingerprint: old.Fingerprint.String(), PreviousVersion: old.Version,
				Fingerprint: s.Fingerprint.String(), Version: s.Version})
		}
	}
	for _, ref := range cur.Snapshots { // sorted by name
		if next[ref.Name] == nil {
			pl.Changes = append(pl.Changes, plan.Change{Name: ref.Name, Category: snapshot.Removed,
				PreviousFingerprint: ref.Fingerprint, PreviousVersion: ref.Version})
			rb.Swaps = append(rb.Swaps, Swap{Model: ref.Name, From: ref.Version})
		}
	}
	return rb, nil
}

// RollbackRefusedError is a rollback the strict promotion check refused:
// the previous plan's tables no longer cover what the environment serves
// now (the scheduler advanced the versions served since). Nothing was
// promoted; the environment serves what it served before.
type RollbackRefusedError struct {
	Environment, PlanID string
	// From is the plan the environment still serves; To the plan whose
	// snapshots the rollback would have served again.
	From, To string
	// Verdicts are the rejecting verdicts: per model, what it misses.
	Verdicts []promotion.Verdict
	Err      error
}

func (e *RollbackRefusedError) Error() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s: rollback to plan %s refused (plan %s, strict promotion); %s still serves plan %s. "+
		"Plan %s's tables no longer cover what %s serves now:", e.Environment, e.To, e.PlanID, e.Environment, e.From, e.To, e.Environment)
	for _, v := range e.Verdicts {
		var missing []string
		for r := range v.Missing.All() {
			missing = append(missing, r.String())
		}
		if len(missing) == 0 && !v.Suffix.Empty() {
			missing = []string{v.Suffix.String()}
		}
		fmt.Fprintf(&sb, "\n  %s [%s] is missing %s (%s serves it through %s)", v.Model, v.Reason, strings.Join(missing, ", "),
			e.Environment, v.FrontierNow.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(&sb, "\nTo serve plan %s's models again, make the project's models match them and run `gapless plan %s`: "+
		"it reuses plan %s's tables and computes only what is missing.", e.To, e.Environment, e.To)
	return sb.String()
}

func (e *RollbackRefusedError) Unwrap() error { return e.Err }

// RollbackRefusal turns the error of applying rb.Plan into what a rollback
// says: a refusal of the promotion check becomes a *RollbackRefusedError
// naming each model's gap; any other error is returned as it is.
func RollbackRefusal(rb *Rollback, err error) error {
	var perr *promotion.Error
	if err == nil || rb == nil || !errors.As(err, &perr) {
		return err
	}
	return &RollbackRefusedError{Environment: rb.Plan.Environment, PlanID: rb.Plan.ID, From: rb.From, To: rb.To,
		Verdicts: perr.Verdicts, Err: err}
}
