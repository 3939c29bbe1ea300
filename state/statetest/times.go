package statetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/state"
)

// times records times as of seq with the applied seq seq on generation g.
func times(b *bundle, g, seq int64, lo, hi time.Time) (state.Generation, error) {
	return b.store.RecordApplied(b.ctx, state.RecordAppliedParams{Source: src, Generation: g, Seq: seq,
		Times: &state.GenerationTimes{Seq: seq, Min: lo, Max: hi}})
}

// storedTimes reads generation g's Times from GetSource.
func storedTimes(t testing.TB, b *bundle, g int64) *state.GenerationTimes {
	t.Helper()
	for _, gen := range getSource(t, b).Generations {
		if gen.Generation == g {
			return gen.Times
		}
	}
	require.Failf(t, "no such generation", "generation %d", g)
	return nil
}

func testAppliedTimes(t *testing.T, b *bundle) {
	// Scenario: a generation's times (the least and greatest time_column
	// value its table holds, as of an applied seq) are not known until
	// recorded; RecordApplied with Times stores them at microsecond
	// precision and moves them only forward in their seq (a recorder
	// behind, or at the same seq, leaves them); times as of a batch not
	// applied, or that are no least and greatest, are refused and change
	// nothing; a table holding no time is known too (zero times); a
	// transition (the swap that retires the generation) keeps them, and a
	// retired generation is refused.
	ensure(t, b, "h1", hour(0))
	stage(t, b, 1, file(1), file(2), file(3), file(4))
	plan(t, b, 1, hour(2))
	swap(t, b, 1, hour(3))
	applied(t, b, 1, 1)
	require.Nil(t, storedTimes(t, b, 1), "nothing known before it is recorded")

	lo, hi := hour(10), hour(12).Add(1500*time.Nanosecond)
	out, err := times(b, 1, 1, lo, hi)
	require.NoError(t, err)
	want := &state.GenerationTimes{Seq: 1, Min: lo, Max: hour(12).Add(time.Microsecond)}
	require.Equal(t, want, out.Times)
	require.Equal(t, want, storedTimes(t, b, 1))

	out, err = times(b, 1, 1, hour(20), hour(21))
	require.NoError(t, err)
	require.Equal(t, want, out.Times, "the same seq again leaves the stored times")
	_, err = b.store.RecordApplied(b.ctx, state.RecordAppliedParams{Source: src, Generation: 1, Seq: 1,
		Times: &state.GenerationTimes{Seq: 0, Min: hour(1), Max: hour(2)}})
	require.NoError(t, err)
	require.Equal(t, want, storedTimes(t, b, 1), "times behind leave the stored ones")

	_, err = b.store.RecordApplied(b.ctx, state.RecordAppliedParams{Source: src, Generation: 1, Seq: 1,
		Times: &state.GenerationTimes{Seq: 2, Min: hour(1), Max: hour(2)}})
	require.ErrorContains(t, err, "not applied")
	for _, bad := range []state.GenerationTimes{{Seq: 2, Min: hour(3), Max: hour(2)}, {Seq: 2, Max: hour(2)}, {Seq: 2, Min: hour(2)}} {
		_, err = b.store.RecordApplied(b.ctx, state.RecordAppliedParams{Source: src, Generation: 1, Seq: 2, Times: &bad})
		require.Error(t, err, "%+v", bad)
	}
	require.Equal(t, int64(1), appliedSeq(t, b, 1), "a refused call moves nothing")
	require.Equal(t, want, storedTimes(t, b, 1))

	out, err = times(b, 1, 2, time.Time{}, time.Time{})
	require.NoError(t, err)
	require.Equal(t, &state.GenerationTimes{Seq: 2}, out.Times)
	require.Equal(t, &state.GenerationTimes{Seq: 2}, storedTimes(t, b, 1), "a table holding no time is known")
	_, err = times(b, 1, 3, hour(4), hour(5))
	require.NoError(t, err)

	_, err = b.store.RequestBuild(b.ctx, state.RequestBuildParams{Source: src, Reason: "resync", Now: hour(4)})
	require.NoError(t, err)
	plan(t, b, 4, hour(5))
	require.Nil(t, storedTimes(t, b, 2), "a new generation's times are not known")
	swap(t, b, 2, hour(6))
	require.Equal(t, &state.GenerationTimes{Seq: 3, Min: hour(4), Max: hour(5)}, storedTimes(t, b, 1), "the swap keeps them")
	_, err = times(b, 1, 4, hour(4), hour(6))
	require.ErrorIs(t, err, state.ErrConflictingGeneration)
}
