package sqlite_test

import (
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/sqlite"
)

// TestRecordSwapChecksBothPredicates checks each half of RecordSwap's
// compare-and-swap on its own. The stores keep the two in step (the
// building generation is the one generation whose status is building), so
// through the Store each half alone refuses every stale swap; here the
// file is edited behind the store's back so that only one half can see
// the swap is stale.
func TestRecordSwapChecksBothPredicates(t *testing.T) {
	// Scenario: generation 1 serves and 2 builds. (a) The row of 2 still
	// says building after 2 was retired (the source builds nothing): the
	// source's building generation refuses the swap. (b) The source still
	// names 3 as building but its row says retired: the generation's status
	// refuses it. Neither refusal changes the source.
	t.Parallel()
	ctx := t.Context()
	path := sqlite.DefaultPath(t.TempDir())
	st, err := sqlite.Open(ctx, path)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	raw, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, raw.Close()) })

	at := func(h int) time.Time { return time.Date(2024, 1, 1, h, 0, 0, 0, time.UTC) }
	pin := int64(5)
	_, err = st.EnsureSources(ctx, state.EnsureSourcesParams{Sources: []state.SourceDefinition{{Name: "raw.e", Connector: "files"}}, Now: at(0)})
	require.NoError(t, err)
	plan := func(h int) {
		_, err := st.PlanGeneration(ctx, state.PlanGenerationParams{Source: "raw.e", Kind: state.GenerationBackfill, Pin: &pin, Now: at(h)})
		require.NoError(t, err)
	}
	swap := func(g int64, h int) error {
		_, err := st.RecordSwap(ctx, state.RecordSwapParams{Source: "raw.e", Generation: g, Now: at(h)})
		return err
	}
	plan(1)
	require.NoError(t, swap(1, 2))
	plan(3)
	_, err = st.RetireGeneration(ctx, state.RetireGenerationParams{Source: "raw.e", Generation: 2, Reason: "resync", Now: at(4)})
	require.NoError(t, err)

	// (a)
	_, err = raw.ExecContext(ctx, `UPDATE source_generations SET status = 'building' WHERE source = 'raw.e' AND generation = 2`)
	require.NoError(t, err)
	before, err := st.GetSource(ctx, "raw.e")
	require.NoError(t, err)
	require.ErrorIs(t, swap(2, 5), state.ErrConflictingGeneration)
	after, err := st.GetSource(ctx, "raw.e")
	require.NoError(t, err)
	require.Equal(t, before, after)

	// (b)
	_, err = raw.ExecContext(ctx, `UPDATE source_generations SET status = 'retired' WHERE source = 'raw.e' AND generation = 2`)
	require.NoError(t, err)
	plan(6)
	_, err = raw.ExecContext(ctx, `UPDATE source_generations SET status = 'retired' WHERE source = 'raw.e' AND generation = 3`)
	require.NoError(t, err)
	before, err = st.GetSource(ctx, "raw.e")
	require.NoError(t, err)
	require.Equal(t, int64(3), before.Building)
	require.ErrorIs(t, swap(3, 7), state.ErrConflictingGeneration)
	after, err = st.GetSource(ctx, "raw.e")
	require.NoError(t, err)
	require.Equal(t, before, after)
	require.Equal(t, int64(1), after.Serving)
}
