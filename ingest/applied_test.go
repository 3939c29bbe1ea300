package ingest_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/connector"
	"github.com/gapless-dev/gapless/connector/files"
	"github.com/gapless-dev/gapless/ingest"
	"github.com/gapless-dev/gapless/source"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

// passLazy runs one pass that opens the warehouse through OpenEngine, and
// returns the source's report and how many times the pass opened it.
func (e *env) passLazy() (ingest.SourceReport, int) {
	e.t.Helper()
	e.clk.Advance(time.Second)
	if e.conn == nil {
		c, err := files.New(e.d, files.Options{Root: e.root, Clock: e.clk, ChunkFiles: 2})
		require.NoError(e.t, err)
		e.conn = c
	}
	opened := 0
	rep, err := ingest.Pass(e.t.Context(), ingest.Params{Store: e.store,
		OpenEngine: func(context.Context) (warehouse.Ingester, error) {
			opened++
			return e.wh, nil
		},
		Sources: map[string]*source.Definition{src: e.d}, Connectors: []connector.Connector{e.conn},
		Root: e.root, Clock: e.clk, Hooks: e.hooks})
	require.NoError(e.t, err)
	require.Len(e.t, rep.Sources, 1)
	return rep.Sources[0], opened
}

// generation returns generation g of the source as the state store has it.
func (e *env) generation(g int64) state.Generation {
	e.t.Helper()
	for _, gen := range e.source().Generations {
		if gen.Generation == g {
			return gen
		}
	}
	require.Failf(e.t, "no such generation", "generation %d", g)
	return state.Generation{}
}

func TestIdlePassDoesNotOpenTheWarehouse(t *testing.T) {
	// Scenario: a source with a time_column is registered before any
	// file lands: its build is owed but deferred (no data), without the
	// warehouse. It primes from two files: the pass opens the warehouse
	// once and the serving generation's applied
	// seq reaches the last staged batch. A pass with nothing new is idle:
	// it never calls OpenEngine and publishes no watermark (the coverage
	// stays). A file arrives: the pass opens the warehouse and applies it,
	// moving the applied seq; the next pass is idle again. A resync owes a
	// build: that pass opens the warehouse whatever the files.
	eachStore(t, func(t *testing.T, e *env) {
		e.d.TimeColumn = "ts"
		r, opened := e.passLazy()
		require.NoError(t, r.Err)
		require.Equal(t, "no_data", r.Deferred)
		require.True(t, r.Idle)
		require.Zero(t, opened, "nothing to build from: no warehouse")
		require.Equal(t, state.SourcePendingBackfill, e.source().State())

		e.write("a.csv", "id,ts\n1,2024-01-01 08:00:00\n")
		e.write("b.csv", "id,ts\n2,2024-01-01 09:00:00\n")
		r, opened = e.passLazy()
		require.NoError(t, r.Err)
		require.Equal(t, 1, opened)
		require.Equal(t, int64(1), r.Built)
		require.False(t, r.Idle)
		s := e.source()
		require.Equal(t, int64(2), s.LastSeq)
		require.Equal(t, int64(2), e.generation(1).AppliedSeq, "the snapshot covered both batches")
		cov := e.coverage()
		require.False(t, cov.IsEmpty())

		r, opened = e.passLazy()
		require.NoError(t, r.Err)
		require.Zero(t, opened, "an idle pass opens no warehouse")
		require.True(t, r.Idle)
		require.Zero(t, r.Staged)
		require.Zero(t, r.Watermark, "an idle pass does not recompute its watermark")
		require.Equal(t, cov, e.coverage())

		e.write("c.csv", "id,ts\n3,2024-01-01 10:00:00\n")
		r, opened = e.passLazy()
		require.NoError(t, r.Err)
		require.Equal(t, 1, opened, "a file arrived: the pass needs the warehouse")
		require.False(t, r.Idle)
		require.Equal(t, 1, r.Applied)
		require.Equal(t, int64(3), e.generation(1).AppliedSeq)
		require.Equal(t, time.Date(2024, 1, 1, 10, 0, 0, 0, time.UTC), r.Watermark)
		e.requireServes(3)

		r, opened = e.passLazy()
		require.NoError(t, r.Err)
		require.Zero(t, opened)
		require.True(t, r.Idle)

		_, err := e.store.RequestBuild(t.Context(), state.RequestBuildParams{Source: src, Reason: "resync", Now: e.clk.Now()})
		require.NoError(t, err)
		r, opened = e.passLazy()
		require.NoError(t, r.Err)
		require.Equal(t, 1, opened, "a build is owed")
		require.Equal(t, int64(2), r.Built)
		require.Equal(t, int64(3), e.generation(2).AppliedSeq)
		e.requireServes(3)
		_, opened = e.passLazy()
		require.Zero(t, opened)
	})
}

func TestOpenEngineFailureFailsOnlyBusySources(t *testing.T) {
	// Scenario: two primed sources; a file arrives for raw.events only and
	// the warehouse cannot be opened. The pass opens it once, fails
	// raw.events naming the open error, and leaves the idle raw.other
	// passing.
	eachStore(t, func(t *testing.T, e *env) {
		other := &source.Definition{Name: "raw.other", File: "sources/other.yaml", Connector: source.ConnectorFiles,
			Files: &source.Files{Path: "landing/other*.csv"}, Apply: source.ApplyAppend}
		e.d.Files.Path = "landing/events*.csv"
		ce, err := files.New(e.d, files.Options{Root: e.root, Clock: e.clk})
		require.NoError(t, err)
		co, err := files.New(other, files.Options{Root: e.root, Clock: e.clk})
		require.NoError(t, err)
		p := ingest.Params{Store: e.store, Engine: e.wh, Sources: map[string]*source.Definition{src: e.d, "raw.other": other},
			Connectors: []connector.Connector{ce, co}, Root: e.root, Clock: e.clk}
		e.csv("events1.csv", 1)
		e.csv("other1.csv", 1)
		rep, err := ingest.Pass(t.Context(), p)
		require.NoError(t, err)
		require.NoError(t, rep.Err())

		e.csv("events2.csv", 2)
		down := errors.New("warehouse down")
		opened := 0
		p.Engine, p.OpenEngine = nil, func(context.Context) (warehouse.Ingester, error) { opened++; return nil, down }
		e.clk.Advance(time.Second)
		rep, err = ingest.Pass(t.Context(), p)
		require.NoError(t, err)
		require.Equal(t, 1, opened)
		byName := map[string]ingest.SourceReport{}
		for _, s := range rep.Sources {
			byName[s.Source] = s
		}
		require.NoError(t, byName["raw.other"].Err)
		require.True(t, byName["raw.other"].Idle)
		require.ErrorIs(t, byName[src].Err, down)
		require.Contains(t, byName[src].Err.Error(), "opening the warehouse")
		require.Equal(t, 1, byName[src].Staged, "staged before the warehouse was needed")
	})
}

// failApplied is the real state store whose RecordApplied fails while
// crash is set: a crash between a warehouse commit and the state store
// hearing of it.
type failApplied struct {
	state.Store
	crash error
}

func (f *failApplied) RecordApplied(ctx context.Context, p state.RecordAppliedParams) (state.Generation, error) {
	if f.crash != nil {
		return state.Generation{}, f.crash
	}
	return f.Store.RecordApplied(ctx, p)
}

func TestAppliedSeqBehindIsHealedFromTheMarkers(t *testing.T) {
	// Scenario: on a primed source, a pass applies b.csv in the warehouse
	// and crashes before the state store records it: the applied seq lags
	// the markers, which `sources show` reports as a disagreement (and not
	// as a blocked batch). The next pass is not idle (applied < last staged): it
	// opens the warehouse, heals the applied seq from the markers without
	// applying b.csv again (each row served once), and the pass after it is
	// idle.
	eachStore(t, func(t *testing.T, e *env) {
		fa := &failApplied{Store: e.store}
		e.store = fa
		e.csv("a.csv", 1, 2)
		r, _ := e.passLazy()
		require.NoError(t, r.Err)
		require.Equal(t, int64(1), e.generation(1).AppliedSeq)

		crash := errors.New("crash before RecordApplied")
		fa.crash = crash
		e.csv("b.csv", 3)
		r, _ = e.passLazy()
		require.ErrorIs(t, r.Err, crash)
		require.Equal(t, int64(1), e.generation(1).AppliedSeq, "the state store lags")
		e.requireServes(3)
		d, err := ingest.Inspect(t.Context(), ingest.InspectParams{Store: e.store, Engine: e.wh, Now: e.clk.Now()}, src)
		require.NoError(t, err)
		require.Equal(t, []string{"the warehouse's markers hold batch 2 of generation 1, the state store records 1 (the next ingest pass records it)"},
			d.Warehouse.Disagreements, "sources show compares the markers with the state store")
		require.Nil(t, d.Blocked, "a lost record is not a failing batch")

		fa.crash = nil
		r, opened := e.passLazy()
		require.NoError(t, r.Err)
		require.Equal(t, 1, opened, "an applied seq behind the queue is not idle")
		require.Contains(t, r.Healed, "recorded batch 2 applied to generation 1")
		require.Zero(t, r.Applied)
		require.Equal(t, int64(2), e.generation(1).AppliedSeq)
		e.requireServes(3)

		r, opened = e.passLazy()
		require.NoError(t, r.Err)
		require.Zero(t, opened)
		require.True(t, r.Idle)
	})
}

// liveBeforeSwap is the real warehouse with a hook run before each swap
// is sent to it, and the outcome of every swap recorded.
type liveBeforeSwap struct {
	engine
	mu     sync.Mutex
	before func(try int)
	swaps  []error
}

func (l *liveBeforeSwap) ApplyIngest(ctx context.Context, p warehouse.IngestParams) (warehouse.IngestResult, error) {
	if p.Step != warehouse.StepSwap {
		return l.engine.ApplyIngest(ctx, p)
	}
	l.mu.Lock()
	try := len(l.swaps)
	l.mu.Unlock()
	if l.before != nil {
		l.before(try)
	}
	res, err := l.engine.ApplyIngest(ctx, p)
	l.mu.Lock()
	l.swaps = append(l.swaps, err)
	l.mu.Unlock()
	return res, err
}

func TestSwapRetriesWhenLiveBatchesLandBehindIt(t *testing.T) {
	// Scenario: generation 1 serves a.csv and b.csv (b.csv applied live).
	// A resync builds generation 2; after its catch-up, before its swap,
	// another worker stages c.csv and applies it to the serving generation
	// 1. The swap is refused (ErrBehind: generation 2 lacks c.csv's batch);
	// the build catches up again and its second swap commits: generation 2
	// serves every row exactly once, and has applied every staged batch.
	eachStore(t, func(t *testing.T, e *env) {
		e.csv("a.csv", 1, 2)
		require.NoError(t, e.pass().Err)
		e.csv("b.csv", 3)
		r := e.pass()
		require.NoError(t, r.Err)
		require.Equal(t, 1, r.Applied)

		ctx := t.Context()
		wh := &liveBeforeSwap{engine: e.wh}
		wh.before = func(try int) {
			if try != 0 {
				return
			}
			e.csv("c.csv", 4)
			d, err := e.conn.Discover(ctx, e.store)
			require.NoError(t, err)
			require.Len(t, d.Batches, 1)
			staged, err := e.store.StageBatches(ctx, state.StageBatchesParams{Source: src, Batches: d.Batches, Now: e.clk.Now()})
			require.NoError(t, err)
			_, err = e.wh.ApplyIngest(ctx, warehouse.IngestParams{Source: src, Step: warehouse.StepBatch, Generation: 1,
				Index: staged[0].Seq, Table: ingest.Table(src, 1), Apply: warehouse.IngestAppend,
				Files: warehouse.StagedFiles{Format: warehouse.FormatCSV, Paths: []string{filepath.Join(e.root, staged[0].Location)}}})
			require.NoError(t, err)
		}
		_, err := e.store.RequestBuild(ctx, state.RequestBuildParams{Source: src, Reason: "resync", Now: e.clk.Now()})
		require.NoError(t, err)
		e.clk.Advance(time.Second)
		rep, err := ingest.Pass(ctx, ingest.Params{Store: e.store, Engine: wh,
			Sources: map[string]*source.Definition{src: e.d}, Connectors: []connector.Connector{e.conn},
			Root: e.root, Clock: e.clk})
		require.NoError(t, err)
		r = rep.Sources[0]
		require.NoError(t, r.Err)
		require.Len(t, wh.swaps, 2, "the swap was tried twice")
		require.ErrorIs(t, wh.swaps[0], warehouse.ErrBehind)
		require.NoError(t, wh.swaps[1])
		require.Equal(t, int64(2), r.Built)
		require.Equal(t, int64(2), e.warehouseState().ServingGeneration)
		e.requireServes(4)
		s := e.source()
		require.Equal(t, int64(2), s.Serving)
		require.Equal(t, int64(3), s.LastSeq)
		require.Equal(t, int64(3), e.generation(2).AppliedSeq)
	})
}
