package run

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/gapless-dev/gapless/cadence"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/state"
)

// Reader is what NextDue reads of the state store: an environment, and the
// snapshots it serves. Both state stores implement it, as every state.Store
// does; a run itself (Once) needs the whole store, to record what it
// computes.
type Reader interface {
	GetEnvironment(ctx context.Context, name string) (*state.Environment, error)
	GetSnapshots(ctx context.Context, keys []state.SnapshotKey) (map[state.SnapshotKey]*snapshot.Snapshot, error)
}

// Next is when an environment next has work: the earliest time after an
// execution time at which an interval of one of its models becomes due.
type Next struct {
	Model string
	At    time.Time
}

// NextDue reads what env serves and returns the earliest cadence.Spec
// NextDue after exec over its models (only the selected ones when any are
// given), EXTERNAL models and models without a schedule excepted; ties go
// to the model first in dependency order. ok is false when no model will
// ever have an interval due again (every one past its end).
//
// It answers "when is the next run worth it" after a run found nothing due,
// from state alone (cron arithmetic, no warehouse).
func NextDue(ctx context.Context, store Reader, env string, exec time.Time, selected []string) (next Next, ok bool, err error) {
	e, err := store.GetEnvironment(ctx, env)
	if err != nil {
		return Next{}, false, fmt.Errorf("reading environment %s: %w", env, err)
	}
	set, order, err := served(ctx, store, e, nil)
	if err != nil {
		return Next{}, false, fmt.Errorf("run %s: %w", env, err)
	}
	for _, name := range order {
		s := set[name]
		if s.Model.Kind == model.KindExternal || (len(selected) > 0 && !slices.Contains(selected, name)) {
			continue
		}
		spec, err := cadence.ForModel(s.Model)
		if err != nil {
			continue // no schedule (no start): never due
		}
		at, due := spec.NextDue(exec)
		if due && (!ok || at.Before(next.At)) {
			next, ok = Next{Model: name, At: at}, true
		}
	}
	return next, ok, nil
}
