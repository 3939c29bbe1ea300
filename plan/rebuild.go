package plan

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gapless-dev/gapless/dag"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/state"
)

// Source is what planning reads from state: environments, the snapshots
// they serve, and intervals. A state.Store is one; planning never writes.
type Source interface {
	state.Reader
	GetSnapshots(ctx context.Context, keys []state.SnapshotKey) (map[state.SnapshotKey]*snapshot.Snapshot, error)
}

var _ Source = state.Store(nil)

// Against reads what a plan for env is built against: the environment as it
// is now (nil when it does not exist or was invalidated: a plan then starts
// it afresh) and the snapshots its base serves, by model name. A new
// development environment's base is prod: it starts as a copy of prod and
// reuses its tables.
//
// A snapshot the environment names but the store lacks is an error: the
// state is damaged, and planning against it could drop a model.
func Against(ctx context.Context, store Source, env string) (*state.Environment, map[string]*snapshot.Snapshot, error) {
	current, err := live(ctx, store, env)
	if err != nil {
		return nil, nil, err
	}
	baseEnv := current
	if baseEnv == nil && env != Prod {
		if baseEnv, err = live(ctx, store, Prod); err != nil {
			return nil, nil, err
		}
	}
	base, err := Served(ctx, store, baseEnv)
	if err != nil {
		return nil, nil, err
	}
	return current, base, nil
}

func live(ctx context.Context, store state.Reader, name string) (*state.Environment, error) {
	e, err := store.GetEnvironment(ctx, name)
	if errors.Is(err, state.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading environment %s: %w", name, err)
	}
	if e.Invalidated {
		return nil, nil
	}
	return e, nil
}

// Served returns the snapshots env serves, by model name; empty for a nil
// env.
func Served(ctx context.Context, store Source, env *state.Environment) (map[string]*snapshot.Snapshot, error) {
	out := map[string]*snapshot.Snapshot{}
	if env == nil || len(env.Snapshots) == 0 {
		return out, nil
	}
	keys := make([]state.SnapshotKey, len(env.Snapshots))
	for i, r := range env.Snapshots {
		keys[i] = r.Key()
	}
	got, err := store.GetSnapshots(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("reading the snapshots environment %s serves: %w", env.Name, err)
	}
	for _, r := range env.Snapshots {
		s, ok := got[r.Key()]
		if !ok {
			return nil, fmt.Errorf("environment %s serves %s at %s, which is missing from the state store", env.Name, r.Name, r.Fingerprint)
		}
		out[r.Name] = s
	}
	return out, nil
}

// RebuildParams are the parameters of Rebuild.
type RebuildParams struct {
	// Prev is the plan to rebuild.
	Prev *Plan
	// ID is the new plan's id.
	ID            string
	Store         Source
	Additive      snapshot.Additive
	ExecutionTime time.Time
	Now           time.Time
}

// Rebuild builds a fresh plan for the same project source and the same
// operator choices as Prev (the replan policy): the models are Prev's own
// snapshots, not whatever the project folder holds now, the options are
// Prev's (policy included), and the environment is read as it is now. The
// versions come out the same when the environment has not moved to another
// plan, so every stored snapshot, table and interval is reused and only
// what is missing now (the tail the scheduler added) is backfilled.
func Rebuild(ctx context.Context, p RebuildParams) (*Plan, error) {
	if p.Prev == nil {
		return nil, errors.New("rebuild: no plan")
	}
	current, base, err := Against(ctx, p.Store, p.Prev.Environment)
	if err != nil {
		return nil, err
	}
	next := make(map[string]*snapshot.Snapshot, len(p.Prev.Snapshots))
	edges := make(map[string][]string, len(p.Prev.Snapshots))
	for _, s := range p.Prev.Snapshots {
		c := *s // Build assigns versions; Prev stays as it was
		next[s.Name] = &c
		edges[s.Name] = s.Parents
	}
	g, err := dag.New(edges)
	if err != nil {
		return nil, fmt.Errorf("rebuilding plan %s: %w", p.Prev.ID, err)
	}
	pl, err := Build(ctx, BuildParams{
		ID: p.ID, Environment: p.Prev.Environment, Current: current, Base: base, Next: next, Graph: g,
		Intervals: p.Store, Additive: p.Additive, ExecutionTime: p.ExecutionTime, Now: p.Now, Options: p.Prev.Options,
	})
	if err != nil {
		return nil, fmt.Errorf("rebuilding plan %s: %w", p.Prev.ID, err)
	}
	return pl, nil
}
