package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/ingest"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

// crashPoint is where a pass is crashed: at a hook (after PlanGeneration,
// or before or after a warehouse step of a generation), either by the
// hook failing (fail) or by cancelling the pass's context there, so that
// the next statement of the pass meets a cancelled context (cancel).
type crashPoint struct {
	name   string
	plan   bool // AfterPlan of gen
	before bool // BeforeStep, else AfterStep
	step   warehouse.IngestStep
	gen    int64
	index  int64
	cancel bool
	pg     bool // also on the PostgreSQL warehouse
}

var errCrash = errors.New("crash injected by the test")

// finalState is what a history leaves behind, compared between a crashed
// and an uncrashed run: the ids served, the source's state-store record
// (without times) and the warehouse's fence and markers (without times).
type finalState struct {
	IDs                         []int64
	State                       state.SourceState
	Serving, Building, Last     int64
	BuildRequested              bool
	Generations                 []string
	Planned, ServingInWarehouse int64
	Markers                     []string
	Batches                     int
	WarehouseExists             bool
}

func (r *rig) final() finalState {
	s := r.source()
	ws := r.warehouseState()
	f := finalState{IDs: r.servedIDs(), State: s.State(), Serving: s.Serving, Building: s.Building, Last: s.LastGeneration,
		BuildRequested: s.BuildRequested, Planned: ws.PlannedGeneration, ServingInWarehouse: ws.ServingGeneration,
		WarehouseExists: ws.Exists}
	for _, g := range s.Generations {
		pin := int64(-1)
		if g.Pin != nil {
			pin = *g.Pin
		}
		f.Generations = append(f.Generations, fmt.Sprintf("%d %s pin %d chunks %d %s %s", g.Generation, g.Kind, pin, g.Chunks, g.Status, g.RetiredReason))
	}
	for _, m := range ws.Markers {
		f.Markers = append(f.Markers, fmt.Sprintf("%d %s %d rows %d", m.Generation, m.Kind, m.Index, m.Rows))
	}
	bs, err := r.store.ListBatches(r.ctx, state.ListBatchesParams{Source: src})
	require.NoError(r.t, err)
	f.Batches = len(bs)
	return f
}

// crashHistory lands raw.events through a fixed history, crashing at cp
// (when not nil) once; the pass that crashed is followed at once by a
// pass with nothing new, which must resume. The history:
//  1. a.csv, b.csv, c.csv: generation 1 is built in two chunks;
//  2. d.csv, e.csv: two live batches (seq 4, 5) onto generation 1;
//  3. a resync, and f.csv: generation 2 is built in three chunks; once its
//     chunk 0 commits, g.csv lands and is staged (by another worker): 2's
//     catch-up applies it (seq 7) before its swap;
//  4. h.csv: a live batch (seq 8) onto generation 2.
//
// It returns the final state and whether the crash fired.
func crashHistory(t *testing.T, r *rig, cp *crashPoint) (finalState, bool) {
	fired := false
	var cancel context.CancelFunc
	crash := func() error {
		fired = true
		if cp.cancel {
			cancel()
			return nil
		}
		return errCrash
	}
	arrived := false
	at := func(before bool, step warehouse.IngestStep, gen, index int64) bool {
		return cp != nil && !fired && !cp.plan && cp.before == before && cp.step == step && cp.gen == gen && cp.index == index
	}
	hooks := ingest.Hooks{
		AfterPlan: func(_ string, gen int64) error {
			if cp != nil && !fired && cp.plan && cp.gen == gen {
				return crash()
			}
			return nil
		},
		BeforeStep: func(_ string, step warehouse.IngestStep, gen, index int64) error {
			if at(true, step, gen, index) {
				return crash()
			}
			return nil
		},
		AfterStep: func(_ string, step warehouse.IngestStep, gen, index int64) error {
			if !arrived && step == warehouse.StepChunk && gen == 2 && index == 0 {
				arrived = true
				r.csv("g.csv", 9)
				require.Equal(t, 1, r.stage(), "g.csv lands while generation 2 builds")
			}
			if at(false, step, gen, index) {
				return crash()
			}
			return nil
		},
	}
	pass := func(what string) {
		t.Helper()
		var ctx context.Context
		ctx, cancel = context.WithCancel(r.ctx)
		defer cancel()
		wasFired := fired
		rep, err := r.run(ctx, hooks)
		require.NoError(t, err, what)
		if fired && !wasFired {
			require.Error(t, rep.Err, "%s: the crash ends the pass", what)
			if cp.cancel {
				require.ErrorIs(t, rep.Err, context.Canceled, what)
			} else {
				require.ErrorIs(t, rep.Err, errCrash, what)
			}
			rows, distinct := r.served()
			require.Equal(t, rows, distinct, "%s: a row served twice after the crash", what)
			ctx, cancel = context.WithCancel(r.ctx)
			defer cancel()
			rep, err = r.run(ctx, hooks)
			require.NoError(t, err)
		}
		require.NoError(t, rep.Err, "%s (or the pass resuming it)", what)
	}

	r.csv("a.csv", 1, 2)
	r.csv("b.csv", 3, 4)
	r.csv("c.csv", 5)
	pass("priming")
	r.requireServesExactly(ids(1, 5))
	r.csv("d.csv", 6)
	r.csv("e.csv", 7)
	pass("two live batches")
	r.requireServesExactly(ids(1, 7))
	_, err := r.store.RequestBuild(r.ctx, state.RequestBuildParams{Source: src, Reason: "resync", Now: r.clk.Now()})
	require.NoError(t, err)
	r.csv("f.csv", 8)
	pass("the resync's build")
	require.True(t, arrived, "g.csv landed while generation 2 built")
	r.requireServesExactly(ids(1, 9))
	r.csv("h.csv", 10)
	pass("a live batch on generation 2")
	r.requireServesExactly(ids(1, 10))
	return r.final(), fired
}

func TestCrashAtEachStepResumesToTheUncrashedState(t *testing.T) {
	// Scenario: the history of crashHistory (build, live batches, resync
	// build with a catch-up, live batch) is run once without a crash, then
	// once per crash point, crashing there (a hook failing, or the pass's
	// context cancelled) and running the next pass with nothing new: after
	// PlanGeneration before the fence, between
	// chunks, after a chunk's warehouse commit, between a live batch's
	// warehouse commit and the pass's next write, before and after the
	// commit of a catch-up batch (the build resumes at its pin although
	// g.csv was staged after it), after the swap commit before
	// RecordSwap. Every run ends with the same table (ids 1..10, once
	// each), the same state-store record and generations, and the same
	// warehouse fence and markers as the uncrashed run. SQLite and
	// PostgreSQL state on DuckDB; the cases marked pg also on the
	// PostgreSQL warehouse.
	points := []crashPoint{
		{name: "after plan of 2, before its fence", plan: true, gen: 2},
		{name: "cancelled at the fence of 2", before: true, step: warehouse.StepFence, gen: 2, cancel: true},
		{name: "between chunks 0 and 1 of 1", step: warehouse.StepChunk, gen: 1, index: 0, pg: true},
		{name: "cancelled before chunk 1 of 2", before: true, step: warehouse.StepChunk, gen: 2, index: 1, cancel: true},
		{name: "after the commit of the last chunk of 2", step: warehouse.StepChunk, gen: 2, index: 2},
		{name: "after the commit of live batch 4", step: warehouse.StepBatch, gen: 1, index: 4},
		{name: "cancelled after the commit of live batch 4", step: warehouse.StepBatch, gen: 1, index: 4, cancel: true},
		{name: "before catch-up batch 7 of 2", before: true, step: warehouse.StepBatch, gen: 2, index: 7},
		{name: "after the commit of catch-up batch 7 of 2", step: warehouse.StepBatch, gen: 2, index: 7, pg: true},
		{name: "cancelled after the commit of catch-up batch 7 of 2", step: warehouse.StepBatch, gen: 2, index: 7, cancel: true},
		{name: "after the swap commit of 1, before RecordSwap", step: warehouse.StepSwap, gen: 1, pg: true},
		{name: "cancelled after the swap commit of 2, before RecordSwap", step: warehouse.StepSwap, gen: 2, cancel: true},
	}
	require.True(t, hasPG(points), "some crash points also run on the PostgreSQL engine")
	for _, b := range allBackends {
		t.Run(b.String(), func(t *testing.T) {
			want, _ := crashHistory(t, rigT(t, b), nil)
			require.Equal(t, ids(1, 10), want.IDs)
			require.Equal(t, state.SourcePrimed, want.State)
			require.Equal(t, int64(2), want.Serving)
			for _, cp := range points {
				if b.engine != "duckdb" && !cp.pg {
					continue
				}
				t.Run(cp.name, func(t *testing.T) {
					got, fired := crashHistory(t, rigT(t, b), &cp)
					require.True(t, fired, "the crash point was reached")
					require.Equal(t, want, got)
				})
			}
		})
	}
}

func hasPG(ps []crashPoint) bool {
	for _, p := range ps {
		if p.pg {
			return true
		}
	}
	return false
}
