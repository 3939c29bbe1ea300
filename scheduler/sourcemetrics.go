package scheduler

import (
	"context"
	"fmt"

	"github.com/gapless-dev/gapless/ingest"
	"github.com/gapless-dev/gapless/state"
)

// sourceStates are the values of gapless_source_state's state label.
var sourceStates = []state.SourceState{state.SourcePendingBackfill, state.SourceBackfilling, state.SourcePrimed, state.SourceNeedsResync}

// observeSources fills the gapless_source_* metrics after a pass: the
// counters from rep (batches applied and skipped, fenced writes, replays,
// late rows; rows are counted by tickIngester as the steps commit), the
// gauges from the state store (state, watermark lag, lag, blocked
// batches), never from the warehouse. It reads one ListSources and one
// GetIntervals for all sources, and one ListBatches per blocked source.
func (s *Scheduler) observeSources(ctx context.Context, rep ingest.Report) error {
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
		m.sourceSkipped.WithLabelValues(sr.Source).Add(float64(sr.Skipped))
	}
	srcs, err := s.p.Store.ListSources(ctx, state.SourceFilter{Names: names})
	if err != nil {
		return fmt.Errorf("reading the sources for their metrics: %w", err)
	}
	byName := map[string]*state.Source{}
	for _, src := range srcs {
		byName[src.Name] = src
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
		if err := s.observeQueue(ctx, sr, byName[sr.Source]); err != nil {
			return err
		}
	}
	return nil
}

// observeQueue sets a source's lag and blocked gauges from the state
// store: the lag is the staged batches after the serving generation's
// applied seq (state.Generation.AppliedSeq, which never leads the
// warehouse's markers), so it is known also after a pass that did not
// open the warehouse.
func (s *Scheduler) observeQueue(ctx context.Context, sr ingest.SourceReport, src *state.Source) error {
	m := s.metrics
	var applied int64
	if src != nil {
		for _, g := range src.Generations {
			if g.Generation == src.Serving {
				applied = g.AppliedSeq
			}
		}
		m.sourceLag.WithLabelValues(sr.Source).Set(float64(max(0, src.LastSeq-applied)))
	}
	blocked, age := 0, 0.0
	if b := sr.Blocked; b != nil {
		bs, err := s.p.Store.ListBatches(ctx, state.ListBatchesParams{Source: sr.Source, AfterSeq: b.Seq - 1})
		if err != nil {
			return fmt.Errorf("source %s: listing its staged batches for its metrics: %w", sr.Source, err)
		}
		blocked = len(bs)
		age = max(0, s.clock.Now().Sub(b.StagedAt).Seconds())
	}
	m.sourceBlocked.WithLabelValues(sr.Source).Set(float64(blocked))
	m.sourceBlockedAge.WithLabelValues(sr.Source).Set(age)
	return nil
}
