package ingest

import (
	"context"
	"fmt"
	"time"

	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

// What `gapless sources` and `gapless sources show` print. `gapless
// sources` reads the state store alone (the sources, their generations
// with the applied seq and chunks each holds, the blocked batch, the late
// rows, the staged batches, the published watermark), so it answers while
// another process holds the warehouse; `sources show` also reads the
// warehouse's fence and markers, which are the record of what is applied,
// when it can, and compares them with the state store. Reading changes
// nothing. The JSON forms are stable (snake_case, documented in the
// README): fields are added, never renamed.

// Summary is one source's line of `gapless sources`.
type Summary struct {
	Source    string            `json:"source"`
	Connector string            `json:"connector"`
	State     state.SourceState `json:"state"`
	// ServingGeneration serves the source's view; 0: nothing yet.
	ServingGeneration int64 `json:"serving_generation"`
	// BuildingGeneration is the build in flight (0: none), with its chunks
	// applied (the state store's record, or the warehouse's markers when
	// read and ahead) of Chunks (0 while unpinned).
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
	// applied; BlockedBatches those held back by a failing batch (Blocked,
	// the state store's record of it): it and every batch staged after it.
	// A failure is shown while it holds the source back: on the build in
	// flight, or on the serving generation when no build is owed (a build
	// owed is what the batches then wait on).
	PendingBatches int           `json:"pending_batches"`
	BlockedBatches int           `json:"blocked_batches"`
	Blocked        *BlockedSince `json:"blocked,omitempty"`
	BuildRequested bool          `json:"build_requested"`
	ParkedReason   string        `json:"parked_reason,omitempty"`
	// LateRows is the source's running total of rows applied older than
	// the watermark already published when they arrived.
	LateRows int64 `json:"late_rows"`
}

// BlockedSince is the failing batch that holds its source back.
type BlockedSince struct {
	Seq      int64  `json:"seq"`
	Location string `json:"location"`
	// StagedAt is when the batch was staged, AgeSeconds how long ago (zero
	// when its staged record was pruned: then since its first failure).
	StagedAt   time.Time `json:"staged_at"`
	AgeSeconds float64   `json:"age_seconds"`
	// Generation is the generation it fails on; Reason the last failure,
	// naming the file; FailingSeconds the time since FirstFailedAt.
	Generation     int64     `json:"generation"`
	Reason         string    `json:"reason"`
	FirstFailedAt  time.Time `json:"first_failed_at"`
	LastFailedAt   time.Time `json:"last_failed_at"`
	FailingSeconds float64   `json:"failing_seconds"`
	Attempts       int       `json:"attempts"`
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
	// Swapped are what its markers in the warehouse record; when the
	// warehouse was not read (Warehouse.Read false), the state store's
	// record of them.
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
	// Read says the fence and markers were read; when not, NotRead says
	// why (another process holds the DuckDB file) and the other fields
	// are zero.
	Read    bool   `json:"read"`
	NotRead string `json:"not_read,omitempty"`
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
	// Engine reads the fences and markers; nil reads none: what is applied
	// is then the state store's record of it (its applied seq and chunks
	// per generation), which may lag the markers after a crash, never lead.
	Engine warehouse.Ingester
	// NotRead, with a nil Engine, is why the warehouse was not read
	// (Detail.Warehouse.NotRead).
	NotRead string
	Now     time.Time
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
		if p.Engine == nil {
			m = genMarkers{chunks: g.ChunksApplied, last: g.AppliedSeq, swapped: !g.SwappedAt.IsZero()}
		}
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
	d.Warehouse = FenceDetail{Read: p.Engine != nil, NotRead: p.NotRead, Exists: ws.Exists, PlannedGeneration: ws.PlannedGeneration, ServingGeneration: ws.ServingGeneration,
		Markers: len(ws.Markers), Disagreements: r.disagreements(p.Engine != nil)}
	return d, nil
}

// disagreements compares the state store's generations with the
// warehouse's fence and markers (none when they were not read).
func (r *reading) disagreements(read bool) []string {
	s, ws := r.src, r.ws
	out := []string{}
	if !read {
		return out
	}
	for _, g := range s.Generations {
		if g.Status == state.GenerationRetired {
			continue
		}
		m := r.markers[g.Generation]
		if m.last > g.AppliedSeq {
			out = append(out, fmt.Sprintf("the warehouse's markers hold batch %d of generation %d, the state store records %d (the next ingest pass records it)",
				m.last, g.Generation, g.AppliedSeq))
		}
		if m.chunks > g.ChunksApplied {
			out = append(out, fmt.Sprintf("the warehouse's markers hold %d chunk(s) of generation %d, the state store records %d (the next ingest pass records them)",
				m.chunks, g.Generation, g.ChunksApplied))
		}
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
		BuildingGeneration: s.Building, Watermark: r.watermark, BuildRequested: s.BuildRequested, ParkedReason: s.ParkedReason,
		LateRows: s.LateRows}
	for _, g := range s.Generations {
		if g.Generation == s.Building && s.Building != 0 {
			out.Chunks, out.ChunksApplied = g.Chunks, max(r.markers[g.Generation].chunks, g.ChunksApplied)
		}
		if g.Generation == s.Serving && g.Pin != nil {
			out.AppliedPosition = *g.Pin
		}
	}
	if s.Serving != 0 {
		out.AppliedSeq = r.applied()
	}
	var oldest *state.Batch
	blk := r.blocking()
	for i, b := range r.batches {
		out.HeadSeq, out.HeadPosition = max(out.HeadSeq, b.Seq), max(out.HeadPosition, b.To)
		if blk != nil && b.Seq >= blk.Seq {
			out.BlockedBatches++
		}
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
		out.LagSeconds = max(0, now.Sub(oldest.StagedAt)).Seconds()
	}
	if blk != nil {
		failing := max(0, now.Sub(blk.FirstFailedAt)).Seconds()
		out.Blocked = &BlockedSince{Seq: blk.Seq, Location: blk.Location, AgeSeconds: failing, Generation: blk.Generation,
			Reason: blk.Reason, FirstFailedAt: blk.FirstFailedAt, LastFailedAt: blk.LastFailedAt, FailingSeconds: failing,
			Attempts: blk.Attempts}
		for _, b := range r.batches {
			if b.Seq == blk.Seq {
				out.Blocked.StagedAt, out.Blocked.AgeSeconds = b.StagedAt, max(0, now.Sub(b.StagedAt)).Seconds()
			}
		}
	}
	return out
}

// blocking is the state store's blocked batch of the source while it
// holds the source back: on the build in flight, or on the serving
// generation with no build owed or in flight (else the batches wait on
// the build); nil otherwise.
func (r *reading) blocking() *state.SourceBlock {
	s, b := r.src, r.src.Blocked
	switch {
	case b == nil:
		return nil
	case s.Building != 0 && b.Generation == s.Building:
		return b
	case s.Building == 0 && !s.BuildRequested && b.Generation == s.Serving:
		return b
	}
	return nil
}
