package ingest_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/ingest"
	"github.com/gapless-dev/gapless/state"
)

func eventsOf(t *testing.T, e *env, kind string) []state.Event {
	t.Helper()
	evs, err := e.store.ListEvents(t.Context(), state.EventFilter{Kinds: []string{kind}})
	require.NoError(t, err)
	return evs
}

func TestResyncRetiresTheBuildInFlightAndPlansTheNext(t *testing.T) {
	// Scenario: a primed source (generation 1 serves) is parked
	// NEEDS_RESYNC. A resync retires nothing (no build in flight), clears
	// the park and plans generation 2 at once, unpinned, while 1 keeps
	// serving. A second resync, with 2 in flight, retires 2 (reason
	// "resync requested") and plans 3. The next pass builds and swaps in a
	// generation after 3, serving every row once.
	eachStore(t, func(t *testing.T, e *env) {
		e.csv("a.csv", 1, 2)
		require.NoError(t, e.pass().Err)
		_, err := e.store.ParkSource(t.Context(), state.ParkSourceParams{Source: src, Expect: state.SourceExpectation{Serving: 1},
			Reason: "a.csv vanished", Now: e.clk.Now()})
		require.NoError(t, err)
		require.Equal(t, state.SourceNeedsResync, e.source().State())

		res, err := ingest.Resync(t.Context(), e.store, src, e.clk.Now())
		require.NoError(t, err)
		require.Equal(t, ingest.ResyncResult{Source: src, Retired: 0, Planned: 2, Serving: 1, Unparked: true}, res)
		s := e.source()
		require.Equal(t, state.SourceBackfilling, s.State())
		require.Empty(t, s.ParkedReason)
		require.Equal(t, int64(2), s.Building)
		require.Equal(t, int64(1), s.Serving)
		require.Nil(t, s.Generations[1].Pin, "planned without a pin: the building pass pins it")
		require.Equal(t, state.GenerationBackfill, s.Generations[1].Kind)
		require.Len(t, eventsOf(t, e, state.EventSourceResyncRequest), 1)
		e.requireServes(2)

		res, err = ingest.Resync(t.Context(), e.store, src, e.clk.Now())
		require.NoError(t, err)
		require.Equal(t, ingest.ResyncResult{Source: src, Retired: 2, Planned: 3, Serving: 1}, res)
		s = e.source()
		require.Equal(t, int64(3), s.Building)
		require.Equal(t, state.GenerationRetired, s.Generations[1].Status)
		require.Equal(t, ingest.ResyncReason, s.Generations[1].RetiredReason)
		require.Len(t, eventsOf(t, e, state.EventSourceResyncRequest), 2)

		e.csv("b.csv", 3)
		r := e.pass()
		require.NoError(t, r.Err)
		require.GreaterOrEqual(t, r.Built, int64(3))
		s = e.source()
		require.Equal(t, state.SourcePrimed, s.State())
		require.Equal(t, r.Built, s.Serving)
		e.requireServes(3)
	})
}

func TestResyncOfAnUnknownSourceNamesTheClosest(t *testing.T) {
	// Scenario: a resync of raw.evnts, a typo, fails with an
	// *UnregisteredSourceError that wraps state.ErrNotFound and suggests
	// raw.events; nothing is written. On a store with no source at all it
	// says how sources are registered.
	eachStore(t, func(t *testing.T, e *env) {
		_, err := ingest.Resync(t.Context(), e.store, src, e.clk.Now())
		require.ErrorIs(t, err, state.ErrNotFound)
		require.EqualError(t, err, "unknown source raw.events: no source is registered yet (the first `gapless ingest --once` registers the project's sources)")

		e.csv("a.csv", 1)
		require.NoError(t, e.pass().Err)
		before := e.source()
		_, err = ingest.Resync(t.Context(), e.store, "raw.evnts", e.clk.Now())
		var unknown *ingest.UnregisteredSourceError
		require.True(t, errors.As(err, &unknown), "%v", err)
		require.Equal(t, "raw.events", unknown.Closest)
		require.EqualError(t, err, "unknown source raw.evnts: did you mean raw.events?")
		require.Equal(t, before, e.source())
		require.Empty(t, eventsOf(t, e, state.EventSourceResyncRequest))
	})
}
