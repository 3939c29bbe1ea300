package plan

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/gapless-dev/gapless/dag"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/model"
	"github.com/gapless-dev/gapless/snapshot"
	"github.com/gapless-dev/gapless/state"
)

// SelectBackfill restricts the next state of a plan to what --backfill-model
// backfills: the named models and their upstream models take the project's
// snapshots, every other model keeps the snapshot base serves (a new model
// outside them is left out), exactly as Select does. So the plan promotes
// nothing it does not backfill: the environment's other views keep
// serving their complete tables, and the strict no-gap check holds for
// every model it does promote. Without names it returns next and graph as
// they are.
func SelectBackfill(next map[string]*snapshot.Snapshot, graph *dag.Graph, base map[string]*snapshot.Snapshot, names []string) (map[string]*snapshot.Snapshot, *dag.Graph, error) {
	if len(names) == 0 {
		return next, graph, nil
	}
	for _, n := range names {
		if _, ok := next[n]; !ok {
			return nil, nil, fmt.Errorf("--backfill-model %s: no such model in the plan", n)
		}
	}
	out, g, err := Select(next, graph, base, names)
	if err != nil {
		return nil, nil, fmt.Errorf("--backfill-model: %w", err)
	}
	return out, g, nil
}

// Deferred names the models of project (the project's snapshots, after
// --select-model) whose change the plan leaves for later because
// --backfill-model did not select them: the project's snapshot differs from
// the one the plan serves (or the plan does not serve the model), sorted.
func Deferred(pl *Plan, project map[string]*snapshot.Snapshot) []string {
	if len(pl.Options.BackfillModels) == 0 {
		return nil
	}
	served := map[string]string{}
	for _, s := range pl.Snapshots {
		served[s.Name] = s.Fingerprint.String()
	}
	var out []string
	for name, s := range project {
		if fp, ok := served[name]; !ok || fp != s.Fingerprint.String() {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// emptyWork is the record an empty backfill makes instead of backfill b of
// model m: its ranges, or for a kind built whole the range it records (none
// for a kind without one).
func emptyWork(b Backfill, m *model.Model, exec time.Time) (Backfill, bool) {
	if !b.Whole {
		return b, !b.Ranges.IsEmpty()
	}
	r, ok := wholeRange(m, exec)
	if !ok {
		return b, false
	}
	b.Ranges = interval.NewSet(r)
	return b, true
}

// emptyEventData is the Data of an EventEmptyBackfill event.
type emptyEventData struct {
	Version string   `json:"version"`
	Ranges  []string `json:"ranges"`
	Whole   bool     `json:"whole,omitempty"`
}

// EmptyRecorder is the part of a state store RecordEmpty writes to.
type EmptyRecorder interface {
	AddIntervals(ctx context.Context, p state.IntervalsParams) error
	AppendEvents(ctx context.Context, events ...state.Event) ([]state.Event, error)
}

// RecordEmpty records the plan's empty backfill (Plan.Empty) as computed,
// without computing it, and appends one EventEmptyBackfill history event
// per model, naming the plan, the version and the ranges: the intervals are
// covered with no rows, an explicit decision the history keeps. It is run
// once the plan's tables exist and before promotion (apply runs it at the
// end of its backfill stage), so the no-gap check at promotion sees them
// covered. Recording is idempotent (AddIntervals merges).
func RecordEmpty(ctx context.Context, store EmptyRecorder, pl *Plan, now time.Time) error {
	if len(pl.Empty) == 0 {
		return nil
	}
	var evs []state.Event
	for _, e := range pl.Empty {
		if err := store.AddIntervals(ctx, state.IntervalsParams{Key: state.VersionKey{Name: e.Name, Version: e.Version},
			Ranges: e.Ranges, Now: now}); err != nil {
			return fmt.Errorf("recording the empty backfill of %s: %w", e.Name, err)
		}
		data := emptyEventData{Version: e.Version, Whole: e.Whole, Ranges: []string{}}
		for r := range e.Ranges.All() {
			data.Ranges = append(data.Ranges, r.String())
		}
		b, err := json.Marshal(data)
		if err != nil {
			return fmt.Errorf("encoding the empty backfill event of %s: %w", e.Name, err)
		}
		evs = append(evs, state.Event{At: now, Kind: state.EventEmptyBackfill, Environment: pl.Environment,
			Model: e.Name, PlanID: pl.ID, Reason: "--empty-backfill", Data: b})
	}
	if _, err := store.AppendEvents(ctx, evs...); err != nil {
		return fmt.Errorf("recording the empty backfill's history: %w", err)
	}
	return nil
}
