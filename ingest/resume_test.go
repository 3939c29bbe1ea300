package ingest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/connector"
	"github.com/gapless-dev/gapless/connector/files"
	"github.com/gapless-dev/gapless/ingest"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

// A build left in flight by an earlier pass (a crash, or another
// process's pass) resumes at its own pin while that pin is a valid
// snapshot of the source, however many files arrived since: it is retired
// only when the pin is no longer valid.

// duckBackends are both state stores on the DuckDB warehouse.
var duckBackends = []backend{{"sqlite", "duckdb"}, {"postgres", "duckdb"}}

// crashAfterChunk0 is a hook that fails the pass right after the
// warehouse committed chunk 0 of generation gen.
func crashAfterChunk0(gen int64) ingest.Hooks {
	return ingest.Hooks{AfterStep: func(_ string, step warehouse.IngestStep, g, index int64) error {
		if step == warehouse.StepChunk && g == gen && index == 0 {
			return errCrash
		}
		return nil
	}}
}

// eventsOfKind returns the source's history events of kind, in order.
func (r *rig) eventsOfKind(kind string) []state.Event {
	var out []state.Event
	for _, ev := range r.events() {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

func TestCrashedBuildResumesAtItsPinWhileFilesArrive(t *testing.T) {
	// Scenario: a.csv, b.csv, c.csv land; the pass plans generation 1
	// pinned after c.csv (two chunks) and crashes right after chunk 0's
	// warehouse commit. d.csv and e.csv land before the next pass, so the
	// source's snapshot has moved: the next pass still resumes generation
	// 1 at its pin (chunk 0 is refused as already applied, chunk 1 loads),
	// catches it up on d.csv and e.csv as live batches and swaps it in.
	// Generation 1 serves ids 1..7 once each; no generation is retired or
	// planned beyond 1. Both state stores, DuckDB.
	for _, b := range duckBackends {
		t.Run(b.String(), func(t *testing.T) {
			r := rigT(t, b)
			r.csv("a.csv", 1, 2)
			r.csv("b.csv", 3)
			r.csv("c.csv", 4)
			rep := r.pass(crashAfterChunk0(1))
			require.ErrorIs(t, rep.Err, errCrash)
			s := r.source()
			require.Equal(t, int64(1), s.Building)
			require.Equal(t, int64(3), *s.Generations[0].Pin)
			require.Equal(t, 2, s.Generations[0].Chunks)

			r.csv("d.csv", 5)
			r.csv("e.csv", 6, 7)
			rep = r.pass(ingest.Hooks{})
			require.NoError(t, rep.Err)
			require.Equal(t, 2, rep.Staged)
			require.Equal(t, int64(1), rep.Built, "the same generation, resumed")
			require.Equal(t, 1, rep.Replayed, "chunk 0 is replayed, refused as applied")
			r.requireServesExactly(ids(1, 7))

			s = r.source()
			require.Equal(t, int64(1), s.Serving)
			require.Equal(t, int64(1), s.LastGeneration, "nothing replanned")
			require.Zero(t, s.Building)
			require.False(t, s.BuildRequested)
			require.Empty(t, r.eventsOfKind(state.EventSourceRetired))
			require.Len(t, r.eventsOfKind(state.EventSourcePlanned), 1)
			var markers []string
			for _, m := range r.warehouseState().Markers {
				markers = append(markers, fmt.Sprintf("%s %d", m.Kind, m.Index))
			}
			require.Equal(t, []string{"batch 4", "batch 5", "chunk 0", "chunk 1", "covered 3", "swap 0"}, markers,
				"d.csv and e.csv are caught up on as batches 4 and 5 after the chunks of the pin")
		})
	}
}

func TestConcurrentPassesResumeOneBuild(t *testing.T) {
	// Scenario: two ingest processes (two goroutines, each with its own
	// files connector, over one state store and one warehouse) run passes
	// on raw.events at once. Pass A plans generation 1 (a.csv, b.csv,
	// c.csv: two chunks) and, right after chunk 0's commit, d.csv lands
	// and pass B starts. B stages d.csv, so the snapshot has moved, and
	// resumes A's generation 1 at its pin rather than retire it. Two
	// orders, driven by hooks and channels: B runs to its end while A
	// waits (B swaps 1 in; A then finds each of its steps applied), or B
	// waits before its swap while A runs to its end (A swaps 1 in; B's
	// swap is then refused as applied). Either way both passes succeed,
	// both report generation 1 built, nothing is retired or planned beyond
	// 1, and ids 1..5 are served once each. Every state store and engine.
	for _, b := range allBackends {
		for _, order := range []string{"B finishes first", "A finishes first"} {
			t.Run(b.String()+"/"+order, func(t *testing.T) {
				r := rigT(t, b)
				other, err := files.New(r.d, files.Options{Root: r.root, Clock: r.clk, ChunkFiles: 2})
				require.NoError(t, err)
				r.csv("a.csv", 1, 2)
				r.csv("b.csv", 3)
				r.csv("c.csv", 4)

				bPaused, releaseB, bDone := make(signal), make(signal), make(chan struct{})
				var bRes passResult
				paused := false
				hooksB := ingest.Hooks{BeforeStep: func(_ string, step warehouse.IngestStep, gen, _ int64) error {
					if order == "A finishes first" && step == warehouse.StepSwap && gen == 1 && !paused {
						paused = true
						bPaused.fire()
						<-releaseB
					}
					return nil
				}}
				runB := func() {
					defer close(bDone)
					p := r.params(hooksB)
					p.Connectors = []connector.Connector{other}
					r.clk.Advance(1)
					rep, err := ingest.Pass(context.Background(), p)
					bRes.err = err
					if err == nil && len(rep.Sources) == 1 {
						bRes.rep = rep.Sources[0]
					}
				}
				var hookErr error
				started := false
				hooksA := ingest.Hooks{AfterStep: func(_ string, step warehouse.IngestStep, gen, index int64) error {
					if started || step != warehouse.StepChunk || gen != 1 || index != 0 {
						return nil
					}
					started = true
					r.csv("d.csv", 5)
					go runB()
					if order == "B finishes first" {
						<-bDone
					} else {
						hookErr = bPaused.wait(bDone, "pass B reached its swap")
					}
					return hookErr
				}}
				repA, errA := r.run(r.ctx, hooksA)
				if order == "A finishes first" {
					releaseB.fire() // B may go on to its swap
				}
				<-bDone
				require.NoError(t, errA)
				require.NoError(t, hookErr)
				require.True(t, started)
				require.NoError(t, bRes.err)
				require.NoError(t, repA.Err)
				require.NoError(t, bRes.rep.Err)
				require.Equal(t, int64(1), repA.Built)
				require.Equal(t, int64(1), bRes.rep.Built, "B resumed A's generation")
				require.Equal(t, 1, bRes.rep.Staged, "B staged d.csv: the snapshot moved")
				require.Zero(t, repA.Fenced+bRes.rep.Fenced, "neither pass was fenced out")
				require.NotZero(t, repA.Replayed+bRes.rep.Replayed, "the steps one pass applied were refused to the other")
				r.requireServesExactly(ids(1, 5))

				s := r.source()
				require.Equal(t, int64(1), s.Serving)
				require.Zero(t, s.Building)
				require.Equal(t, int64(1), s.LastGeneration)
				require.Empty(t, r.eventsOfKind(state.EventSourceRetired), "no pass retired the other's build")
				ws := r.warehouseState()
				require.Equal(t, int64(1), ws.ServingGeneration)
				require.Equal(t, int64(1), ws.PlannedGeneration)

				rep := r.pass(ingest.Hooks{})
				require.NoError(t, rep.Err)
				require.True(t, rep.Idle, "nothing is owed after both passes")
				r.requireServesExactly(ids(1, 5))
			})
		}
	}
}

func TestReplaceRunStagedAfterThePinRetiresTheBuild(t *testing.T) {
	// Scenario: a pass plans generation 1 (a.csv, b.csv, c.csv) and
	// crashes after chunk 0; then a replace run landing/full/r1 completes.
	// Its batches are staged after generation 1's pin and replace what it
	// pinned: the next pass retires generation 1, the retire event naming
	// the run, and lands the run as generation 2 of kind replace, which
	// serves exactly the run's rows.
	for _, b := range duckBackends {
		t.Run(b.String(), func(t *testing.T) {
			r := rigT(t, b)
			r.csv("a.csv", 1, 2)
			r.csv("b.csv", 3)
			r.csv("c.csv", 4)
			require.ErrorIs(t, r.pass(crashAfterChunk0(1)).Err, errCrash)

			r.runFile("r1", "part-0.csv", 100, 101)
			r.runSuccess("r1")
			rep := r.pass(ingest.Hooks{})
			require.NoError(t, rep.Err)
			require.Equal(t, int64(2), rep.Built)
			r.requireServesExactly([]int64{100, 101})

			retired := r.eventsOfKind(state.EventSourceRetired)
			require.Len(t, retired, 1)
			require.Equal(t, int64(1), eventGeneration(t, retired[0]))
			require.Contains(t, retired[0].Reason, "replace run landing/full/r1")
			s := r.source()
			require.Equal(t, int64(2), s.Serving)
			require.Equal(t, state.GenerationReplace, s.Generations[1].Kind)
			require.Contains(t, s.Generations[0].RetiredReason, "replace run landing/full/r1")
		})
	}
}

func TestBuildWhosePinNoLongerChunksAlikeIsRetired(t *testing.T) {
	// Scenario: a pass plans generation 1 with two chunks (chunk_files 2:
	// a.csv, b.csv | c.csv) and crashes after chunk 0. The next process
	// runs with one file per chunk, so the snapshot at generation 1's pin
	// has three chunks: resuming would load b.csv twice. The pass retires
	// generation 1, the retire event saying why, and builds generation 2
	// from scratch, which serves ids 1..4 once each.
	for _, b := range duckBackends {
		t.Run(b.String(), func(t *testing.T) {
			r := rigT(t, b)
			r.csv("a.csv", 1, 2)
			r.csv("b.csv", 3)
			r.csv("c.csv", 4)
			require.ErrorIs(t, r.pass(crashAfterChunk0(1)).Err, errCrash)

			c, err := files.New(r.d, files.Options{Root: r.root, Clock: r.clk, ChunkFiles: 1})
			require.NoError(t, err)
			r.conn = c
			rep := r.pass(ingest.Hooks{})
			require.NoError(t, rep.Err)
			require.Equal(t, int64(2), rep.Built)
			r.requireServesExactly(ids(1, 4))
			retired := r.eventsOfKind(state.EventSourceRetired)
			require.Len(t, retired, 1)
			require.Equal(t, int64(1), eventGeneration(t, retired[0]))
			require.Equal(t, "source raw.events: snapshot at position 3: 3 chunks now, 2 when generation 1 was planned", retired[0].Reason)
			require.Equal(t, 3, r.source().Generations[1].Chunks)
		})
	}
}

// planCrash is the state store of a process that dies right after a
// PlanGeneration of kind kind committed: the plan is written, the pass
// goes no further.
type planCrash struct {
	state.Store
	kind  state.GenerationKind
	fired bool
}

func (s *planCrash) PlanGeneration(ctx context.Context, p state.PlanGenerationParams) (state.Generation, error) {
	g, err := s.Store.PlanGeneration(ctx, p)
	if err == nil && p.Kind == s.kind && !s.fired {
		s.fired = true
		return g, errCrash
	}
	return g, err
}

func TestResyncOwedBehindAReplaceRunSurvivesACrashAfterItsPlan(t *testing.T) {
	// Scenario: raw.events serves generation 1 (a.csv); a resync is owed,
	// either requested (RequestBuild: nothing planned yet) or planned by
	// `gapless sources resync` (ingest.Resync: generation 2, unpinned), and
	// a replace run landing/full/r1 completes before the next pass. That
	// pass plans the run's generation of kind replace (superseding the
	// resync's generation 2, if planned), the resync staying owed behind
	// it, and the process dies right after the plan committed. The next
	// pass swaps the run in and then builds the resync as a generation of
	// kind backfill: the request was kept by the planning transaction
	// itself, not by a write after it. That last generation serves the
	// run's rows once each, and no build is owed after it.
	for _, b := range duckBackends {
		for _, how := range []string{"requested", "planned"} {
			t.Run(b.String()+"/"+how, func(t *testing.T) {
				r := rigT(t, b)
				r.csv("a.csv", 1, 2)
				require.Equal(t, int64(1), r.pass(ingest.Hooks{}).Built)

				run := int64(2)
				if how == "requested" {
					_, err := r.store.RequestBuild(r.ctx, state.RequestBuildParams{Source: src, Reason: "resync", Now: r.clk.Now()})
					require.NoError(t, err)
				} else {
					res, err := ingest.Resync(r.ctx, r.store, src, r.clk.Now())
					require.NoError(t, err)
					require.Equal(t, int64(2), res.Planned)
					run = 3
				}
				r.runFile("r1", "part-0.csv", 100, 101)
				r.runSuccess("r1")
				real := r.store
				crashing := &planCrash{Store: real, kind: state.GenerationReplace}
				r.store = crashing
				rep := r.pass(ingest.Hooks{})
				r.store = real
				require.True(t, crashing.fired)
				require.ErrorIs(t, rep.Err, errCrash)
				s := r.source()
				require.Equal(t, run, s.Building)
				require.True(t, s.BuildRequested, "the resync is still owed after the crash")

				rep = r.pass(ingest.Hooks{})
				require.NoError(t, rep.Err)
				require.Equal(t, run+1, rep.Built, "the resync is built after the run swapped")
				s = r.source()
				require.Equal(t, run+1, s.Serving)
				require.False(t, s.BuildRequested)
				require.Equal(t, state.GenerationReplace, s.Generations[run-1].Kind)
				require.Equal(t, state.GenerationRetired, s.Generations[run-1].Status, "replaced by the resync's build")
				require.Equal(t, state.GenerationSwapped, s.Generations[run].Status)
				require.Equal(t, state.GenerationBackfill, s.Generations[run].Kind)
				r.requireServesExactly([]int64{100, 101})
			})
		}
	}
}

func TestResyncPinnedByAnotherPassMeanwhileIsResumed(t *testing.T) {
	// Scenario: raw.events serves generation 1; `gapless sources resync`
	// plans generation 2 without a pin, and b.csv lands. Pass B reads 2
	// unpinned and asks for the snapshot; meanwhile (a hook in B's
	// snapshot) pass A pins 2 there and dies right after (AfterPlan). B's
	// own pin then loses the compare-and-swap: B does not fail, it reads
	// the state again and resumes 2 at A's pin, and 2 serves ids 1..3
	// once each, with nothing retired.
	for _, b := range duckBackends {
		t.Run(b.String(), func(t *testing.T) {
			r := rigT(t, b)
			r.csv("a.csv", 1, 2)
			require.Equal(t, int64(1), r.pass(ingest.Hooks{}).Built)
			res, err := ingest.Resync(r.ctx, r.store, src, r.clk.Now())
			require.NoError(t, err)
			require.Equal(t, int64(2), res.Planned)
			r.csv("b.csv", 3)

			var repA ingest.SourceReport
			var errA error
			hook := &snapshotHook{Connector: r.conn, before: func() {
				repA, errA = r.run(r.ctx, ingest.Hooks{AfterPlan: func(string, int64) error { return errCrash }})
			}}
			p := r.params(ingest.Hooks{})
			p.Connectors = []connector.Connector{hook}
			rep, err := ingest.Pass(r.ctx, p)
			require.NoError(t, err)
			require.NoError(t, errA)
			require.ErrorIs(t, repA.Err, errCrash, "pass A pinned 2 and died")
			require.Len(t, rep.Sources, 1)
			repB := rep.Sources[0]
			require.NoError(t, repB.Err)
			require.Equal(t, int64(2), repB.Built)
			r.requireServesExactly(ids(1, 3))
			require.Empty(t, r.eventsOfKind(state.EventSourceRetired))
			require.Len(t, r.eventsOfKind(state.EventSourcePinned), 1)
		})
	}
}
