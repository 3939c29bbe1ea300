package ingest_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/connector"
	"github.com/gapless-dev/gapless/state"
)

func TestResyncDuringPartialReplaceRunDefersUntilItSwaps(t *testing.T) {
	// Scenario (the seed's bug 2): raw.events is primed at generation 1
	// from a.csv and b.csv. A replace run lands in part (landing/full/r1/
	// holds part-0.csv, no _SUCCESS yet) and c.csv lands; a resync then
	// plans generation 2. The next pass must not pin inside the half-
	// arrived run: the snapshot is not consistent, generation 2 stays
	// unpinned and never swaps, and the view still serves generation 1.
	// The run completes (part-1.csv and _SUCCESS); the pass that stages it
	// supersedes generation 2 with generation 3 of kind replace, pinned at
	// the run's end, whose chunks are the run's two files, and crashes
	// right after planning it (a hook). d.csv lands after the run; the
	// next pass resumes generation 3, catches it up with d.csv and swaps
	// it in: the view then serves exactly the run's rows plus d.csv (the
	// rows of a, b and c, before the run, are replaced). The resync that
	// was deferred behind the run then builds generation 4 in the same
	// pass, serving the same rows, each once.
	eachBackend(t, func(t *testing.T, e *renv) {
		e.csv("a.csv", 1, 2)
		e.csv("b.csv", 3)
		r := e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, int64(1), r.Built)

		e.csv("full/r1/part-0.csv", 100, 101)
		e.csv("c.csv", 4)
		require.Equal(t, int64(2), e.resync())
		r = e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, "not_consistent", r.Deferred)
		require.Zero(t, r.Built)
		s := e.source()
		require.Equal(t, int64(2), s.Building)
		require.Equal(t, int64(1), s.Serving)
		require.Nil(t, e.generation(2).Pin, "a build planned inside a half-arrived replace run must not be pinned")
		require.Equal(t, ints(1, 2, 3), e.ids())

		e.csv("full/r1/part-1.csv", 102)
		e.write("full/r1/_SUCCESS", "")
		crash := errors.New("crash after planning the replace generation")
		e.hooks.AfterPlan = func(_ string, g int64) error {
			if g == 3 {
				return crash
			}
			return nil
		}
		r = e.pass()
		require.ErrorIs(t, r.Err, crash)
		g2, g3 := e.generation(2), e.generation(3)
		require.Equal(t, state.GenerationRetired, g2.Status)
		require.Contains(t, g2.RetiredReason, "superseded by replace run landing/full/r1")
		require.Equal(t, state.GenerationReplace, g3.Kind)
		require.NotNil(t, g3.Pin)
		require.Equal(t, int64(5), *g3.Pin, "pinned at the run's end: a, b, c, part-0, part-1")
		require.Equal(t, 1, g3.Chunks)
		require.Equal(t, ints(1, 2, 3), e.ids(), "nothing of the run is served before its swap")

		e.hooks.AfterPlan = nil
		var atSwap3 []int64
		e.hooks.AfterSwap = func(_ string, g int64) error {
			if g == 3 {
				atSwap3 = readIDs(t, e.wh)
			}
			return nil
		}
		e.csv("d.csv", 5)
		r = e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, ints(5, 100, 101, 102), atSwap3, "generation 3: the replace run's rows plus the later append")
		require.Equal(t, int64(4), r.Built, "the deferred resync ran after the replace run swapped")
		s = e.source()
		require.Equal(t, state.SourcePrimed, s.State())
		require.Equal(t, int64(4), s.Serving)
		require.Equal(t, state.GenerationBackfill, e.generation(4).Kind)
		require.Equal(t, ints(5, 100, 101, 102), e.ids())
		for _, ev := range e.events(state.EventSourceSwapped) {
			require.NotEqual(t, int64(2), eventData(t, ev).Generation, "generation 2 never swapped")
		}

		r = e.pass()
		require.NoError(t, r.Err)
		require.Zero(t, r.Built)
		require.Equal(t, ints(5, 100, 101, 102), e.ids())
	})
}

func TestReplaceRunReplacesRowsAndLaterAppendsFollow(t *testing.T) {
	// Scenario: raw.events serves a.csv and a live b.csv at generation 1.
	// A complete replace run r1 (two files) lands: the pass builds it as
	// generation 2 of kind replace, pinned at the run's end, from the
	// run's files alone; the view serves exactly the run's rows, and
	// generation 1 is retired (replaced). An append after it applies live
	// onto generation 2. Two complete runs landing in one pass (r2 then
	// r3) build one generation, of the last: r3 replaces r2 whole.
	eachStoreDuck(t, func(t *testing.T, e *renv) {
		e.csv("a.csv", 1, 2)
		require.NoError(t, e.pass().Err)
		e.csv("b.csv", 3)
		require.Equal(t, 1, e.pass().Applied)

		e.csv("full/r1/part-0.csv", 10, 11)
		e.csv("full/r1/part-1.csv", 12)
		e.write("full/r1/_SUCCESS", "")
		r := e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, int64(2), r.Built)
		g2 := e.generation(2)
		require.Equal(t, state.GenerationReplace, g2.Kind)
		require.Equal(t, state.GenerationSwapped, g2.Status)
		require.Equal(t, int64(4), *g2.Pin)
		require.Equal(t, "replace run landing/full/r1", g2.PinLabel)
		require.Equal(t, state.GenerationRetired, e.generation(1).Status)
		require.Equal(t, state.SourcePrimed, e.source().State())
		require.False(t, e.source().BuildRequested, "a replace run that arrives on a primed source owes no other build")
		require.Equal(t, ints(10, 11, 12), e.ids())

		e.csv("c.csv", 13)
		r = e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, 1, r.Applied)
		require.Zero(t, r.Built)
		require.Equal(t, ints(10, 11, 12, 13), e.ids())

		e.csv("full/r2/part-0.csv", 20)
		e.write("full/r2/_SUCCESS", "")
		e.csv("full/r3/part-0.csv", 30, 31)
		e.write("full/r3/_SUCCESS", "")
		r = e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, int64(3), r.Built)
		require.Equal(t, int64(3), e.source().LastGeneration, "one generation for the two runs")
		require.Equal(t, ints(30, 31), e.ids())
	})
}

func TestBuildPlannedWhileAnotherIsInFlightDefers(t *testing.T) {
	// Scenario: a pass A reads raw.events with no build in flight and asks
	// for its snapshot; meanwhile (a hook in the snapshot) another worker B
	// plans generation 1 and dies before fencing it. A's plan then loses
	// the one-build-per-source compare-and-swap: ErrBuildInFlight, A
	// defers (one source_plan_deferred event naming generation 1) and
	// writes nothing. A later pass resumes generation 1 and serves every
	// row once.
	eachStoreDuck(t, func(t *testing.T, e *renv) {
		e.csv("a.csv", 1, 2)
		crash := errors.New("worker B dies after planning")
		e.wrapConn = func(c connector.Connector) connector.Connector {
			return &snapshotHook{Connector: c, before: func() {
				b := *e
				b.wrapConn = nil
				b.hooks.AfterPlan = func(string, int64) error { return crash }
				p := b.params()
				rep, err := passWith(t, p)
				require.NoError(t, err)
				require.ErrorIs(t, rep.Err, crash)
			}}
		}
		r := e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, state.ReasonSourceBuildInFlight, r.Deferred)
		require.Zero(t, r.Built)
		s := e.source()
		require.Equal(t, int64(1), s.Building)
		require.Equal(t, int64(1), s.LastGeneration, "the deferred plan issued no generation")
		deferred := e.events(state.EventSourcePlanDeferred)
		require.Len(t, deferred, 1)
		require.Equal(t, int64(1), eventData(t, deferred[0]).Generation)

		e.wrapConn = nil
		r = e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, int64(1), r.Built)
		require.Equal(t, ints(1, 2), e.ids())
		require.Len(t, e.events(state.EventSourcePlanDeferred), 1)
	})
}
