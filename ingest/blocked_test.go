package ingest_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/state"
)

func TestFailingBatchIsRecordedInTheStateStoreUntilItApplies(t *testing.T) {
	// Scenario: on a primed source b.csv lands broken, c.csv behind it.
	// The pass records the block in the state store: generation 1, seq 2,
	// b.csv, the reason naming the file, first failed at the pass, one
	// attempt. A pass a minute later, still broken, counts a second
	// attempt and keeps the first failure's time. Once b.csv is fixed the
	// pass applies b.csv and c.csv and the block is gone.
	eachStoreDuck(t, func(t *testing.T, e *renv) {
		e.csv("a.csv", 1)
		require.NoError(t, e.pass().Err)
		e.write("b.csv", "id,v\nnot-an-id,x\n")
		e.csv("c.csv", 3)
		require.Error(t, e.pass().Err)
		first := e.clk.Now()
		b := e.source().Blocked
		require.NotNil(t, b)
		require.Equal(t, int64(1), b.Generation)
		require.Equal(t, int64(2), b.Seq)
		require.Equal(t, "landing/b.csv", b.Location)
		require.Contains(t, b.Reason, "landing/b.csv")
		require.Contains(t, b.Reason, "not-an-id")
		require.True(t, first.Equal(b.FirstFailedAt), "first failed at %v, recorded %v", first, b.FirstFailedAt)
		require.Equal(t, 1, b.Attempts)

		e.clk.Advance(time.Minute)
		require.Error(t, e.pass().Err)
		b = e.source().Blocked
		require.NotNil(t, b)
		require.Equal(t, 2, b.Attempts)
		require.True(t, first.Equal(b.FirstFailedAt), "the first failure is kept")
		require.True(t, e.clk.Now().Equal(b.LastFailedAt))

		e.csv("b.csv", 2)
		r := e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, 2, r.Applied)
		require.Nil(t, e.source().Blocked)
		require.Equal(t, ints(1, 2, 3), e.ids())
	})
}

func TestBuildsChunksAppliedAreRecordedInTheStateStore(t *testing.T) {
	// Scenario: the first build of raw.events has two chunks (a.csv and
	// b.csv; c.csv); chunk 1 fails on a broken c.csv after chunk 0
	// committed. The state store records generation 1 building with 1 of
	// 2 chunks applied (what `gapless sources` shows without the
	// warehouse); once c.csv is fixed the build swaps in with 2 of 2.
	eachStoreDuck(t, func(t *testing.T, e *renv) {
		e.csv("a.csv", 1)
		e.csv("b.csv", 2)
		e.write("c.csv", "id,v\nnot-an-id,x\n")
		require.Error(t, e.pass().Err)
		g := e.generation(1)
		require.Equal(t, state.GenerationBuilding, g.Status)
		require.Equal(t, 2, g.Chunks)
		require.Equal(t, 1, g.ChunksApplied)
		require.Nil(t, e.source().Blocked, "a chunk is not a live batch")

		e.csv("c.csv", 3)
		require.NoError(t, e.pass().Err)
		require.Equal(t, 2, e.generation(1).ChunksApplied)
	})
}
