package scheduler

import (
	"context"
	"fmt"

	"github.com/gapless-dev/gapless/ingest"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

// sourceStates are the values of gapless_source_state's state label.
var sourceStates = []state.SourceState{state.SourcePendingBackfill, state.SourceBackfilling, state.SourcePrimed, state.SourceNeedsResync}

// observeSources fills the gapless_source_* metrics after a pass: the
// counters from rep (batches applied, fenced writes, replays, late rows;
// rows are counted by tickIngester as the steps commit), the gauges from
// the state store (state, watermark lag) and, when the pass opened the
// warehouse, from its markers (lag, blocked batches). It reads one
// ListSources and one GetIntervals for all sources, and per source one
// IngestState and one ListBatches from the lowest seq it counts.
func (s *Scheduler) observeSources(ctx context.Context, rep ingest.Report, eng *tickIngester) error {
	m := s.metrics
	names := make([]string, 0, len(rep.Sources))
	keys := make([]state.VersionKey, 0, len(rep.Sources))
	for _, sr := range rep.Sources {
		names = append(names, sr.Source)
		keys = append(keys, state.SourceKey(sr.Source))
		m.sourceBatches.WithLabelValues(sr.Source).Add(float64(sr.Applied))
		m.sourceFenced.WithLabelValues(sr.Source).Add(float64(sr.Fenced))
		m.sourceReplayed.WithLabelValues(sr.Source).Add(float64(sr.Replayed))
		m.sourceLateRows.WithLabelValues(sr.Source).Add(float64(sr.LateRows))
	}
	srcs, err := s.p.Store.ListSources(ctx, state.SourceFilter{Names: names})
	if err != nil {
		return fmt.Errorf("reading the sources for their metrics: %w", err)
	}
	for _, src := range srcs {
		st := src.State()
		for _, v := range sourceStates {
			g := 0.0
			if v == st {
				g = 1
			}
			m.sourceState.WithLabelValues(src.Name, string(v)).Set(g)
		}
	}
	cov, err := s.p.Store.GetIntervals(ctx, keys)
	if err != nil {
		return fmt.Errorf("reading the sources' watermarks for their metrics: %w", err)
	}
	now := s.clock.Now()
	for _, sr := range rep.Sources {
		if w := cov[state.SourceKey(sr.Source)].Frontier(); !w.IsZero() {
			m.sourceWMLag.WithLabelValues(sr.Source).Set(max(0, now.Sub(w).Seconds()))
		}
		if err := s.observeQueue(ctx, sr, eng); err != nil {
			return err
		}
	}
	return nil
}

// observeQueue sets a source's lag and blocked gauges. The lag needs the
// warehouse's markers (the applied position is the warehouse's): when the
// pass did not open the warehouse it is left as the last pass set it.
func (s *Scheduler) observeQueue(ctx context.Context, sr ingest.SourceReport, eng *tickIngester) error {
	m := s.metrics
	applied := int64(-1) // unknown
	if eng.opened() {
		ws, err := eng.IngestState(ctx, sr.Source)
		if err != nil {
			return fmt.Errorf("source %s: reading its warehouse markers for its metrics: %w", sr.Source, err)
		}
		applied = appliedSeq(ws)
	}
	after := applied
	if b := sr.Blocked; b != nil && (after < 0 || b.Seq-1 < after) {
		after = b.Seq - 1
	}
	var bs []state.Batch
	if after >= 0 {
		var err error
		if bs, err = s.p.Store.ListBatches(ctx, state.ListBatchesParams{Source: sr.Source, AfterSeq: after}); err != nil {
			return fmt.Errorf("source %s: listing its staged batches for its metrics: %w", sr.Source, err)
		}
	}
	if applied >= 0 {
		lag := 0
		for _, b := range bs {
			if b.Seq > applied {
				lag++
			}
		}
		m.sourceLag.WithLabelValues(sr.Source).Set(float64(lag))
	}
	blocked, age := 0, 0.0
	if b := sr.Blocked; b != nil {
		for _, x := range bs {
			if x.Seq >= b.Seq {
				blocked++
			}
		}
		age = max(0, s.clock.Now().Sub(b.StagedAt).Seconds())
	}
	m.sourceBlocked.WithLabelValues(sr.Source).Set(float64(blocked))
	m.sourceBlockedAge.WithLabelValues(sr.Source).Set(age)
	return nil
}

// appliedSeq is the last live batch seq the serving generation holds: its
// last batch marker, or the last batch its snapshot covered; 0 when
// nothing serves.
func appliedSeq(ws warehouse.IngestState) int64 {
	var seq int64
	if ws.ServingGeneration == 0 {
		return 0
	}
	for _, mk := range ws.Markers {
		if mk.Generation == ws.ServingGeneration && (mk.Kind == warehouse.MarkerBatch || mk.Kind == warehouse.MarkerCovered) {
			seq = max(seq, mk.Index)
		}
	}
	return seq
}
