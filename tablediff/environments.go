package tablediff

import (
	"context"
	"errors"
	"fmt"

	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/model/suggest"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

// UnknownEnvironmentError is an environment the state store does not hold.
type UnknownEnvironmentError struct{ Name string }

func (e *UnknownEnvironmentError) Error() string {
	return fmt.Sprintf("environment %s does not exist; create it with: gapless plan %s", e.Name, e.Name)
}

// ModelNotServedError is a model an environment does not serve.
type ModelNotServedError struct {
	Environment string
	Model       string
	Hint        string // "; did you mean X?" or ""
}

func (e *ModelNotServedError) Error() string {
	return fmt.Sprintf("model %s: environment %s does not serve it%s", e.Model, e.Environment, e.Hint)
}

// EnvironmentParams compares one model as two environments serve it.
type EnvironmentParams struct {
	Store  state.Store
	Engine warehouse.Engine
	Model  string
	// Source and Target are environment names (ENV1 and ENV2 of
	// ENV1:ENV2).
	Source, Target string
	// On are the key columns; empty for the model's grain (the target
	// environment's version of the model, else the source's).
	On []string
	// The rest is as in Params.
	Where        string
	SkipColumns  []string
	Limit        int
	Decimals     int
	Sample       bool
	SkipKeyCheck bool
}

// Environments compares the rows of p.Model that environment p.Source
// serves with those p.Target serves, reading each through the
// environment's view (<schema>.<table> in prod, <schema>__<env>.<table>
// elsewhere), the tables a user of the environment queries. It reads the
// state store and the warehouse and writes neither. Errors:
// *UnknownEnvironmentError, *ModelNotServedError, ErrNoKeys (wrapped,
// naming the model) for a model without grain and no On, and Diff's.
func Environments(ctx context.Context, p EnvironmentParams) (*Result, error) {
	var grain []string
	sides := make([]Side, 2)
	for i, env := range []string{p.Source, p.Target} {
		m, err := servedModel(ctx, p.Store, env, p.Model)
		if err != nil {
			return nil, err
		}
		if m.Kind == model.KindExternal {
			return nil, fmt.Errorf("model %s is EXTERNAL: environments do not serve it through views, so there is nothing to compare", p.Model)
		}
		if len(m.Grain) > 0 {
			grain = m.Grain // the target's grain wins: it comes second
		}
		sides[i] = Side{Name: env, Table: warehouse.Table{Schema: snapshot.EnvironmentSchema(m.Schema(), env), Name: m.Table()}}
	}
	keys := p.On
	if len(keys) == 0 {
		keys = grain
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("model %s has no grain: %w; give the columns that identify a row with --on, or add grain (...) to the model", p.Model, ErrNoKeys)
	}
	return Diff(ctx, Params{
		Engine: p.Engine, Source: sides[0], Target: sides[1], Keys: keys, Where: p.Where,
		SkipColumns: p.SkipColumns, Limit: p.Limit, Decimals: p.Decimals, Sample: p.Sample, SkipKeyCheck: p.SkipKeyCheck,
	})
}

// servedModel is the model env serves under name, as recorded in state.
func servedModel(ctx context.Context, store state.Store, env, name string) (*model.Model, error) {
	e, err := store.GetEnvironment(ctx, env)
	if errors.Is(err, state.ErrNotFound) {
		return nil, &UnknownEnvironmentError{Name: env}
	}
	if err != nil {
		return nil, fmt.Errorf("reading environment %s: %w", env, err)
	}
	names := make([]string, 0, len(e.Snapshots))
	for _, ref := range e.Snapshots {
		if ref.Name != name {
			names = append(names, ref.Name)
			continue
		}
		snaps, err := store.GetSnapshots(ctx, []state.SnapshotKey{ref.Key()})
		if err != nil {
			return nil, fmt.Errorf("reading the snapshot environment %s serves for %s: %w", env, name, err)
		}
		s, ok := snaps[ref.Key()]
		if !ok {
			return nil, fmt.Errorf("environment %s serves %s at %s, which the state store does not hold", env, name, ref.Fingerprint)
		}
		return s.Model, nil
	}
	hint := ""
	if s, ok := suggest.Closest(name, names); ok {
		hint = fmt.Sprintf("; did you mean %s?", s)
	}
	return nil, &ModelNotServedError{Environment: env, Model: name, Hint: hint}
}
