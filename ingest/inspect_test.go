package ingest_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/ingest"
	"github.com/gapless-dev/gapless/state"
)

func (e *env) inspect() ingest.InspectParams {
	return ingest.InspectParams{Store: e.store, Engine: e.wh, Now: e.clk.Now()}
}

func TestSummariesReportAppliedHeadAndTheBlockingBatch(t *testing.T) {
	// Scenario: a.csv primes generation 1, b.csv is applied live, then
	// c.csv, which does not parse, stops the source. The summary shows
	// generation 1 serving, applied through seq 2 of head 3, c.csv
	// blocking (one batch) with its age and the lag since it was staged,
	// and the state store's record of the failure (generation, reason,
	// attempts, first failed at); the state store alone gives the same
	// summary, and a detail without the warehouse's comparison.
	// A resync then owes a build: generation 2 builds (unpinned, 0 of 0
	// chunks), c.csv is pending but not called blocked, and the detail
	// lists both generations, the batches with what is applied, and the
	// warehouse fence still on generation 1 against the state's 2.
	eachStore(t, func(t *testing.T, e *env) {
		e.csv("a.csv", 1, 2)
		require.NoError(t, e.pass().Err)
		e.csv("b.csv", 3)
		require.NoError(t, e.pass().Err)
		e.write("c.csv", "id,v\nnot-an-id,x\n")
		require.Error(t, e.pass().Err)
		staged := e.clk.Now()
		e.clk.Advance(90 * time.Second)

		sums, err := ingest.ListSummaries(t.Context(), e.inspect())
		require.NoError(t, err)
		require.Len(t, sums, 1)
		s := sums[0]
		require.Equal(t, src, s.Source)
		require.Equal(t, "files", s.Connector)
		require.Equal(t, state.SourcePrimed, s.State)
		require.Equal(t, int64(1), s.ServingGeneration)
		require.Zero(t, s.BuildingGeneration)
		require.Equal(t, int64(2), s.AppliedSeq)
		require.Equal(t, int64(3), s.HeadSeq)
		require.Less(t, s.AppliedPosition, s.HeadPosition)
		require.Equal(t, 1, s.PendingBatches)
		require.Equal(t, 1, s.BlockedBatches)
		require.NotNil(t, s.Blocked)
		require.Equal(t, int64(3), s.Blocked.Seq)
		require.Equal(t, "landing/c.csv", s.Blocked.Location)
		require.Equal(t, staged, s.Blocked.StagedAt.UTC())
		require.InDelta(t, 90, s.Blocked.AgeSeconds, 0.001)
		require.InDelta(t, 90, s.LagSeconds, 0.001)
		require.Equal(t, int64(1), s.Blocked.Generation)
		require.Contains(t, s.Blocked.Reason, "landing/c.csv")
		require.Equal(t, 1, s.Blocked.Attempts)
		require.Equal(t, staged, s.Blocked.FirstFailedAt.UTC())
		require.InDelta(t, 90, s.Blocked.FailingSeconds, 0.001)

		// The state store alone (no warehouse read) gives the same summary.
		alone := e.inspect()
		alone.Engine = nil
		sums, err = ingest.ListSummaries(t.Context(), alone)
		require.NoError(t, err)
		require.Equal(t, s, sums[0])
		d, err := ingest.Inspect(t.Context(), alone, src)
		require.NoError(t, err)
		require.False(t, d.Warehouse.Read)
		require.Empty(t, d.Warehouse.Disagreements, "nothing to compare")
		require.Equal(t, 1, d.Generations[0].ChunksApplied)
		require.Equal(t, int64(2), d.Generations[0].LastBatch)
		require.True(t, d.Generations[0].Swapped)

		_, err = ingest.Resync(t.Context(), e.store, src, e.clk.Now())
		require.NoError(t, err)
		d, err = ingest.Inspect(t.Context(), e.inspect(), src)
		require.NoError(t, err)
		require.True(t, d.Warehouse.Read)
		require.Equal(t, state.SourceBackfilling, d.State)
		require.Equal(t, int64(2), d.BuildingGeneration)
		require.Zero(t, d.Chunks)
		require.Equal(t, 1, d.PendingBatches)
		require.Zero(t, d.BlockedBatches, "a build is owed: the batch waits on it, not on a failure")
		require.Nil(t, d.Blocked)
		require.Len(t, d.Generations, 2)
		g1, g2 := d.Generations[0], d.Generations[1]
		require.Equal(t, state.GenerationSwapped, g1.Status)
		require.True(t, g1.Swapped)
		require.Equal(t, 1, g1.ChunksApplied)
		require.Equal(t, int64(2), g1.LastBatch)
		require.Equal(t, state.GenerationBuilding, g2.Status)
		require.Nil(t, g2.Pin)
		require.False(t, g2.Swapped)
		require.Len(t, d.RecentBatches, 3)
		for i, applied := range []bool{true, true, false} {
			require.Equalf(t, applied, d.RecentBatches[i].Applied, "batch %d", d.RecentBatches[i].Seq)
		}
		require.True(t, d.Warehouse.Exists)
		require.Equal(t, int64(1), d.Warehouse.ServingGeneration)
		require.Equal(t, []string{"the state store builds generation 2, the warehouse is fenced for 1 (the build's pass fences it)"},
			d.Warehouse.Disagreements)

		_, err = ingest.Inspect(t.Context(), e.inspect(), "raw.event")
		require.EqualError(t, err, "unknown source raw.event: did you mean raw.events?")
	})
}
