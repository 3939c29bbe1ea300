package ingest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gapless-dev/gapless/model/suggest"
	"github.com/gapless-dev/gapless/state"
)

// ResyncReason is the reason a resync's events and retired generation
// carry.
const ResyncReason = "resync requested"

// ResyncResult is what Resync did; its JSON form is stable.
type ResyncResult struct {
	Source string `json:"source"`
	// Retired is the build that was in flight and is now retired; 0: none
	// was.
	Retired int64 `json:"retired_generation"`
	// Planned is the generation planned in its place, unpinned: the next
	// ingest pass pins and builds it.
	Planned int64 `json:"planned_generation"`
	// Serving is the generation that keeps serving until Planned swaps in
	// (0: none yet).
	Serving int64 `json:"serving_generation"`
	// Unparked says the source was parked NEEDS_RESYNC, and the resync
	// cleared it.
	Unparked bool `json:"unparked"`
}

// UnregisteredSourceError is a source name the state store has no (live)
// source of. It wraps state.ErrNotFound.
type UnregisteredSourceError struct {
	Name string
	// Closest is the registered name nearest to Name ("" when none is
	// near).
	Closest string
	// Known is how many sources are registered.
	Known int
}

func (e *UnregisteredSourceError) Error() string {
	msg := fmt.Sprintf("unknown source %s", e.Name)
	switch {
	case e.Closest != "":
		msg += ": did you mean " + e.Closest + "?"
	case e.Known == 0:
		msg += ": no source is registered yet (the first `gapless ingest --once` registers the project's sources)"
	}
	return msg
}

func (e *UnregisteredSourceError) Unwrap() error { return state.ErrNotFound }

// lookup returns the named live source, or an *UnregisteredSourceError naming
// the closest registered name.
func lookup(ctx context.Context, store state.Store, name string) (*state.Source, error) {
	src, err := store.GetSource(ctx, name)
	if err == nil && src.RemovedAt.IsZero() {
		return src, nil
	}
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		return nil, fmt.Errorf("source %s: reading its state: %w", name, err)
	}
	all, err := store.ListSources(ctx, state.SourceFilter{})
	if err != nil {
		return nil, fmt.Errorf("listing the sources: %w", err)
	}
	names := make([]string, len(all))
	for i, s := range all {
		names[i] = s.Name
	}
	closest, _ := suggest.Closest(name, names)
	return nil, &UnregisteredSourceError{Name: name, Closest: closest, Known: len(all)}
}

// Resync rebuilds a source from scratch: it retires the build in flight,
// if any, requests a build (clearing a NEEDS_RESYNC park) and plans the new
// generation at once, without a pin, so that the caller can name it; the
// next ingest pass pins and builds it while the serving generation keeps
// serving.
//
// Invariants: the retirement is the state store's compare-and-swap on the
// building generation read (state.RequestBuildParams.Retire), so a build
// that swapped in meanwhile is never retired: Resync reads again and
// retries once. A retired generation's late chunk or swap is refused by the
// warehouse fence once the new generation is fenced, and its late
// RecordSwap by the state store. When an ingest pass plans a generation
// between the retirement and the plan (ErrBuildInFlight), that one is the
// resync's new build and is returned as Planned. An unknown or removed
// source is an *UnregisteredSourceError naming the closest registered name.
func Resync(ctx context.Context, store state.Store, source string, now time.Time) (ResyncResult, error) {
	res := ResyncResult{Source: source}
	var src *state.Source
	for try := 0; ; try++ {
		s, err := lookup(ctx, store, source)
		if err != nil {
			return res, err
		}
		res.Unparked = res.Unparked || s.ParkedReason != ""
		src, err = store.RequestBuild(ctx, state.RequestBuildParams{Source: source, Retire: s.Building, Reason: ResyncReason, Now: now})
		if errors.Is(err, state.ErrConflictingGeneration) && try == 0 {
			continue // the build moved meanwhile: read it again
		}
		if err != nil {
			return res, fmt.Errorf("source %s: requesting the resync: %w", source, err)
		}
		res.Retired = s.Building
		break
	}
	gen, err := store.PlanGeneration(ctx, state.PlanGenerationParams{Source: source, Kind: state.GenerationBackfill, Now: now})
	switch {
	case errors.Is(err, state.ErrBuildInFlight):
		s, err := lookup(ctx, store, source)
		if err != nil {
			return res, err
		}
		res.Planned, res.Serving = s.Building, s.Serving
		return res, nil
	case err != nil:
		return res, fmt.Errorf("source %s: planning the new generation: %w", source, err)
	}
	res.Planned, res.Serving = gen.Generation, src.Serving
	return res, nil
}
