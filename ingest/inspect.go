package ingest

import (
	"context"
	"fmt"
	"time"

	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

// What `gapless sources` and `gapless sources show` print: read from the
// state store (the sources, their generations and staged batches, the
// published watermark) and from the warehouse's fence and markers, which
// are the record of what is applied. Reading changes nothing. The JSON
// forms are stable (snake_case, documented in the README).

// Summary is one source's line of `gapless sources`.
type Summary struct {
	Source    string            `json:"source"`
	Connector string            `json:"connector"`
	State     state.SourceState `json:"state"`
	// ServingGeneration serves the source's view; 0: nothing yet.
	ServingGeneration int64 `json:"serving_generation"`
	// BuildingGeneration is the build in flight (0: none), with its chunks
	// applied (warehouse markers) of Chunks (0 while unpinned).
	BuildingGeneration int64 `json:"building_generation"`
	ChunksApplied      int   `json:"chunks_applied"`
	Chunks             int   `json:"chunks"`
	// AppliedSeq is the last staged batch the serving generation holds
	// (applied, or covered by its snapshot), AppliedPosition the source
	// position it ends at (exclusive); HeadSeq and HeadPosition the same of
	// the last staged batch.
	AppliedSeq      int64 `json:"applied_seq"`
	AppliedPosition int64 `json:"applied_position"`
	HeadSeq         int64 `json:"head_seq"`
	HeadPosition    int64 `json:"head_position"`
	// LagSeconds is how long the oldest staged batch the serving generation
	// has not applied has waited (0: none waits).
	LagSeconds float64 `json:"lag_seconds"`
	// Watermark is how far the source is published complete
	// (state.SourceKey's frontier); absent before anything is.
	Watermark time.Time `json:"watermark,omitzero"`
	// PendingBatches are the staged batches the serving generation has not
	// applied; BlockedBatches those of them held back by a failing batch:
	// every pending batch of a source that serves with no build owed (a
	// pass applies every batch it stages, in order, and stops at the first
	// that fails), whose first is Blocked.
	PendingBatches int           `json:"pending_batches"`
	BlockedBatches int           `json:"blocked_batches"`
	Blocked        *BlockedSince `json:"blocked,omitempty"`
	BuildRequested bool          `json:"build_requested"`
	ParkedReason   string        `json:"parked_reason,omitempty"`
}

// BlockedSince is the first blocked batch and how long it has waited.
type BlockedSince struct {
	Seq        int64     `json:"seq"`
	Location   string    `json:"location"`
	StagedAt   time.Time `json:"staged_at"`
	AgeSeconds float64   `json:"age_seconds"`
}

// Detail is `gapless sources show SOURCE`.
type Detail struct {
	Summary
	Generations []GenerationDetail `json:"generations"`
	// RecentBatches are the last staged batches, oldest first.
	RecentBatches []BatchDetail `json:"recent_batches"`
	Warehouse     FenceDetail   `json:"warehouse"`
}

// GenerationDetail is one generation, from the state store, with what the
// warehouse's markers hold of it.
type GenerationDetail struct {
	Generation int64                  `json:"generation"`
	Kind       state.GenerationKind   `json:"kind"`
	Pin        *int64                 `json:"pin"`
	PinLabel   string                 `json:"pin_label,omitempty"`
	Chunks     int                    `json:"chunks"`
	Status     state.GenerationStatus `json:"status"`
	// Reason is why it was retired ("" unless it is).
	Reason string `json:"reason,omitempty"`
	// ChunksApplied, LastBatch (the last batch applied or covered) and
	// Swapped are what its markers in the warehouse record.
	ChunksApplied int       `json:"chunks_applied"`
	LastBatch     int64     `json:"last_batch"`
	Swapped       bool      `json:"swapped"`
	CreatedAt     time.Time `json:"created_at"`
	SwappedAt     time.Time `json:"swapped_at,omitzero"`
	RetiredAt     time.Time `json:"retired_at,omitzero"`
}

// BatchDetail is one staged batch and whether the serving generation has
// applied it.
type BatchDetail struct {
	Seq        int64           `json:"seq"`
	From       int64           `json:"from"`
	To         int64           `json:"to"`
	Kind       state.BatchKind `json:"kind"`
	ReplaceRun string          `json:"replace_run,omitempty"`
	Location   string          `json:"location"`
	Rows       int64           `json:"rows"`
	StagedAt   time.Time       `json:"staged_at"`
	Applied    bool            `json:"applied"`
}

// FenceDetail is the warehouse's fence against the state store's record.
type FenceDetail struct {
	// Exists is false before the warehouse fenced any generation.
	Exists            bool  `json:"exists"`
	PlannedGeneration int64 `json:"planned_generation"`
	ServingGeneration int64 `json:"serving_generation"`
	Markers           int   `json:"markers"`
	// Disagreements say where the state store and the warehouse differ
	// (the next ingest pass heals what it can); empty when they agree.
	Disagreements []string `json:"disagreements"`
}

// InspectParams are the parameters of ListSummaries and Inspect.
type InspectParams struct {
	Store state.Store
	// Engine reads the fences and markers; nil reads none (applied
	// positions and chunk counts are then unknown, 0).
	Engine warehouse.Ingester
	Now    time.Time
	// Recent is how many of the last staged batches Inspect lists (0: 20).
	Recent int
}

// ListSummaries returns a Summary of every live source, by name.
func ListSummaries(ctx context.Context, p InspectParams) ([]Summary, error) {
	srcs, err := p.Store.ListSources(ctx, state.SourceFilter{})
	if err != nil {
		return nil, fmt.Errorf("listing the sources: %w", err)
	}
	out := make([]Summary, 0, len(srcs))
	for _, s := range srcs {
		r, err := read(ctx, p, s)
		if err != nil {
			return nil, err
		}
		out = append(out, r.summary(p.Now))
	}
	return out, nil
}

// Inspect returns the Detail of the named source, or an
// *UnregisteredSourceError naming the closest registered one.
func Inspect(ctx context.Context, p InspectParams, name string) (*Detail, error) {
	s, err := lookup(ctx, p.Store, name)
	if err != nil {
		return nil, err
	}
	r, err := read(ctx, p, s)
	if err != nil {
		return nil, err
	}
	d := &Detail{Summary: r.summary(p.Now), Generations: []GenerationDetail{}, RecentBatches: []BatchDetail{}}
	for _, g := range s.Generations {
		m := r.markers[g.Generation]
		d.Generations = append(d.Generations, GenerationDetail{Generation: g.Generation, Kind: g.Kind, Pin: g.Pin, PinLabel: g.PinLabel,
			Chunks: g.Chunks, Status: g.Status, Reason: g.RetiredReason, ChunksApplied: m.chunks, LastBatch: m.last, Swapped: m.swapped,
			CreatedAt: g.CreatedAt, SwappedAt: g.SwappedAt, RetiredAt: g.RetiredAt})
	}
	recent := p.Recent
	if recent <= 0 {
		recent = 20
	}
	bs := r.batches[max(0, len(r.batches)-recent):]
	for _, b := range bs {
		d.RecentBatches = append(d.RecentBatches, BatchDetail{Seq: b.Seq, From: b.From, To: b.To, Kind: b.Kind, ReplaceRun: b.ReplaceRun,
			Location: b.Location, Rows: b.Rows, StagedAt: b.StagedAt, Applied: s.Serving != 0 && b.Seq <= r.applied()})
	}
	ws := r.ws
	d.Warehouse = FenceDetail{Exists: ws.Exists, PlannedGeneration: ws.PlannedGeneration, ServingGeneration: ws.ServingGeneration,
		Markers: len(ws.Markers), Disagreements: disagreements(s, ws, p.Engine != nil)}
	return d, nil
}

// disagreements compares the state store's generations with the
// warehouse's fence.
func disagreements(s *state.Source, ws warehouse.IngestState, read bool) []string {
	out := []string{}
	if !read {
		return out
	}
	if ws.ServingGeneration != s.Serving {
		out = append(out, fmt.Sprintf("the warehouse serves generation %d, the state store records %d", ws.ServingGeneration, s.Serving))
	}
	if s.Building != 0 && ws.PlannedGeneration != s.Building {
		out = append(out, fmt.Sprintf("the state store builds generation %d, the warehouse is fenced for %d (the build's pass fences it)",
			s.Building, ws.PlannedGeneration))
	}
	if s.Building == 0 && ws.PlannedGeneration > s.Serving && ws.PlannedGeneration != ws.ServingGeneration {
		out = append(out, fmt.Sprintf("the warehouse is fenced for generation %d, which the state store no longer builds (retired)", ws.PlannedGeneration))
	}
	return out
}

// genMarkers is what the warehouse's markers hold of one generation.
type genMarkers struct {
	chunks  int
	last    int64 // last batch applied or covered
	swapped bool
}

// reading is what one source's Summary and Detail are computed from.
type reading struct {
	src       *state.Source
	ws        warehouse.IngestState
	markers   map[int64]genMarkers
	batches   []state.Batch
	watermark time.Time
}

func read(ctx context.Context, p InspectParams, s *state.Source) (*reading, error) {
	r := &reading{src: s, markers: map[int64]genMarkers{}}
	if p.Engine != nil {
		ws, err := p.Engine.IngestState(ctx, s.Name)
		if err != nil {
			return nil, fmt.Errorf("source %s: reading its warehouse fence: %w", s.Name, err)
		}
		r.ws = ws
	}
	for _, m := range r.ws.Markers {
		g := r.markers[m.Generation]
		switch m.Kind {
		case warehouse.MarkerChunk:
			g.chunks++
		case warehouse.MarkerBatch, warehouse.MarkerCovered:
			g.last = max(g.last, m.Index)
		case warehouse.MarkerSwap:
			g.swapped = true
		}
		r.markers[m.Generation] = g
	}
	bs, err := p.Store.ListBatches(ctx, state.ListBatchesParams{Source: s.Name})
	if err != nil {
		return nil, fmt.Errorf("source %s: listing its staged batches: %w", s.Name, err)
	}
	r.batches = bs
	cov, err := p.Store.GetIntervals(ctx, []state.VersionKey{state.SourceKey(s.Name)})
	if err != nil {
		return nil, fmt.Errorf("source %s: reading its watermark: %w", s.Name, err)
	}
	r.watermark = cov[state.SourceKey(s.Name)].Frontier()
	return r, nil
}

// applied is the last batch seq the serving generation holds: its
// warehouse markers', or the state store's record of them when that is
// ahead (the markers were not read).
func (r *reading) applied() int64 {
	return max(r.markers[r.src.Serving].last, appliedSeq(r.src, r.src.Serving))
}

func (r *reading) summary(now time.Time) Summary {
	s := r.src
	out := Summary{Source: s.Name, Connector: s.Connector, State: s.State(), ServingGeneration: s.Serving,
		BuildingGeneration: s.Building, Watermark: r.watermark, BuildRequested: s.BuildRequested, ParkedReason: s.ParkedReason}
	for _, g := range s.Generations {
		if g.Generation == s.Building && s.Building != 0 {
			out.Chunks, out.ChunksApplied = g.Chunks, r.markers[g.Generation].chunks
		}
		if g.Generation == s.Serving && g.Pin != nil {
			out.AppliedPosition = *g.Pin
		}
	}
	if s.Serving != 0 {
		out.AppliedSeq = r.applied()
	}
	var oldest *state.Batch
	for i, b := range r.batches {
		out.HeadSeq, out.HeadPosition = max(out.HeadSeq, b.Seq), max(out.HeadPosition, b.To)
		if s.Serving != 0 && b.Seq <= out.AppliedSeq {
			out.AppliedPosition = max(out.AppliedPosition, b.To)
			continue
		}
		out.PendingBatches++
		if oldest == nil {
			oldest = &r.batches[i]
		}
	}
	out.HeadSeq, out.HeadPosition = max(out.HeadSeq, out.AppliedSeq), max(out.HeadPosition, out.AppliedPosition)
	if oldest != nil {
		age := max(0, now.Sub(oldest.StagedAt))
		out.LagSeconds = age.Seconds()
		if s.Serving != 0 && s.Building == 0 && !s.BuildRequested {
			out.BlockedBatches = out.PendingBatches
			out.Blocked = &BlockedSince{Seq: oldest.Seq, Location: oldest.Location, StagedAt: oldest.StagedAt, AgeSeconds: age.Seconds()}
		}
	}
	return out
}
