package ingest_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/connector"
	"github.com/gapless-dev/gapless/state"
)

func TestLiveFileVanishedParksUntilResync(t *testing.T) {
	// Scenario: raw.events serves a.csv. b.csv lands broken, so its batch
	// fails and blocks; c.csv lands behind it, staged and waiting, and is
	// then deleted before any pass read it; b.csv is fixed. The next pass
	// applies b.csv and does not skip c.csv (only the blocked batch whose
	// file was removed is skipped: c.csv's rows would silently be missing
	// from a table served as complete): it parks the source NEEDS_RESYNC
	// with a reason naming c.csv and fails the pass with the file's name;
	// a pass while parked changes nothing. A resync unparks and rebuilds
	// from what exists: generation 2 serves a.csv and b.csv, PRIMED.
	eachStoreDuck(t, func(t *testing.T, e *renv) {
		e.csv("a.csv", 1, 2)
		require.NoError(t, e.pass().Err)
		e.write("b.csv", "id,v\nnot-an-id,x\n")
		e.csv("c.csv", 5)
		require.Error(t, e.pass().Err)
		e.remove("c.csv")
		e.csv("b.csv", 3)

		r := e.pass()
		var ve *connector.VanishedError
		require.ErrorAs(t, r.Err, &ve)
		require.Equal(t, []string{"landing/c.csv"}, ve.Locations)
		require.ErrorContains(t, r.Err, "sources/events.yaml")
		require.Equal(t, "needs_resync", r.Deferred)
		require.Equal(t, 1, r.Applied, "b.csv")
		require.Zero(t, r.Skipped)
		s := e.source()
		require.Equal(t, state.SourceNeedsResync, s.State())
		require.Contains(t, s.ParkedReason, "landing/c.csv")
		require.Len(t, e.events(state.EventSourceNeedsResync), 1)
		require.Empty(t, e.events(state.EventSourceBatchSkipped))
		require.Equal(t, ints(1, 2, 3), e.ids())

		r = e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, "parked", r.Deferred)
		require.Zero(t, r.Applied)
		require.Equal(t, ints(1, 2, 3), e.ids())
		require.Len(t, e.events(state.EventSourceNeedsResync), 1)

		require.Equal(t, int64(2), e.resync())
		r = e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, int64(2), r.Built)
		s = e.source()
		require.Equal(t, state.SourcePrimed, s.State())
		require.Empty(t, s.ParkedReason)
		require.Equal(t, ints(1, 2, 3), e.ids())
	})
}

func TestBuildFileVanishedParksInsteadOfServingIncomplete(t *testing.T) {
	// Scenario: the first build of raw.events is planned over a.csv, b.csv
	// and c.csv and crashes before its fence (a hook); b.csv is deleted
	// before the build read it. The next pass parks the source
	// NEEDS_RESYNC naming b.csv and swaps nothing in: models keep waiting
	// rather than read a table without b.csv. A resync then builds
	// generation 2 from what exists.
	eachStoreDuck(t, func(t *testing.T, e *renv) {
		e.csv("a.csv", 1)
		e.csv("b.csv", 2)
		e.csv("c.csv", 3)
		crash := errors.New("crash after plan")
		e.hooks.AfterPlan = func(string, int64) error { return crash }
		require.ErrorIs(t, e.pass().Err, crash)
		e.hooks.AfterPlan = nil
		e.remove("b.csv")

		r := e.pass()
		require.ErrorContains(t, r.Err, "landing/b.csv vanished")
		require.Zero(t, r.Built)
		s := e.source()
		require.Equal(t, state.SourceNeedsResync, s.State())
		require.Contains(t, s.ParkedReason, "landing/b.csv")
		require.Zero(t, s.Serving)
		require.Zero(t, e.warehouseServing(), "nothing swapped in")

		require.Equal(t, int64(2), e.resync())
		r = e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, int64(2), r.Built)
		require.Equal(t, state.SourcePrimed, e.source().State())
		require.Equal(t, ints(1, 3), e.ids())
	})
}

func (e *renv) warehouseServing() int64 {
	e.t.Helper()
	ws, err := e.wh.IngestState(e.t.Context(), src)
	require.NoError(e.t, err)
	return ws.ServingGeneration
}
