package ingest_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

// removeLanded deletes landing/name.
func (e *env) removeLanded(name string) {
	e.t.Helper()
	require.NoError(e.t, os.Remove(filepath.Join(e.root, "landing", name)))
}

// sourceEventsOf returns the source's history events of kind.
func (e *env) sourceEventsOf(kind string) []state.Event {
	e.t.Helper()
	evs, err := e.store.ListEvents(e.t.Context(), state.EventFilter{Model: src})
	require.NoError(e.t, err)
	var out []state.Event
	for _, ev := range evs {
		require.Contains(e.t, state.SourceEventKinds(), ev.Kind, "event %d", ev.ID)
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

// batch returns the source's staged batch seq.
func (e *env) batch(seq int64) state.Batch {
	e.t.Helper()
	bs, err := e.store.ListBatches(e.t.Context(), state.ListBatchesParams{Source: src, AfterSeq: seq - 1, Limit: 1})
	require.NoError(e.t, err)
	require.Len(e.t, bs, 1)
	require.Equal(e.t, seq, bs[0].Seq)
	return bs[0]
}

// servedIDs returns the ids the source's view serves, sorted.
func (e *env) servedIDs() []int64 {
	e.t.Helper()
	r, err := e.wh.ReadOnlyQuery(e.t.Context(), "SELECT id FROM raw.events ORDER BY id")
	require.NoError(e.t, err)
	out := []int64{}
	for _, row := range r.Rows {
		out = append(out, toInt(e.t, row[0]))
	}
	return out
}

// batchMarker returns the warehouse's marker of batch seq of generation
// gen, failing the test when there is none.
func (e *env) batchMarker(gen, seq int64) warehouse.IngestMarker {
	e.t.Helper()
	for _, m := range e.warehouseState().Markers {
		if m.Generation == gen && m.Kind == warehouse.MarkerBatch && m.Index == seq {
			return m
		}
	}
	require.Failf(e.t, "no batch marker", "generation %d batch %d", gen, seq)
	return warehouse.IngestMarker{}
}

func TestRemovedBadFileIsSkippedAndLaterBatchesContinue(t *testing.T) {
	// Scenario: a.csv primes raw.events. b.csv lands with a value that is
	// not an id and c.csv, a good file, behind it: the pass fails at
	// b.csv's batch, records it as the source's block, and c.csv waits.
	// The operator removes b.csv. The next pass skips b.csv's batch (its
	// warehouse marker, 0 rows), applies c.csv, and does not park the
	// source: it stays PRIMED, the block is cleared, and a
	// source_batch_skipped event names b.csv, its seq and generation. Every
	// row of a.csv and c.csv is served once. A pass after that skips
	// nothing more, and a new file applies as usual.
	eachStore(t, func(t *testing.T, e *env) {
		e.csv("a.csv", 1, 2)
		r := e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, int64(1), r.Built)

		e.write("b.csv", "id,v\nnot-an-id,x\n")
		e.csv("c.csv", 3)
		r = e.pass()
		require.ErrorContains(t, r.Err, "landing/b.csv")
		require.Zero(t, r.Applied)
		bl := e.source().Blocked
		require.NotNil(t, bl)
		require.Equal(t, int64(2), bl.Seq)
		require.Equal(t, "landing/b.csv", bl.Location)
		require.Equal(t, []int64{1, 2}, e.servedIDs())

		e.removeLanded("b.csv")
		r = e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, 1, r.Skipped)
		require.Equal(t, 1, r.Applied, "c.csv")
		require.Empty(t, r.Deferred)
		require.Nil(t, r.Blocked)
		s := e.source()
		require.Equal(t, state.SourcePrimed, s.State())
		require.Empty(t, s.ParkedReason)
		require.Nil(t, s.Blocked, "the skip clears the block")
		require.Equal(t, []int64{1, 2, 3}, e.servedIDs())
		e.requireServes(3)
		require.Equal(t, int64(0), e.batchMarker(1, 2).Rows, "the skip's marker holds no row")
		require.Equal(t, int64(1), e.batchMarker(1, 3).Rows)
		require.Empty(t, e.sourceEventsOf(state.EventSourceNeedsResync))

		evs := e.sourceEventsOf(state.EventSourceBatchSkipped)
		require.Len(t, evs, 1)
		require.Contains(t, evs[0].Reason, "landing/b.csv")
		var d state.SourceEventData
		require.NoError(t, json.Unmarshal(evs[0].Data, &d))
		require.Equal(t, state.SourceEventData{Generation: 1, Seq: 2, Location: "landing/b.csv"}, d)

		r = e.pass()
		require.NoError(t, r.Err)
		require.Zero(t, r.Skipped)
		require.Len(t, e.sourceEventsOf(state.EventSourceBatchSkipped), 1)
		e.csv("d.csv", 4)
		r = e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, 1, r.Applied)
		require.Equal(t, []int64{1, 2, 3, 4}, e.servedIDs())
	})
}

func TestSkipCommittedButUnrecordedIsHealedAndNotRepeated(t *testing.T) {
	// Scenario: a.csv primes; b.csv is bad and blocks, c.csv waits; b.csv
	// is removed, and the pass that skips it crashes right after the
	// warehouse committed the skip (a hook), before the state store heard
	// of it (no skip recorded, no event). The next pass heals the skip
	// from its marker (0 rows, b.csv gone): the batch is recorded skipped,
	// the block cleared, and exactly one source_batch_skipped event names
	// b.csv; it does not skip again, and applies c.csv: every row of a.csv
	// and c.csv is served once.
	eachStore(t, func(t *testing.T, e *env) {
		e.csv("a.csv", 1, 2)
		require.NoError(t, e.pass().Err)
		e.write("b.csv", "id,v\nnot-an-id,x\n")
		e.csv("c.csv", 3)
		require.Error(t, e.pass().Err)
		e.removeLanded("b.csv")

		crash := errors.New("crash after the skip committed")
		e.hooks.AfterStep = func(_ string, step warehouse.IngestStep, gen, index int64) error {
			if step == warehouse.StepBatch && index == 2 {
				return crash
			}
			return nil
		}
		r := e.pass()
		require.ErrorIs(t, r.Err, crash)
		require.NotNil(t, e.source().Blocked, "the state store has not heard of the skip")
		require.Equal(t, int64(0), e.batchMarker(1, 2).Rows)
		require.True(t, e.batch(2).SkippedAt.IsZero())
		require.Empty(t, e.sourceEventsOf(state.EventSourceBatchSkipped))
		e.hooks.AfterStep = nil

		r = e.pass()
		require.NoError(t, r.Err)
		require.Zero(t, r.Skipped, "the warehouse holds the skip: nothing is skipped again")
		require.Equal(t, 1, r.Applied)
		require.Nil(t, e.source().Blocked)
		require.Equal(t, state.SourcePrimed, e.source().State())
		require.Equal(t, []int64{1, 2, 3}, e.servedIDs())
		e.requireServes(3)
		require.False(t, e.batch(2).SkippedAt.IsZero(), "the healed skip is recorded")
		evs := e.sourceEventsOf(state.EventSourceBatchSkipped)
		require.Len(t, evs, 1)
		require.Contains(t, evs[0].Reason, "landing/b.csv")

		require.NoError(t, e.pass().Err)
		require.Len(t, e.sourceEventsOf(state.EventSourceBatchSkipped), 1)
	})
}

func TestRemovedBadFileIsSkippedInABuildsCatchUp(t *testing.T) {
	// Scenario: a.csv primes generation 1; a resync plans generation 2 and
	// its pass crashes right after the plan (a hook). b.csv (bad) and
	// c.csv land after the pin: the next pass resumes generation 2, whose
	// catch-up fails at b.csv and records the block on generation 2. Once
	// b.csv is removed, the next pass skips it in the catch-up (fenced on
	// the planned generation), catches up c.csv and swaps generation 2 in:
	// it serves a.csv and c.csv once, PRIMED, not parked, the block gone.
	eachStore(t, func(t *testing.T, e *env) {
		e.csv("a.csv", 1, 2)
		require.NoError(t, e.pass().Err)
		_, err := e.store.RequestBuild(t.Context(), state.RequestBuildParams{Source: src, Reason: "resync", Now: e.clk.Now()})
		require.NoError(t, err)
		crash := errors.New("crash after plan")
		e.hooks.AfterPlan = func(string, int64) error { return crash }
		require.ErrorIs(t, e.pass().Err, crash)
		e.hooks.AfterPlan = nil

		e.write("b.csv", "id,v\nnot-an-id,x\n")
		e.csv("c.csv", 3)
		r := e.pass()
		require.ErrorContains(t, r.Err, "landing/b.csv")
		require.Zero(t, r.Built)
		bl := e.source().Blocked
		require.NotNil(t, bl)
		require.Equal(t, int64(2), bl.Generation)
		require.Equal(t, "landing/b.csv", bl.Location)

		e.removeLanded("b.csv")
		r = e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, 1, r.Skipped)
		require.Equal(t, int64(2), r.Built)
		s := e.source()
		require.Equal(t, state.SourcePrimed, s.State())
		require.Equal(t, int64(2), s.Serving)
		require.Nil(t, s.Blocked)
		require.Equal(t, []int64{1, 2, 3}, e.servedIDs())
		e.requireServes(3)
		require.Equal(t, int64(0), e.batchMarker(2, 2).Rows)
		require.Len(t, e.sourceEventsOf(state.EventSourceBatchSkipped), 1)
	})
}

func TestRebuildAfterASkipBuildsFromWhatExists(t *testing.T) {
	// Scenario: a.csv primes generation 1; b.csv is bad and blocks, c.csv
	// waits; b.csv is removed and the pass skips it, which the state store
	// records on the batch. A build is then requested (RequestBuild, not a
	// resync: what a replace or backfill asks for). The next pass builds
	// generation 2 from what exists, b.csv's skipped batch left out rather
	// than found vanished: generation 2 serves a.csv and c.csv once, the
	// source PRIMED and not parked, no needs-resync event, one skip event.
	// A later file lands on generation 2 as usual.
	eachStore(t, func(t *testing.T, e *env) {
		e.csv("a.csv", 1, 2)
		require.NoError(t, e.pass().Err)
		e.write("b.csv", "id,v\nnot-an-id,x\n")
		e.csv("c.csv", 3)
		require.Error(t, e.pass().Err)
		e.removeLanded("b.csv")
		r := e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, 1, r.Skipped)
		require.False(t, e.batch(2).SkippedAt.IsZero(), "the skip is recorded on the batch")

		_, err := e.store.RequestBuild(t.Context(), state.RequestBuildParams{Source: src, Reason: "backfill", Now: e.clk.Now()})
		require.NoError(t, err)
		r = e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, int64(2), r.Built)
		s := e.source()
		require.Equal(t, state.SourcePrimed, s.State())
		require.Empty(t, s.ParkedReason)
		require.Equal(t, int64(2), s.Serving)
		require.Equal(t, []int64{1, 2, 3}, e.servedIDs())
		e.requireServes(3)
		require.Empty(t, e.sourceEventsOf(state.EventSourceNeedsResync))
		require.Len(t, e.sourceEventsOf(state.EventSourceBatchSkipped), 1)

		e.csv("d.csv", 4)
		r = e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, 1, r.Applied)
		require.Equal(t, []int64{1, 2, 3, 4}, e.servedIDs())
	})
}

func TestBuildInFlightSkipsABatchSkippedOnTheServingGeneration(t *testing.T) {
	// Scenario: a.csv primes generation 1; b.csv (bad) and c.csv land:
	// the live apply on generation 1 blocks at b.csv; b.csv is removed and
	// generation 1 skips it. A build in flight, generation 2, is pinned
	// after a.csv (as one left by a crash): its catch-up meets b.csv's
	// batch, whose file is gone and which blocks no generation: it skips
	// it too, as recorded (not parked), and swaps in serving a.csv and
	// c.csv once, with one skip event.
	eachStore(t, func(t *testing.T, e *env) {
		e.csv("a.csv", 1, 2)
		require.NoError(t, e.pass().Err)
		e.write("b.csv", "id,v\nnot-an-id,x\n")
		e.csv("c.csv", 3)
		require.Error(t, e.pass().Err)
		require.Equal(t, int64(1), e.source().Blocked.Generation)
		e.removeLanded("b.csv")
		r := e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, 1, r.Skipped)

		_, err := e.store.RequestBuild(t.Context(), state.RequestBuildParams{Source: src, Reason: "resync", Now: e.clk.Now()})
		require.NoError(t, err)
		// Generation 2 planned by hand, pinned before b.csv: its catch-up
		// covers b.csv's batch.
		pin := e.batch(1).To
		_, err = e.store.PlanGeneration(t.Context(), state.PlanGenerationParams{Source: src, Kind: state.GenerationBackfill,
			Pin: &pin, PinLabel: "a.csv", Chunks: 1, Now: e.clk.Now()})
		require.NoError(t, err)
		r = e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, int64(2), r.Built)
		require.Equal(t, 1, r.Skipped, "generation 2 skips the recorded skip")
		s := e.source()
		require.Equal(t, state.SourcePrimed, s.State())
		require.Equal(t, int64(2), s.Serving)
		require.Equal(t, []int64{1, 2, 3}, e.servedIDs())
		e.requireServes(3)
		require.Equal(t, int64(0), e.batchMarker(2, 2).Rows)
		require.Empty(t, e.sourceEventsOf(state.EventSourceNeedsResync))
		require.Len(t, e.sourceEventsOf(state.EventSourceBatchSkipped), 1)
	})
}
