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

// Scenario: the counters and gauges a pass's report carries (filled by
// the ingest worker: replays, fenced writes, late rows, the blocking batch)
// reach the metrics as they are, added up over passes. A source with four
// staged batches is blocked at seq 2, staged 90 seconds before the pass
// ended: three batches are blocked, the oldest 90 s old; a later pass that
// is not blocked clears both. Nothing serves yet, so the lag, read from
// the state store without the warehouse, is all four batches.
func TestObserveSourcesFillsReportCounters(t *testing.T) {
	ctx := t.Context()
	now := time.Date(2024, 1, 1, 12, 0, 0, 0, time.UTC)
	s, st, m := observing(t, now)
	var bs []state.Batch
	for i := range int64(4) {
		bs = append(bs, state.Batch{From: i, To: i + 1, Kind: state.BatchAppend, Location: "f" + string(rune('a'+i)) + ".csv"})
	}
	_, err := st.StageBatches(ctx, state.StageBatchesParams{Source: src, Batches: bs, Now: now.Add(-90 * time.Second)})
	require.NoError(t, err)

	blocked := ingest.SourceReport{Source: src, Applied: 2, Replayed: 3, Fenced: 1, LateRows: 5,
		Blocked: &ingest.BlockedBatch{Seq: 2, Location: "fb.csv", StagedAt: now.Add(-90 * time.Second), Reason: "bad"}}
	require.NoError(t, s.observeSources(ctx, ingest.Report{Sources: []ingest.SourceReport{blocked}}))
	val := func(c prometheus.Collector) float64 { return testutil.ToFloat64(c) }
	require.Equal(t, 2.0, val(m.sourceBatches.WithLabelValues(src)))
	require.Equal(t, 3.0, val(m.sourceReplayed.WithLabelValues(src)))
	require.Equal(t, 1.0, val(m.sourceFenced.WithLabelValues(src)))
	require.Equal(t, 5.0, val(m.sourceLateRows.WithLabelValues(src)))
	require.Equal(t, 3.0, val(m.sourceBlocked.WithLabelValues(src)))
	require.Equal(t, 90.0, val(m.sourceBlockedAge.WithLabelValues(src)))
	require.Equal(t, 1.0, val(m.sourceState.WithLabelValues(src, string(state.SourcePendingBackfill))))
	require.Equal(t, 4.0, val(m.sourceLag.WithLabelValues(src)), "the lag is read from the state store")

	require.NoError(t, s.observeSources(ctx, ingest.Report{Sources: []ingest.SourceReport{{Source: src, Replayed: 1}}}))
	require.Equal(t, 4.0, val(m.sourceReplayed.WithLabelValues(src)))
	require.Zero(t, val(m.sourceBlocked.WithLabelValues(src)))
	require.Zero(t, val(m.sourceBlockedAge.WithLabelValues(src)))
}

// src is the source the observing tests register.
const src = "raw.src"

// observing is a Scheduler on a fresh SQLite state store with src
// registered, whose metrics the observing tests read.
func observing(t *testing.T, now time.Time) (*Scheduler, state.Store, *metrics) {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "state.db"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	_, err = st.EnsureSources(t.Context(), state.EnsureSourcesParams{Sources: []state.SourceDefinition{{Name: src, Connector: "files", DefinitionHash: "h"}}, Now: now})
	require.NoError(t, err)
	m, err := newMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	return &Scheduler{p: Params{Store: st}, clock: clockwork.NewFakeClockAt(now), log: slog.New(slog.DiscardHandler), metrics: m}, st, m
}

// Scenario: a pass skipped a blocked batch whose file was removed, and a
// later one skipped another: gapless_source_batches_skipped_total adds
// them up (2), apart from the batches applied.
func TestObserveSourcesCountsSkippedBatches(t *testing.T) {
	ctx := t.Context()
	s, _, m := observing(t, time.Date(2024, 1, 1, 12, 0, 0, 0, time.UTC))
	require.NoError(t, s.observeSources(ctx, ingest.Report{Sources: []ingest.SourceReport{{Source: src, Applied: 1, Skipped: 1}}}))
	require.NoError(t, s.observeSources(ctx, ingest.Report{Sources: []ingest.SourceReport{{Source: src, Skipped: 1}}}))
	require.Equal(t, 2.0, testutil.ToFloat64(m.sourceSkipped.WithLabelValues(src)))
	require.Equal(t, 1.0, testutil.ToFloat64(m.sourceBatches.WithLabelValues(src)))
}
