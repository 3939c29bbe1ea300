package ingest_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/ingest"
	"github.com/gapless-dev/gapless/state"
)

func TestReportNamesTheBlockingBatch(t *testing.T) {
	// Scenario: on a primed source b.csv lands broken, c.csv behind it.
	// The pass's report names the batch that blocks: seq 2, its location,
	// when it was staged (the age of the block, unchanged on the next
	// pass) and the reason; once b.csv is fixed nothing blocks.
	eachStoreDuck(t, func(t *testing.T, e *renv) {
		e.csv("a.csv", 1)
		require.NoError(t, e.pass().Err)
		e.write("b.csv", "id,v\nnot-an-id,x\n")
		e.csv("c.csv", 3)
		r := e.pass()
		require.Error(t, r.Err)
		staged := e.clk.Now()
		require.NotNil(t, r.Blocked)
		require.Equal(t, int64(2), r.Blocked.Seq)
		require.Equal(t, "landing/b.csv", r.Blocked.Location)
		require.True(t, staged.Equal(r.Blocked.StagedAt), "staged at %v, reported %v", staged, r.Blocked.StagedAt)
		require.Contains(t, r.Blocked.Reason, "not-an-id")

		r = e.pass()
		require.NotNil(t, r.Blocked)
		require.True(t, staged.Equal(r.Blocked.StagedAt), "the block keeps its age")

		e.csv("b.csv", 2)
		r = e.pass()
		require.NoError(t, r.Err)
		require.Nil(t, r.Blocked)
		require.Equal(t, ints(1, 2, 3), e.ids())
	})
}

func TestReportCountsReplayedSteps(t *testing.T) {
	// Scenario: the first build of raw.events has two chunks (a.csv and
	// b.csv; c.csv); chunk 1 fails on a broken c.csv after chunk 0
	// committed. Once c.csv is fixed the next pass resumes the build: the
	// warehouse refuses chunk 0 as already applied, which the report
	// counts as one replay, and every row is served once.
	eachStoreDuck(t, func(t *testing.T, e *renv) {
		e.csv("a.csv", 1)
		e.csv("b.csv", 2)
		e.write("c.csv", "id,v\nnot-an-id,x\n")
		r := e.pass()
		require.Error(t, r.Err)
		require.Zero(t, r.Replayed)
		require.Nil(t, r.Blocked, "a chunk is not a live batch")

		e.csv("c.csv", 3)
		r = e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, int64(1), r.Built)
		require.Equal(t, 1, r.Replayed)
		require.Equal(t, ints(1, 2, 3), e.ids())
	})
}

func TestRetiredBuildsStaleStepIsFencedNotFailed(t *testing.T) {
	// Scenario: pass A plans generation 1 of raw.events; before A moves
	// the warehouse fence (a hook), a resync retires generation 1 and
	// plans generation 2, which another worker B lands and swaps in. A's
	// fence step is then refused by the warehouse (ErrFenced): A counts
	// one fenced write, reports no failure (the race is benign: nothing
	// was written) and builds nothing; generation 2 serves every row once
	// and generation 1 never swapped.
	eachStoreDuck(t, func(t *testing.T, e *renv) {
		e.csv("a.csv", 1, 2)
		e.hooks.AfterPlan = func(_ string, g int64) error {
			if g != 1 {
				return nil
			}
			require.Equal(t, int64(2), e.resync())
			b := *e
			b.hooks = ingest.Hooks{}
			rep, err := passWith(t, b.params())
			require.NoError(t, err)
			require.NoError(t, rep.Err)
			require.Equal(t, int64(2), rep.Built)
			return nil
		}
		r := e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, 1, r.Fenced)
		require.Equal(t, "fenced", r.Deferred)
		require.Zero(t, r.Built)
		s := e.source()
		require.Equal(t, int64(2), s.Serving)
		require.Equal(t, state.GenerationRetired, e.generation(1).Status)
		for _, ev := range e.events(state.EventSourceSwapped) {
			require.NotEqual(t, int64(1), eventData(t, ev).Generation)
		}
		require.Equal(t, ints(1, 2), e.ids())
	})
}
