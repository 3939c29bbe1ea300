package scheduler

import (
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/ingest"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/state/sqlite"
)

// Scenario: a pass skipped a blocked batch whose file was removed, and a
// later one skipped another: gapless_source_batches_skipped_total adds
// them up (2), apart from the batches applied.
func TestObserveSourcesCountsSkippedBatches(t *testing.T) {
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "state.db"))
	require.NoError(t, err)
	defer func() { require.NoError(t, st.Close()) }()
	now := time.Date(2024, 1, 1, 12, 0, 0, 0, time.UTC)
	const src = "raw.src"
	_, err = st.EnsureSources(ctx, state.EnsureSourcesParams{Sources: []state.SourceDefinition{{Name: src, Connector: "files", DefinitionHash: "h"}}, Now: now})
	require.NoError(t, err)
	m, err := newMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	s := &Scheduler{p: Params{Store: st}, clock: clockwork.NewFakeClockAt(now), log: slog.New(slog.DiscardHandler), metrics: m}

	require.NoError(t, s.observeSources(ctx, ingest.Report{Sources: []ingest.SourceReport{{Source: src, Applied: 1, Skipped: 1}}}))
	require.NoError(t, s.observeSources(ctx, ingest.Report{Sources: []ingest.SourceReport{{Source: src, Skipped: 1}}}))
	require.Equal(t, 2.0, testutil.ToFloat64(m.sourceSkipped.WithLabelValues(src)))
	require.Equal(t, 1.0, testutil.ToFloat64(m.sourceBatches.WithLabelValues(src)))
}
