package statetest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/state"
)

// sourceTests check the sources state machine (state.SourceStore): every
// transition a compare-and-swap pinned to a generation, refusing with a
// typed error and writing nothing, and recording its history event.
func sourceTests() []test {
	return []test{
		{"EnsureIsIdempotent", testSourceEnsure},
		{"PlanGenerationIsExclusive", testSourcePlanExclusive},
		{"PlanDefersOncePerBuildInFlight", testSourcePlanDefers},
		{"GenerationsNeverReused", testSourceGenerationsNeverReused},
		{"RecordSwapPinnedToGeneration", testSourceRecordSwapPinned},
		{"RetireRefusesOtherGeneration", testSourceRetireOther},
		{"SwapAndRetireRaceExactlyOneWins", testSourceSwapRetireRace},
		{"RequestBuildRetiresOnlyTheGenerationRead", testSourceRequestBuild},
		{"PlanCanKeepTheBuildRequest", testSourcePlanKeepsRequest},
		{"ReplaceRunIsPinnedWhenItsFinalArrives", testSourcePin},
		{"ResyncBackfillIsPinnedLater", testSourcePinBackfill},
		{"ParkKeepsServing", testSourcePark},
		{"EachTransitionWritesItsEvent", testSourceEvents},
		{"RejectsBadCalls", testSourceBadCalls},
	}
}

const src = "raw.events"

// pin returns a pointer to p.
func pin(p int64) *int64 { return &p }

// ensure registers src (files connector, hash h) at now.
func ensure(t testing.TB, b *bundle, h string, now time.Time) *state.Source {
	t.Helper()
	out, err := b.store.EnsureSources(b.ctx, state.EnsureSourcesParams{
		Sources: []state.SourceDefinition{{Name: src, Connector: "files", DefinitionHash: h}}, Now: now,
	})
	require.NoError(t, err)
	require.Len(t, out, 1)
	return out[0]
}

// plan plans a backfill of src pinned at p, failing the test on error.
func plan(t testing.TB, b *bundle, p int64, now time.Time) state.Generation {
	t.Helper()
	g, err := b.store.PlanGeneration(b.ctx, state.PlanGenerationParams{
		Source: src, Kind: state.GenerationBackfill, Pin: pin(p), PinLabel: fmt.Sprintf("file #%d", p), Chunks: 3, Now: now,
	})
	require.NoError(t, err)
	return g
}

// swap records the swap of generation g of src, failing on error.
func swap(t testing.TB, b *bundle, g int64, now time.Time) *state.Source {
	t.Helper()
	s, err := b.store.RecordSwap(b.ctx, state.RecordSwapParams{Source: src, Generation: g, Now: now})
	require.NoError(t, err)
	return s
}

// getSource reads src.
func getSource(t testing.TB, b *bundle) *state.Source {
	t.Helper()
	s, err := b.store.GetSource(b.ctx, src)
	require.NoError(t, err)
	return s
}

// sourceEvents returns the kinds of src's events, in order.
func sourceEvents(t testing.TB, b *bundle) []state.Event {
	t.Helper()
	evs, err := b.store.ListEvents(b.ctx, state.EventFilter{Model: src})
	require.NoError(t, err)
	return evs
}

func kinds(evs []state.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Kind
	}
	return out
}

// eventData decodes an event's SourceEventData.
func eventData(t testing.TB, e state.Event) state.SourceEventData {
	t.Helper()
	var d state.SourceEventData
	require.NoError(t, json.Unmarshal(e.Data, &d), "event %s data %s", e.Kind, e.Data)
	return d
}

// generation returns generation g of s.
func generation(t testing.TB, s *state.Source, g int64) state.Generation {
	t.Helper()
	for _, gen := range s.Generations {
		if gen.Generation == g {
			return gen
		}
	}
	require.Failf(t, "no such generation", "source %s has no generation %d: %+v", s.Name, g, s.Generations)
	return state.Generation{}
}

// primed registers src and makes generation 1 serve.
func primed(t testing.TB, b *bundle) *state.Source {
	t.Helper()
	ensure(t, b, "h1", hour(0))
	plan(t, b, 10, hour(1))
	return swap(t, b, 1, hour(2))
}

func testSourceEnsure(t *testing.T, b *bundle) {
	// Scenario: a source is registered; registering it again writes
	// nothing; a changed definition is recorded but requests no build. A
	// new source is PENDING_BACKFILL: nothing serves, a build is owed.
	s := ensure(t, b, "h1", hour(0))
	require.Equal(t, state.SourcePendingBackfill, s.State())
	require.True(t, s.BuildRequested)
	require.Zero(t, s.Building)
	require.Zero(t, s.Serving)
	require.Equal(t, "files", s.Connector)
	require.Equal(t, hour(0), s.RegisteredAt.UTC())

	again := ensure(t, b, "h1", hour(1))
	require.Equal(t, hour(0), again.UpdatedAt.UTC(), "registering the same definition wrote the row")
	require.Len(t, sourceEvents(t, b), 1)

	plan(t, b, 10, hour(2))
	swap(t, b, 1, hour(3))
	changed := ensure(t, b, "h2", hour(4))
	require.Equal(t, "h2", changed.DefinitionHash)
	require.Equal(t, state.SourcePrimed, changed.State(), "a changed definition requested a build")
	evs := sourceEvents(t, b)
	require.Equal(t, []string{state.EventSourceRegistered, state.EventSourcePlanned, state.EventSourceSwapped, state.EventSourceRegistered}, kinds(evs))
	require.Equal(t, state.ReasonSourceNew, evs[0].Reason)
	require.Equal(t, state.ReasonSourceChanged, evs[3].Reason)

	list, err := b.store.ListSources(b.ctx, state.SourceFilter{})
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, int64(1), list[0].Serving)
	require.Len(t, list[0].Generations, 1)
	_, err = b.store.GetSource(b.ctx, "raw.missing")
	require.ErrorIs(t, err, state.ErrNotFound)
}

func testSourcePlanExclusive(t *testing.T, b *bundle) {
	// Scenario: 8 planners plan a build of one source at the same instant.
	// Exactly one wins, with generation 1; the 7 others get
	// ErrBuildInFlight. One generation exists, one source_planned event.
	ensure(t, b, "h1", hour(0))
	gens := make([]state.Generation, racers)
	errs := make([]error, racers)
	race(racers, func(i int) {
		gens[i], errs[i] = b.store.PlanGeneration(b.ctx, state.PlanGenerationParams{
			Source: src, Kind: state.GenerationBackfill, Pin: pin(int64(i)), Now: hour(1),
		})
	})
	winner := -1
	for i, err := range errs {
		if err == nil {
			require.Equal(t, -1, winner, "two planners won")
			winner = i
			continue
		}
		require.ErrorIs(t, err, state.ErrBuildInFlight)
	}
	require.NotEqual(t, -1, winner, "no planner won")
	require.Equal(t, int64(1), gens[winner].Generation)
	s := getSource(t, b)
	require.Equal(t, int64(1), s.Building)
	require.Equal(t, int64(1), s.LastGeneration)
	require.Len(t, s.Generations, 1)
	require.Equal(t, int64(winner), *s.Generations[0].Pin)
	require.Equal(t, state.SourceBackfilling, s.State())
	planned := 0
	for _, e := range sourceEvents(t, b) {
		if e.Kind == state.EventSourcePlanned {
			planned++
		}
	}
	require.Equal(t, 1, planned)
}

func testSourcePlanDefers(t *testing.T, b *bundle) {
	// Scenario: a replace run is building (generation 2, no pin yet); a
	// resync's backfill is planned three times while it builds: each is
	// refused with ErrBuildInFlight, and one source_plan_deferred event
	// (naming generation 2) records the deferral, not one per attempt.
	// Once 2 swaps, the deferred backfill plans generation 3.
	primed(t, b)
	rep, err := b.store.PlanGeneration(b.ctx, state.PlanGenerationParams{Source: src, Kind: state.GenerationReplace, Now: hour(3)})
	require.NoError(t, err)
	require.Equal(t, int64(2), rep.Generation)
	require.Nil(t, rep.Pin)
	_, err = b.store.RequestBuild(b.ctx, state.RequestBuildParams{Source: src, Reason: "resync", Now: hour(4)})
	require.NoError(t, err)
	before := getSource(t, b)
	for i := range 3 {
		_, err := b.store.PlanGeneration(b.ctx, state.PlanGenerationParams{
			Source: src, Kind: state.GenerationBackfill, Pin: pin(20), Now: hour(5 + i),
		})
		require.ErrorIs(t, err, state.ErrBuildInFlight)
	}
	after := getSource(t, b)
	require.Equal(t, before, after, "a deferred plan changed the source")
	var deferred []state.Event
	for _, e := range sourceEvents(t, b) {
		if e.Kind == state.EventSourcePlanDeferred {
			deferred = append(deferred, e)
		}
	}
	require.Len(t, deferred, 1)
	require.Equal(t, int64(2), eventData(t, deferred[0]).Generation)
	require.Equal(t, state.ReasonSourceBuildInFlight, deferred[0].Reason)

	_, err = b.store.PinGeneration(b.ctx, state.PinGenerationParams{Source: src, Generation: 2, Pin: 15, Chunks: 2, Now: hour(9)})
	require.NoError(t, err)
	swap(t, b, 2, hour(10))
	require.Equal(t, int64(3), plan(t, b, 20, hour(11)).Generation)
}

func testSourceGenerationsNeverReused(t *testing.T, b *bundle) {
	// Scenario: generation 1 is planned and retired; a replan at the same
	// pin gets 2, never 1 again. 2 swaps; a removal pinned to a stale
	// serving generation is refused; the source is removed (2 is retired,
	// the tombstone keeps the count) and defined again: it is a fresh
	// PENDING_BACKFILL source whose next build is 3, and the old
	// generations are still listed.
	ensure(t, b, "h1", hour(0))
	require.Equal(t, int64(1), plan(t, b, 10, hour(1)).Generation)
	_, err := b.store.RetireGeneration(b.ctx, state.RetireGenerationParams{Source: src, Generation: 1, Reason: "chunk failed", Now: hour(2)})
	require.NoError(t, err)
	require.Equal(t, int64(2), plan(t, b, 10, hour(3)).Generation)
	s := swap(t, b, 2, hour(4))
	require.Equal(t, state.SourcePrimed, s.State())

	_, err = b.store.RemoveSource(b.ctx, state.RemoveSourceParams{Source: src, Expect: state.SourceExpectation{Serving: 1}, Now: hour(5)})
	require.ErrorIs(t, err, state.ErrConflictingGeneration, "a removal pinned to a stale serving generation")
	require.Equal(t, s, getSource(t, b))
	removed, err := b.store.RemoveSource(b.ctx, state.RemoveSourceParams{Source: src, Expect: state.SourceExpectation{Serving: 2}, Now: hour(5)})
	require.NoError(t, err)
	require.Equal(t, hour(5), removed.RemovedAt.UTC())
	list, err := b.store.ListSources(b.ctx, state.SourceFilter{})
	require.NoError(t, err)
	require.Empty(t, list, "a removed source is listed")
	_, err = b.store.PlanGeneration(b.ctx, state.PlanGenerationParams{Source: src, Kind: state.GenerationBackfill, Pin: pin(1), Now: hour(6)})
	require.ErrorIs(t, err, state.ErrNotFound)
	tomb := getSource(t, b)
	require.Equal(t, int64(2), tomb.LastGeneration)
	require.Equal(t, state.GenerationRetired, generation(t, tomb, 2).Status)
	require.Equal(t, state.RetiredRemoved, generation(t, tomb, 2).RetiredReason)

	again := ensure(t, b, "h1", hour(7))
	require.Equal(t, state.SourcePendingBackfill, again.State())
	require.Zero(t, again.Serving)
	require.True(t, again.RemovedAt.IsZero())
	require.Equal(t, int64(3), plan(t, b, 10, hour(8)).Generation)
	s = getSource(t, b)
	require.Len(t, s.Generations, 3)
	for i, g := range s.Generations {
		require.Equal(t, int64(i+1), g.Generation)
	}
	evs := sourceEvents(t, b)
	require.Equal(t, state.EventSourceRegistered, evs[len(evs)-2].Kind)
	require.Equal(t, state.ReasonSourceDefinedAgain, evs[len(evs)-2].Reason)
}

func testSourceRecordSwapPinned(t *testing.T, b *bundle) {
	// Scenario: the seed's bug 1. Generation 1 serves; a resync plans 2;
	// 2's last chunk is in its (uncancellable) swap transaction when a
	// second resync retires 2 and 3 is planned. 2's late promotion
	// (RecordSwap(2)) is refused with ErrConflictingGeneration: 3 stays
	// building, 1 keeps serving, no event is written. 3's swap then
	// serves 3; a replay of it is a no-op; 2's promotion is still refused.
	primed(t, b)
	_, err := b.store.RequestBuild(b.ctx, state.RequestBuildParams{Source: src, Reason: "resync", Now: hour(3)})
	require.NoError(t, err)
	plan(t, b, 20, hour(4))
	_, err = b.store.RequestBuild(b.ctx, state.RequestBuildParams{Source: src, Retire: 2, Reason: "resync again", Now: hour(5)})
	require.NoError(t, err)
	plan(t, b, 30, hour(6))

	before, nEvents := getSource(t, b), len(sourceEvents(t, b))
	_, err = b.store.RecordSwap(b.ctx, state.RecordSwapParams{Source: src, Generation: 2, Now: hour(7)})
	require.ErrorIs(t, err, state.ErrConflictingGeneration)
	require.Equal(t, before, getSource(t, b), "a retired generation's late swap changed the source")
	require.Len(t, sourceEvents(t, b), nEvents, "a refused swap wrote an event")
	require.Equal(t, int64(3), before.Building)
	require.Equal(t, int64(1), before.Serving)

	s := swap(t, b, 3, hour(8))
	require.Equal(t, int64(3), s.Serving)
	require.Zero(t, s.Building)
	require.Equal(t, state.SourcePrimed, s.State())
	require.Equal(t, state.GenerationSwapped, generation(t, s, 3).Status)
	require.Equal(t, state.GenerationRetired, generation(t, s, 2).Status)
	require.Equal(t, "resync again", generation(t, s, 2).RetiredReason)
	require.Equal(t, state.RetiredReplaced, generation(t, s, 1).RetiredReason)
	require.Equal(t, hour(8), generation(t, s, 3).SwappedAt.UTC())

	nEvents = len(sourceEvents(t, b))
	require.Equal(t, s, swap(t, b, 3, hour(9)), "a replayed swap changed the source")
	_, err = b.store.RecordSwap(b.ctx, state.RecordSwapParams{Source: src, Generation: 2, Now: hour(9)})
	require.ErrorIs(t, err, state.ErrConflictingGeneration)
	require.Equal(t, s, getSource(t, b))
	require.Len(t, sourceEvents(t, b), nEvents)
	for _, e := range sourceEvents(t, b) {
		if e.Kind == state.EventSourceSwapped {
			require.NotEqual(t, int64(2), eventData(t, e).Generation, "generation 2 was recorded swapped")
		}
	}
}

func testSourceRetireOther(t *testing.T, b *bundle) {
	// Scenario: generation 2 builds (1 serves). Retiring 1 (it serves), 3
	// (never issued) or 2 a second time after it is retired is refused
	// with ErrConflictingGeneration and changes nothing; retiring 2 once
	// succeeds and leaves 1 serving with a build owed.
	primed(t, b)
	plan(t, b, 20, hour(3))
	before := getSource(t, b)
	for _, g := range []int64{1, 3, 0} {
		_, err := b.store.RetireGeneration(b.ctx, state.RetireGenerationParams{Source: src, Generation: g, Reason: "x", Now: hour(4)})
		require.ErrorIsf(t, err, state.ErrConflictingGeneration, "generation %d", g)
	}
	require.Equal(t, before, getSource(t, b))
	s, err := b.store.RetireGeneration(b.ctx, state.RetireGenerationParams{Source: src, Generation: 2, Reason: "x", Now: hour(5)})
	require.NoError(t, err)
	require.Zero(t, s.Building)
	require.Equal(t, int64(1), s.Serving)
	require.True(t, s.BuildRequested)
	require.Equal(t, state.SourcePendingBackfill, s.State())
	require.Equal(t, state.GenerationRetired, generation(t, s, 2).Status)
	require.Equal(t, hour(5), generation(t, s, 2).RetiredAt.UTC())
	_, err = b.store.RetireGeneration(b.ctx, state.RetireGenerationParams{Source: src, Generation: 2, Reason: "x", Now: hour(6)})
	require.ErrorIs(t, err, state.ErrConflictingGeneration)
	require.Equal(t, s, getSource(t, b))
}

func testSourceSwapRetireRace(t *testing.T, b *bundle) {
	// Scenario: generation 2 builds; 4 goroutines record its swap while 4
	// retire it, all at once. Exactly one transition wins: either 2 serves
	// and every retire was refused, or 2 is retired and every swap was
	// refused; each loser got ErrConflictingGeneration (a swap racing a
	// winning swap is its replay: a no-op).
	primed(t, b)
	plan(t, b, 20, hour(3))
	errs := make([]error, racers)
	race(racers, func(i int) {
		if i%2 == 0 {
			_, errs[i] = b.store.RecordSwap(b.ctx, state.RecordSwapParams{Source: src, Generation: 2, Now: hour(4)})
			return
		}
		_, errs[i] = b.store.RetireGeneration(b.ctx, state.RetireGenerationParams{Source: src, Generation: 2, Reason: "resync", Now: hour(4)})
	})
	swaps, retires := 0, 0
	for i, err := range errs {
		switch {
		case err == nil && i%2 == 0:
			swaps++
		case err == nil:
			retires++
		default:
			require.ErrorIsf(t, err, state.ErrConflictingGeneration, "racer %d", i)
		}
	}
	s := getSource(t, b)
	n := map[string]int{}
	for _, e := range sourceEvents(t, b) {
		n[e.Kind]++
	}
	if s.Serving == 2 {
		require.Equal(t, [2]int{racers / 2, 0}, [2]int{swaps, retires}, "the swap won: every swap (or its replay) succeeds, every retire is refused")
		require.Equal(t, state.GenerationSwapped, generation(t, s, 2).Status)
		require.Equal(t, [2]int{1, 0}, [2]int{n[state.EventSourceSwapped] - 1, n[state.EventSourceRetired]})
		return
	}
	require.Equal(t, [2]int{0, 1}, [2]int{swaps, retires}, "the retire won: exactly one retire succeeds, every swap is refused")
	require.Equal(t, int64(1), s.Serving)
	require.Equal(t, state.GenerationRetired, generation(t, s, 2).Status)
	require.Equal(t, [2]int{0, 1}, [2]int{n[state.EventSourceSwapped] - 1, n[state.EventSourceRetired]})
}

func testSourceRequestBuild(t *testing.T, b *bundle) {
	// Scenario: a resync that read generation 2 building retires it with
	// the request, in one transaction; one that read 2 when 3 now builds is
	// refused and writes nothing (neither the retire nor the request).
	primed(t, b)
	plan(t, b, 20, hour(3))
	s, err := b.store.RequestBuild(b.ctx, state.RequestBuildParams{Source: src, Retire: 2, Reason: "resync", Now: hour(4)})
	require.NoError(t, err)
	require.Zero(t, s.Building)
	require.True(t, s.BuildRequested)
	require.Equal(t, state.GenerationRetired, generation(t, s, 2).Status)
	plan(t, b, 30, hour(5))
	before, n := getSource(t, b), len(sourceEvents(t, b))
	require.False(t, before.BuildRequested, "planning did not take the request")
	_, err = b.store.RequestBuild(b.ctx, state.RequestBuildParams{Source: src, Retire: 2, Reason: "stale resync", Now: hour(6)})
	require.ErrorIs(t, err, state.ErrConflictingGeneration)
	require.Equal(t, before, getSource(t, b))
	require.Len(t, sourceEvents(t, b), n)
}

func testSourcePlanKeepsRequest(t *testing.T, b *bundle) {
	// Scenario: a primed source is owed a build (a resync); a replace run
	// is planned with KeepRequested: it builds, and the request stays, in
	// the same transaction, so that the resync is built after the run
	// swaps. Planning that build (without KeepRequested) takes the
	// request; KeepRequested never makes a request of its own.
	primed(t, b)
	_, err := b.store.RequestBuild(b.ctx, state.RequestBuildParams{Source: src, Reason: "resync", Now: hour(3)})
	require.NoError(t, err)
	g, err := b.store.PlanGeneration(b.ctx, state.PlanGenerationParams{Source: src, Kind: state.GenerationReplace,
		Pin: pin(20), KeepRequested: true, Now: hour(4)})
	require.NoError(t, err)
	require.Equal(t, int64(2), g.Generation)
	s := getSource(t, b)
	require.Equal(t, int64(2), s.Building)
	require.True(t, s.BuildRequested, "the resync is still owed")
	swap(t, b, 2, hour(5))
	require.True(t, getSource(t, b).BuildRequested, "the swap of the run keeps the request")
	plan(t, b, 30, hour(6))
	require.False(t, getSource(t, b).BuildRequested, "the resync's build takes it")
	swap(t, b, 3, hour(7))
	_, err = b.store.PlanGeneration(b.ctx, state.PlanGenerationParams{Source: src, Kind: state.GenerationReplace,
		Pin: pin(40), KeepRequested: true, Now: hour(8)})
	require.NoError(t, err)
	require.False(t, getSource(t, b).BuildRequested, "nothing was owed: nothing is kept")
}

func testSourcePin(t *testing.T, b *bundle) {
	// Scenario: a replace run is planned before its final batch arrives
	// (no pin); its swap is refused until it is pinned. Pinning it records
	// the pin and chunk count; pinning again, or pinning a generation that
	// is not building, is refused with ErrConflictingGeneration.
	ensure(t, b, "h1", hour(0))
	g, err := b.store.PlanGeneration(b.ctx, state.PlanGenerationParams{Source: src, Kind: state.GenerationReplace, PinLabel: "full/run-7", Now: hour(1)})
	require.NoError(t, err)
	_, err = b.store.RecordSwap(b.ctx, state.RecordSwapParams{Source: src, Generation: g.Generation, Now: hour(2)})
	require.Error(t, err)
	require.Zero(t, getSource(t, b).Serving)
	pinned, err := b.store.PinGeneration(b.ctx, state.PinGenerationParams{Source: src, Generation: 1, Pin: 42, PinLabel: "full/run-7 (3 files)", Chunks: 3, Now: hour(3)})
	require.NoError(t, err)
	require.Equal(t, int64(42), *pinned.Pin)
	s := getSource(t, b)
	require.Equal(t, pinned, generation(t, s, 1))
	require.Equal(t, state.GenerationReplace, generation(t, s, 1).Kind)
	require.Equal(t, 3, generation(t, s, 1).Chunks)
	for _, gen := range []int64{1, 2} {
		_, err = b.store.PinGeneration(b.ctx, state.PinGenerationParams{Source: src, Generation: gen, Pin: 43, Now: hour(4)})
		require.ErrorIsf(t, err, state.ErrConflictingGeneration, "generation %d", gen)
	}
	require.Equal(t, s, getSource(t, b))
	require.Equal(t, int64(1), swap(t, b, 1, hour(5)).Serving)
}

func testSourcePinBackfill(t *testing.T, b *bundle) {
	// Scenario: a resync plans a backfill at once, without a pin, so that
	// it can name the new generation; the pass that builds it pins it. It
	// is building (no second plan while it is), kind backfill, unpinned,
	// and its pin is recorded once.
	ensure(t, b, "h1", hour(0))
	g, err := b.store.PlanGeneration(b.ctx, state.PlanGenerationParams{Source: src, Kind: state.GenerationBackfill, Now: hour(1)})
	require.NoError(t, err)
	require.Nil(t, g.Pin)
	require.Equal(t, state.GenerationBuilding, g.Status)
	s := getSource(t, b)
	require.Equal(t, g.Generation, s.Building)
	require.Equal(t, state.GenerationBackfill, generation(t, s, g.Generation).Kind)
	_, err = b.store.PlanGeneration(b.ctx, state.PlanGenerationParams{Source: src, Kind: state.GenerationBackfill, Pin: pin(3), Now: hour(2)})
	require.ErrorIs(t, err, state.ErrBuildInFlight)
	pinned, err := b.store.PinGeneration(b.ctx, state.PinGenerationParams{Source: src, Generation: g.Generation, Pin: 7, Chunks: 2, Now: hour(3)})
	require.NoError(t, err)
	require.Equal(t, int64(7), *pinned.Pin)
	_, err = b.store.PinGeneration(b.ctx, state.PinGenerationParams{Source: src, Generation: g.Generation, Pin: 8, Now: hour(4)})
	require.ErrorIs(t, err, state.ErrConflictingGeneration)
}

func testSourcePark(t *testing.T, b *bundle) {
	// Scenario: a primed source loses a landing file it needs: it is parked
	// NEEDS_RESYNC and keeps serving generation 1. A park pinned to stale
	// generations is refused; parking again with the same reason writes
	// nothing; a backfill cannot be planned while parked, a replace run
	// (AllowParked) can, and its swap heals the park. A resync
	// (RequestBuild) also clears a park, and UnparkSource clears one pinned
	// to what the caller read.
	primed(t, b)
	_, err := b.store.ParkSource(b.ctx, state.ParkSourceParams{Source: src, Expect: state.SourceExpectation{Serving: 0}, Reason: "x", Now: hour(3)})
	require.ErrorIs(t, err, state.ErrConflictingGeneration)
	s, err := b.store.ParkSource(b.ctx, state.ParkSourceParams{Source: src, Expect: state.SourceExpectation{Serving: 1}, Reason: "landing/events/a.csv removed", Now: hour(3)})
	require.NoError(t, err)
	require.Equal(t, state.SourceNeedsResync, s.State())
	require.Equal(t, int64(1), s.Serving, "parking stopped serving")
	require.Equal(t, "landing/events/a.csv removed", s.ParkedReason)
	n := len(sourceEvents(t, b))
	_, err = b.store.ParkSource(b.ctx, state.ParkSourceParams{Source: src, Expect: state.SourceExpectation{Serving: 1}, Reason: "landing/events/a.csv removed", Now: hour(4)})
	require.NoError(t, err)
	require.Len(t, sourceEvents(t, b), n)
	_, err = b.store.PlanGeneration(b.ctx, state.PlanGenerationParams{Source: src, Kind: state.GenerationBackfill, Pin: pin(20), Now: hour(5)})
	require.ErrorIs(t, err, state.ErrSourceParked)
	require.Equal(t, s, getSource(t, b))

	g, err := b.store.PlanGeneration(b.ctx, state.PlanGenerationParams{Source: src, Kind: state.GenerationReplace, Pin: pin(25), AllowParked: true, Now: hour(6)})
	require.NoError(t, err)
	require.Equal(t, state.SourceNeedsResync, getSource(t, b).State())
	require.Equal(t, int64(1), getSource(t, b).Serving)
	healed := swap(t, b, g.Generation, hour(7))
	require.Equal(t, state.SourcePrimed, healed.State())
	require.Empty(t, healed.ParkedReason)

	_, err = b.store.ParkSource(b.ctx, state.ParkSourceParams{Source: src, Expect: state.SourceExpectation{Serving: 2}, Reason: "retention", Now: hour(8)})
	require.NoError(t, err)
	_, err = b.store.UnparkSource(b.ctx, state.UnparkSourceParams{Source: src, Expect: state.SourceExpectation{Serving: 1}, Now: hour(9)})
	require.ErrorIs(t, err, state.ErrConflictingGeneration)
	require.Equal(t, state.SourceNeedsResync, getSource(t, b).State())
	u, err := b.store.UnparkSource(b.ctx, state.UnparkSourceParams{Source: src, Expect: state.SourceExpectation{Serving: 2}, Now: hour(9)})
	require.NoError(t, err)
	require.Equal(t, state.SourcePrimed, u.State())

	_, err = b.store.ParkSource(b.ctx, state.ParkSourceParams{Source: src, Expect: state.SourceExpectation{Serving: 2}, Reason: "retention", Now: hour(10)})
	require.NoError(t, err)
	r, err := b.store.RequestBuild(b.ctx, state.RequestBuildParams{Source: src, Reason: "resync", Now: hour(11)})
	require.NoError(t, err)
	require.Equal(t, state.SourcePendingBackfill, r.State())
	require.Equal(t, int64(2), r.Serving)
}

func testSourceEvents(t *testing.T, b *bundle) {
	// Scenario: one source goes through every transition; each appends its
	// event, in order, at its Now, naming the source (Model) and the
	// generation it moved.
	ensure(t, b, "h1", hour(0))
	plan(t, b, 10, hour(1))
	swap(t, b, 1, hour(2))
	_, err := b.store.PlanGeneration(b.ctx, state.PlanGenerationParams{Source: src, Kind: state.GenerationReplace, Now: hour(3)})
	require.NoError(t, err)
	_, err = b.store.PlanGeneration(b.ctx, state.PlanGenerationParams{Source: src, Kind: state.GenerationBackfill, Pin: pin(11), Now: hour(4)})
	require.ErrorIs(t, err, state.ErrBuildInFlight)
	_, err = b.store.PinGeneration(b.ctx, state.PinGenerationParams{Source: src, Generation: 2, Pin: 12, Now: hour(5)})
	require.NoError(t, err)
	_, err = b.store.RetireGeneration(b.ctx, state.RetireGenerationParams{Source: src, Generation: 2, Reason: "superseded", Now: hour(6)})
	require.NoError(t, err)
	plan(t, b, 13, hour(7))
	_, err = b.store.RequestBuild(b.ctx, state.RequestBuildParams{Source: src, Retire: 3, Reason: "resync", Now: hour(8)})
	require.NoError(t, err)
	_, err = b.store.ParkSource(b.ctx, state.ParkSourceParams{Source: src, Expect: state.SourceExpectation{Serving: 1}, Reason: "lost", Now: hour(9)})
	require.NoError(t, err)
	_, err = b.store.UnparkSource(b.ctx, state.UnparkSourceParams{Source: src, Expect: state.SourceExpectation{Serving: 1}, Now: hour(10)})
	require.NoError(t, err)
	_, err = b.store.RemoveSource(b.ctx, state.RemoveSourceParams{Source: src, Expect: state.SourceExpectation{Serving: 1}, Now: hour(11)})
	require.NoError(t, err)

	evs := sourceEvents(t, b)
	require.Equal(t, []string{
		state.EventSourceRegistered, state.EventSourcePlanned, state.EventSourceSwapped,
		state.EventSourcePlanned, state.EventSourcePlanDeferred, state.EventSourcePinned, state.EventSourceRetired,
		state.EventSourcePlanned, state.EventSourceRetired, state.EventSourceResyncRequest,
		state.EventSourceNeedsResync, state.EventSourceUnparked, state.EventSourceRemoved,
	}, kinds(evs))
	wantGen := []int64{0, 1, 1, 2, 2, 2, 2, 3, 3, 3, 0, 0, 0}
	wantAt := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 8, 9, 10, 11}
	for i, e := range evs {
		require.Equalf(t, wantGen[i], eventData(t, e).Generation, "event %d %s", i, e.Kind)
		require.Equalf(t, hour(wantAt[i]), e.At.UTC(), "event %d %s", i, e.Kind)
		require.Equal(t, src, e.Model)
	}
	require.Equal(t, int64(12), *eventData(t, evs[5]).Pin)
	require.Equal(t, "superseded", evs[6].Reason)
	require.Equal(t, "resync", evs[9].Reason)
	require.Equal(t, "lost", evs[10].Reason)
	sw := eventData(t, evs[2])
	require.Equal(t, int64(1), sw.Serving)
	require.Equal(t, int64(0), sw.Replaced)
}

func testSourceBadCalls(t *testing.T, b *bundle) {
	// Scenario: calls without a Now (ErrNoNow), on an unknown source
	// (ErrNotFound), or with bad input (unknown kind, a negative chunk
	// count, a retire or park without a reason, a definition twice) are
	// refused and write nothing.
	_, err := b.store.EnsureSources(b.ctx, state.EnsureSourcesParams{
		Sources: []state.SourceDefinition{{Name: src, Connector: "files"}},
	})
	require.ErrorIs(t, err, state.ErrNoNow)
	_, err = b.store.EnsureSources(b.ctx, state.EnsureSourcesParams{Now: hour(0), Sources: []state.SourceDefinition{
		{Name: "raw.a", Connector: "files"}, {Name: src, Connector: "files"}, {Name: src, Connector: "files"},
	}})
	require.Error(t, err)
	list, err := b.store.ListSources(b.ctx, state.SourceFilter{IncludeRemoved: true})
	require.NoError(t, err)
	require.Empty(t, list, "a refused registration registered something")

	_, err = b.store.PlanGeneration(b.ctx, state.PlanGenerationParams{Source: src, Kind: state.GenerationBackfill, Pin: pin(1), Now: hour(1)})
	require.ErrorIs(t, err, state.ErrNotFound)
	_, err = b.store.RecordSwap(b.ctx, state.RecordSwapParams{Source: src, Generation: 1, Now: hour(1)})
	require.ErrorIs(t, err, state.ErrNotFound)

	ensure(t, b, "h1", hour(0))
	before := getSource(t, b)
	for _, p := range []state.PlanGenerationParams{
		{Source: src, Kind: state.GenerationBackfill, Pin: pin(1)},
		{Source: src, Kind: "snapshot", Pin: pin(1), Now: hour(1)},
		{Source: src, Kind: state.GenerationBackfill, Pin: pin(1), Chunks: -1, Now: hour(1)},
		{Kind: state.GenerationBackfill, Pin: pin(1), Now: hour(1)},
	} {
		_, err := b.store.PlanGeneration(b.ctx, p)
		require.Errorf(t, err, "%+v", p)
		require.NotErrorIs(t, err, state.ErrBuildInFlight)
	}
	_, err = b.store.PlanGeneration(b.ctx, state.PlanGenerationParams{Source: src, Kind: state.GenerationBackfill, Pin: pin(1)})
	require.ErrorIs(t, err, state.ErrNoNow)
	require.Equal(t, before, getSource(t, b), "a refused plan changed the source")
	plan(t, b, 1, hour(1))
	before = getSource(t, b)
	_, err = b.store.RetireGeneration(b.ctx, state.RetireGenerationParams{Source: src, Generation: 1, Now: hour(2)})
	require.Error(t, err)
	_, err = b.store.ParkSource(b.ctx, state.ParkSourceParams{Source: src, Expect: state.SourceExpectation{Building: 1}, Now: hour(2)})
	require.Error(t, err)
	_, err = b.store.RequestBuild(b.ctx, state.RequestBuildParams{Source: src, Now: hour(2)})
	require.Error(t, err)
	_, err = b.store.RecordSwap(b.ctx, state.RecordSwapParams{Source: src, Generation: 1})
	require.ErrorIs(t, err, state.ErrNoNow)
	require.Equal(t, before, getSource(t, b))
	require.Len(t, sourceEvents(t, b), 2)
}
