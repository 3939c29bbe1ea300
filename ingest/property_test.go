package ingest_test

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/gapless-dev/gapless/ingest"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

// propertyChecks is how many random histories the property test tries
// unless -rapid.checks says otherwise (rapid runs a fifth under -short):
// each history opens a warehouse and a state store and runs a dozen
// passes, so rapid's default of 100 would take minutes.
const propertyChecks = 25

func limitPropertyChecks() {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if !set {
		_ = flag.Set("rapid.checks", strconv.Itoa(propertyChecks))
	}
}

// landing is the property test's model of the source: what landed, in the
// order the files connector gives it positions, and what is still to be
// staged.
type landing struct {
	nextID, nextFile int
	// staged are the items the queue holds, in position order: an append
	// file's ids, or a replace run's (run != "").
	staged []landed
	// appends are the append files written since the last pass, by name
	// (the order their names and first sight give them); runs are the
	// replace runs completed since the last pass, by name.
	appends, runs []landed
	// open is a replace run that has files but no _SUCCESS yet.
	open *landed
}

type landed struct {
	run string
	ids []int64
}

// discovered is what a pass's discovery stages: the append files first
// seen, in name order, then the runs completed, in name order (files of a
// run are first looked at once it is complete).
func (l *landing) discovered() {
	l.staged = append(l.staged, l.appends...)
	l.staged = append(l.staged, l.runs...)
	l.appends, l.runs = nil, nil
}

// want is the source at the end of the queue: the rows of the last replace
// run staged, if any, then every append staged after it.
func (l *landing) want() []int64 {
	from := 0
	for i, it := range l.staged {
		if it.run != "" {
			from = i
		}
	}
	var out []int64
	for _, it := range l.staged[from:] {
		out = append(out, it.ids...)
	}
	slices.Sort(out)
	return out
}

func (l *landing) draw(t *rapid.T, label string) []int64 {
	n := rapid.IntRange(1, 3).Draw(t, label)
	out := make([]int64, n)
	for i := range out {
		l.nextID++
		out[i] = int64(l.nextID)
	}
	return out
}

func TestPropertyServedTableIsTheSourceAtItsAppliedPosition(t *testing.T) {
	// Scenario (property): random interleavings of append files landing
	// (CSV, ids unique across all files), replace runs (a folder of one
	// to three files, completed by _SUCCESS, possibly over several steps),
	// ingest passes, resyncs (between passes, and in the middle of a pass
	// at a random warehouse step: retiring the build in flight) and
	// crashes (a hook failing at a random point of a pass). After every
	// pass no id is served twice, and after one that ends PRIMED without a
	// failure the table is the model below. Once the last replace run is completed
	// and passes run until nothing changes, the served table is exactly
	// the model: the rows of the last replace run staged, if any, plus
	// every append file staged after it, each once; nothing builds or is
	// owed, and the warehouse serves the generation the state store
	// records. SQLite state, DuckDB warehouse.
	limitPropertyChecks()
	base := t.TempDir()
	var checks, crashes, midResyncs, plannedBeside, endOnRun int
	rapid.Check(t, func(rt *rapid.T) {
		checks++
		dir, err := os.MkdirTemp(base, "check")
		require.NoError(rt, err)
		r := newRig(t, rt, backend{"sqlite", "duckdb"}, dir)
		defer r.shutdown()
		var l landing

		// hooks crash at the crashAt-th hook call of the pass, and resync
		// (retiring the build in flight) at the resyncAt-th; -1: never.
		// With beside, the resync is followed by a pass of another worker
		// that plans the next generation and stops there (the seed's
		// replan while a build is under way).
		hooks := func(crashAt, resyncAt int, beside bool) ingest.Hooks {
			calls := 0
			point := func() error {
				calls++
				if calls == resyncAt {
					s := r.source()
					if s.Building != 0 {
						midResyncs++
					}
					_, err := r.store.RequestBuild(r.ctx, state.RequestBuildParams{Source: src, Retire: s.Building,
						Reason: "resync in the middle of a pass", Now: r.clk.Now()})
					if err != nil {
						return fmt.Errorf("resync: %w", err)
					}
					if beside {
						if _, err := r.run(r.ctx, ingest.Hooks{AfterPlan: func(string, int64) error {
							plannedBeside++
							return errCrash
						}}); err != nil {
							return err
						}
					}
				}
				if calls == crashAt {
					crashes++
					return errCrash
				}
				return nil
			}
			return ingest.Hooks{
				AfterPlan:  func(string, int64) error { return point() },
				AfterSwap:  func(string, int64) error { return point() },
				BeforeStep: func(string, warehouse.IngestStep, int64, int64) error { return point() },
				AfterStep:  func(string, warehouse.IngestStep, int64, int64) error { return point() },
			}
		}
		// pass runs a pass. It may fail: by the injected crash, or by a
		// refusal a resync provokes (a retired build's late swap); the
		// passes after it repair that, which quiescence checks.
		pass := func(crashAt, resyncAt int, beside bool) ingest.SourceReport {
			rep := r.pass(hooks(crashAt, resyncAt, beside))
			l.discovered()
			rows, distinct := r.served()
			require.Equal(rt, rows, distinct, "a row served twice after a pass (%v)", rep.Err)
			r.requireStateInvariants()
			if s, err := r.store.GetSource(r.ctx, src); err == nil && rep.Err == nil && s.State() == state.SourcePrimed {
				// A pass that ends PRIMED without a failure has applied
				// everything staged.
				r.requireServesExactly(l.want())
			}
			return rep
		}

		steps := rapid.IntRange(1, 14).Draw(rt, "steps")
		for i := range steps {
			switch op := rapid.SampledFrom([]string{"append", "append", "run", "pass", "pass", "crash", "crash", "resync"}).Draw(rt, fmt.Sprintf("op%d", i)); op {
			case "append":
				l.nextFile++
				name := fmt.Sprintf("f%04d.csv", l.nextFile)
				it := landed{ids: l.draw(rt, fmt.Sprintf("rows%d", i))}
				r.csv(name, toInts(it.ids)...)
				l.appends = append(l.appends, it)
			case "run":
				// A replace run's next file; the run completes (its
				// _SUCCESS) by a draw, or once it holds six rows.
				if l.open == nil {
					l.nextFile++
					l.open = &landed{run: fmt.Sprintf("r%04d", l.nextFile)}
				}
				ids := l.draw(rt, fmt.Sprintf("runrows%d", i))
				r.runFile(l.open.run, fmt.Sprintf("part%d.csv", len(l.open.ids)), toInts(ids)...)
				l.open.ids = append(l.open.ids, ids...)
				if len(l.open.ids) >= 6 || rapid.Bool().Draw(rt, fmt.Sprintf("complete%d", i)) {
					r.runSuccess(l.open.run)
					l.runs = append(l.runs, *l.open)
					l.open = nil
				}
			case "pass":
				resyncAt, beside := -1, false
				if rapid.Bool().Draw(rt, fmt.Sprintf("midresync%d", i)) {
					resyncAt = rapid.IntRange(1, 5).Draw(rt, fmt.Sprintf("resyncat%d", i))
					beside = rapid.Bool().Draw(rt, fmt.Sprintf("beside%d", i))
				}
				pass(-1, resyncAt, beside)
			case "crash":
				pass(rapid.IntRange(1, 5).Draw(rt, fmt.Sprintf("crashat%d", i)), -1, false)
			case "resync":
				s, err := r.store.GetSource(r.ctx, src)
				if errors.Is(err, state.ErrNotFound) {
					break // no pass has registered the source yet
				}
				require.NoError(rt, err)
				_, err = r.store.RequestBuild(r.ctx, state.RequestBuildParams{Source: src, Retire: s.Building, Reason: "resync", Now: r.clk.Now()})
				require.NoError(rt, err)
			}
		}
		if l.open != nil {
			r.runSuccess(l.open.run)
			l.runs = append(l.runs, *l.open)
			l.open = nil
		}

		// Quiescence: passes until one changes nothing.
		var last finalState
		settled := false
		for i := 0; i < 8 && !settled; i++ {
			rep := pass(-1, -1, false)
			now := r.final()
			settled = i > 0 && rep.Err == nil && rep.Staged == 0 && rep.Applied == 0 && rep.Built == 0 &&
				len(rep.Healed) == 0 && equalFinal(last, now)
			last = now
		}
		require.True(rt, settled, "passes did not settle: %+v", last)
		r.requireServesExactly(l.want())
		if slices.ContainsFunc(l.staged, func(it landed) bool { return it.run != "" }) {
			endOnRun++
		}
		s := r.source()
		require.Zero(rt, s.Building, "a build is still in flight")
		if len(l.staged) > 0 {
			require.False(rt, s.BuildRequested, "a build is still owed")
			require.Equal(rt, state.SourcePrimed, s.State())
			require.Equal(rt, s.Serving, r.warehouseState().ServingGeneration)
		}
	})
	t.Logf("%d random histories: %d crashes, %d builds retired in the middle of a pass (%d replanned beside it), %d histories served a replace run",
		checks, crashes, midResyncs, plannedBeside, endOnRun)
}

// requireStateInvariants checks what the state store keeps of the source
// against itself and against the warehouse: at most one generation is
// building and it is the source's Building, Serving is a swapped
// generation, and the state never believes a generation serves that the
// warehouse has not swapped in (it may lag: a crash after the swap).
func (r *rig) requireStateInvariants() {
	s, err := r.store.GetSource(r.ctx, src)
	if errors.Is(err, state.ErrNotFound) {
		return
	}
	require.NoError(r.t, err)
	var building []int64
	for _, g := range s.Generations {
		if g.Status == state.GenerationBuilding {
			building = append(building, g.Generation)
		}
		if g.Generation == s.Serving {
			require.Equal(r.t, state.GenerationSwapped, g.Status, "the serving generation %d", g.Generation)
		}
	}
	if s.Building == 0 {
		require.Empty(r.t, building, "generations building while the source builds none")
	} else {
		require.Equal(r.t, []int64{s.Building}, building, "generations building")
	}
	require.GreaterOrEqual(r.t, r.warehouseState().ServingGeneration, s.Serving,
		"the state records a generation serving that the warehouse has not swapped in")
}

func equalFinal(a, b finalState) bool {
	return fmt.Sprint(a) == fmt.Sprint(b)
}

func toInts(vs []int64) []int {
	out := make([]int, len(vs))
	for i, v := range vs {
		out[i] = int(v)
	}
	return out
}
