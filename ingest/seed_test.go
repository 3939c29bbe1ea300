package ingest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/ingest"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

// The seed's (../shared/seeds/002) bug 1, end to end: a resync retires
// generation 2 while 2's swap is under way and plans generation 3; 2's
// late promotion must not make the state believe 2 serves, and no row may
// be lost or doubled.

// signal is a one-shot rendezvous between two passes' hooks.
type signal chan struct{}

func (s signal) fire() { close(s) }

// wait waits for s, or fails when the other pass ended first (done).
func (s signal) wait(done <-chan struct{}, what string) error {
	select {
	case <-s:
		return nil
	case <-done:
		return fmt.Errorf("the other pass ended before %s", what)
	}
}

type passResult struct {
	rep ingest.SourceReport
	err error
}

// applyElsewhere is another worker's live pass onto the generation the
// warehouse serves: it lands file name with row id, stages it, and applies
// every staged batch that generation lacks, in order, one warehouse step
// each; it records the rows then served in counts. It asserts nothing,
// for it runs inside another pass's hook.
func (r *rig) applyElsewhere(name string, id int, counts *[]int64) error {
	if err := os.WriteFile(filepath.Join(r.root, "landing", name), []byte(csvBody(id)), 0o644); err != nil {
		return err
	}
	d, err := r.conn.Discover(r.ctx, r.store)
	if err != nil {
		return err
	}
	if _, err := r.store.StageBatches(r.ctx, state.StageBatchesParams{Source: src, Batches: d.Batches, Now: r.clk.Now()}); err != nil {
		return err
	}
	ws, err := r.wh.IngestState(r.ctx, src)
	if err != nil {
		return err
	}
	g := ws.ServingGeneration
	var after int64
	for _, m := range ws.Markers {
		if m.Generation == g && (m.Kind == warehouse.MarkerBatch || m.Kind == warehouse.MarkerCovered) {
			after = max(after, m.Index)
		}
	}
	bs, err := r.store.ListBatches(r.ctx, state.ListBatchesParams{Source: src, AfterSeq: after})
	if err != nil {
		return err
	}
	if len(bs) == 0 || bs[len(bs)-1].Location != "landing/"+name {
		return fmt.Errorf("%s is not the last batch generation %d lacks: %+v", name, g, bs)
	}
	for _, b := range bs {
		if _, err := r.wh.ApplyIngest(r.ctx, warehouse.IngestParams{Source: src, Step: warehouse.StepBatch, Generation: g,
			Index: b.Seq, Table: ingest.Table(src, g), Apply: warehouse.IngestAppend,
			Files: warehouse.StagedFiles{Format: warehouse.FormatCSV, Paths: []string{filepath.Join(r.root, b.Location)}}}); err != nil {
			return fmt.Errorf("applying %s onto generation %d: %w", b.Location, g, err)
		}
	}
	rows, distinct, err := r.count()
	if err != nil {
		return err
	}
	if rows != distinct {
		return fmt.Errorf("generation %d serves %d rows, %d distinct", g, rows, distinct)
	}
	*counts = append(*counts, rows)
	return nil
}

// seedVariant is where the resync meets generation 2's build (before its
// last chunk, index 1, or before its swap) and whether that step commits
// (pass B waits after planning 3) or is fenced (B moved the fence first).
type seedVariant struct {
	step   warehouse.IngestStep
	index  int64
	fenced bool
}

func (v seedVariant) String() string {
	what := "swap"
	if v.step == warehouse.StepChunk {
		what = "last_chunk"
	}
	if v.fenced {
		return what + "_fenced"
	}
	return what + "_commits"
}

func TestSeedResyncDuringSwapLosesNoRow(t *testing.T) {
	// Scenario: the seed's first bug. raw.events is primed (generation 1,
	// a.csv and b.csv) and took live batch c.csv. A resync requests a
	// rebuild: pass A builds generation 2 (chunks [a, b] and [c]). As A
	// reaches 2's last chunk, or its swap (hook BeforeStep), a resync
	// retires 2 in the state store (RequestBuild with Retire) and pass B,
	// running beside A, stages d.csv and plans generation 3, pinned after
	// d. Then:
	//   - commits: B waits after planning (its fence not moved yet), so 2's
	//     step commits. At the swap: the warehouse serves 2 for a while,
	//     and A's promotion of 2, RecordSwap(2), is refused: 2 is retired.
	//     At the last chunk: A's catch-up of d.csv onto 2 commits, and the
	//     state store refuses to record it applied to the retired 2, which
	//     stops A before 2's swap. e.csv lands and is staged after 3's pin;
	//   - fenced: B moves the warehouse fence to 3 first and waits, so 2's
	//     step is refused by the fence (ErrFenced), writing nothing, and A
	//     defers (counted as fenced, no error); e.csv lands and is staged.
	// In both, the late promotion of 2 is attempted once more by hand while
	// 3 builds, and refused; then B loads 3, catches up on e and swaps 3
	// in: just before its swap, another worker stages g.csv and applies
	// the live batches the generation the warehouse serves (2, or 1 when
	// 2 was fenced) lacks, g's included, so 3's swap finds itself behind
	// (ErrBehind) and catches up first. The late promotion is refused
	// again. f.csv lands and the passes settle: generation 3 serves, every
	// row (ids 1..10) exactly once, the
	// history records no swap of 2 after its retirement, and the served row
	// count never decreased from one observation (after each pass, and
	// while 2 served) to the next. On both state stores and both engines.
	variants := []seedVariant{
		{step: warehouse.StepSwap}, {step: warehouse.StepSwap, fenced: true},
		{step: warehouse.StepChunk, index: 1}, {step: warehouse.StepChunk, index: 1, fenced: true},
	}
	for _, b := range allBackends {
		for _, v := range variants {
			t.Run(b.String()+"/"+v.String(), func(t *testing.T) { seedResyncDuringSwap(t, b, v) })
		}
	}
}

func seedResyncDuringSwap(t *testing.T, b backend, v seedVariant) {
	r := rigT(t, b)
	var counts []int64
	observe := func(when string) {
		rows, distinct := r.served()
		require.Equal(t, rows, distinct, "a row served twice %s", when)
		counts = append(counts, rows)
	}

	r.csv("a.csv", 1, 2)
	r.csv("b.csv", 3, 4)
	rep := r.pass(ingest.Hooks{})
	require.NoError(t, rep.Err)
	require.Equal(t, int64(1), rep.Built)
	observe("after priming")
	r.csv("c.csv", 5)
	rep = r.pass(ingest.Hooks{})
	require.NoError(t, rep.Err)
	require.Equal(t, 1, rep.Applied)
	observe("after live batch c")

	_, err := r.store.RequestBuild(r.ctx, state.RequestBuildParams{Source: src, Reason: "resync", Now: r.clk.Now()})
	require.NoError(t, err)

	// Pass B, beside A: it pauses after planning 3 (commits) or after
	// fencing 3 (fenced) until released.
	paused, release, bDone := make(signal), make(signal), make(chan struct{})
	released := false
	releaseB := func() { // main goroutine only
		if !released {
			released = true
			release.fire()
		}
	}
	var bRes passResult
	lateApplied := false
	hooksB := ingest.Hooks{
		AfterPlan: func(_ string, gen int64) error {
			if gen != 3 {
				return fmt.Errorf("pass B planned generation %d, want 3", gen)
			}
			if !v.fenced {
				paused.fire()
				<-release
			}
			return nil
		},
		AfterStep: func(_ string, step warehouse.IngestStep, gen, _ int64) error {
			if v.fenced && step == warehouse.StepFence && gen == 3 {
				paused.fire()
				<-release
			}
			return nil
		},
		BeforeStep: func(_ string, step warehouse.IngestStep, gen, _ int64) error {
			if step != warehouse.StepSwap || gen != 3 || lateApplied {
				return nil
			}
			lateApplied = true
			return r.applyElsewhere("g.csv", 10, &counts)
		},
	}

	var hookErr error
	met := 0
	hooksA := ingest.Hooks{
		BeforeStep: func(_ string, step warehouse.IngestStep, gen, index int64) error {
			if step != v.step || gen != 2 || index != v.index || met > 0 {
				return nil
			}
			met++
			// The resync, while 2 is under way.
			if _, err := r.store.RequestBuild(r.ctx, state.RequestBuildParams{Source: src, Retire: 2,
				Reason: "resync", Now: r.clk.Now()}); err != nil {
				hookErr = err
				return err
			}
			r.csv("d.csv", 6, 7)
			go func() {
				defer close(bDone)
				bRes.rep, bRes.err = r.run(context.Background(), hooksB)
			}()
			hookErr = paused.wait(bDone, "generation 3 was planned (and fenced)")
			return hookErr
		},
		AfterStep: func(_ string, step warehouse.IngestStep, gen, index int64) error {
			if gen != 2 {
				return nil
			}
			if v.fenced && step == v.step && index == v.index {
				hookErr = fmt.Errorf("generation 2's %s committed through the fence of generation 3", step)
				return hookErr
			}
			if step != warehouse.StepSwap {
				return nil
			}
			// 2's swap committed: the warehouse serves 2.
			rows, distinct := r.served()
			if rows != distinct {
				hookErr = fmt.Errorf("generation 2 serves %d rows, %d distinct", rows, distinct)
			}
			counts = append(counts, rows)
			r.csv("e.csv", 8)
			if n := r.stage(); n != 1 {
				hookErr = fmt.Errorf("staged %d batches, want e.csv", n)
			}
			return hookErr
		},
	}
	t.Cleanup(releaseB) // should an assertion below fail first
	repA, errA := r.run(r.ctx, hooksA)
	require.NoError(t, errA)
	require.NoError(t, hookErr)
	require.Equal(t, 1, met, "pass A reached generation 2's %s", v.step)
	require.NotEqual(t, int64(2), repA.Built, "pass A must not record generation 2 as swapped")
	switch {
	case v.fenced:
		// A stale write the fence refused wrote nothing: the pass defers
		// to the generation that now builds, and counts it.
		require.NoError(t, repA.Err)
		require.Equal(t, "fenced", repA.Deferred)
		require.Equal(t, 1, repA.Fenced, "2's %s is refused by the fence", v.step)
		observe("after 2 was fenced")
		r.csv("e.csv", 8)
		require.Equal(t, 1, r.stage())
	case v.step == warehouse.StepSwap:
		require.ErrorIs(t, repA.Err, state.ErrConflictingGeneration, "the late promotion of 2 is refused")
		require.Equal(t, int64(2), r.warehouseState().ServingGeneration, "2's swap committed")
	default:
		// 2's last chunk committed; its catch-up of d.csv committed in the
		// warehouse too, but the state store refuses to record a batch
		// applied to a retired generation, which stops pass A before 2's
		// swap: the warehouse still serves 1.
		require.ErrorIs(t, repA.Err, state.ErrConflictingGeneration, "recording a batch applied to the retired 2 is refused")
		require.Equal(t, int64(1), r.warehouseState().ServingGeneration)
		observe("after 2 was stopped")
		r.csv("e.csv", 8)
		require.Equal(t, 1, r.stage())
	}
	// The late promotion of 2, attempted again with the stale evidence of
	// 2's swap, while 3 is still building.
	require.Equal(t, int64(3), r.source().Building)
	_, err = r.store.RecordSwap(r.ctx, state.RecordSwapParams{Source: src, Generation: 2, Now: r.clk.Now()})
	require.ErrorIs(t, err, state.ErrConflictingGeneration)
	releaseB()
	<-bDone
	require.NoError(t, bRes.err)
	require.NoError(t, bRes.rep.Err)
	require.Equal(t, int64(3), bRes.rep.Built)
	observe("after generation 3 swapped in")

	// And once 3 serves.
	_, err = r.store.RecordSwap(r.ctx, state.RecordSwapParams{Source: src, Generation: 2, Now: r.clk.Now()})
	require.ErrorIs(t, err, state.ErrConflictingGeneration)

	r.csv("f.csv", 9)
	for i := range 2 {
		rep := r.pass(ingest.Hooks{})
		require.NoError(t, rep.Err)
		observe(fmt.Sprintf("after settling pass %d", i))
	}

	s := r.source()
	require.Equal(t, state.SourcePrimed, s.State())
	require.Equal(t, int64(3), s.Serving)
	require.Zero(t, s.Building)
	require.Equal(t, int64(3), s.LastGeneration)
	ws := r.warehouseState()
	require.Equal(t, int64(3), ws.ServingGeneration)
	require.Equal(t, int64(3), ws.PlannedGeneration)
	require.True(t, lateApplied)
	r.requireServesExactly(ids(1, 10))
	for i := 1; i < len(counts); i++ {
		require.GreaterOrEqual(t, counts[i], counts[i-1], "served rows decreased: %v", counts)
	}
	for _, g := range s.Generations {
		if g.Generation == 2 {
			require.Equal(t, state.GenerationRetired, g.Status)
			require.True(t, g.SwappedAt.IsZero(), "generation 2 was recorded as swapped")
		}
	}

	var retiredAt int64
	for _, ev := range r.events() {
		g := eventGeneration(t, ev)
		switch {
		case ev.Kind == state.EventSourceRetired && g == 2:
			retiredAt = ev.ID
		case ev.Kind == state.EventSourceSwapped && g == 2:
			require.Zero(t, retiredAt, "generation 2's swap recorded after its retirement (event %d)", ev.ID)
		}
	}
	require.NotZero(t, retiredAt, "the resync's retirement of 2 is in the history")
}
