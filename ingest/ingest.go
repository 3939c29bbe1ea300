// Package ingest is the ingest worker: one Pass lands every source once,
// wiring the source definitions, their connectors (discovery), the state
// store's source state machine and live queue, and the warehouse's
// exactly-once ingestion steps (warehouse.Ingester).
//
// The warehouse is the arbiter. Every warehouse step commits its fence
// check, its data and its marker in one transaction; the state store is
// written after it and may lag by one step after a crash. A pass therefore
// first heals the state store from the warehouse (IngestState), and only
// then moves on; every step it replays is one the warehouse refuses as
// already applied, so a pass repeated, or resumed after a crash at any
// point, lands every row of the source exactly once. A source that only
// applies live batches skips the read: the state store records what the
// warehouse holds but for a lag, and the first step the warehouse refuses
// (already applied, behind, out of order, fenced; nothing written) makes
// the pass read it and heal as above (worker.assume).
//
// One pass of one source, in order:
//
//  1. register (EnsureSources, for all sources at once, then one
//     ListSources); a source that serves, with no build owed or in
//     flight, whose connector discovers nothing new and whose serving
//     generation has applied every staged batch
//     (state.Generation.AppliedSeq, the state store's cache of the
//     warehouse markers, reaches state.Source.LastSeq) is idle, and so is
//     a source owed a build whose snapshot has nothing to build from yet
//     (the build is deferred): its pass ends there, without the warehouse
//     (Params.OpenEngine opens it only for a source with something to
//     land) and without recomputing its watermark;
//  2. heal: a swap the warehouse committed that the state has not recorded
//     is recorded (RecordSwap). A build the state shows in flight is
//     resumed in step 4 at its own pin (its fence replayed when the
//     warehouse's lags, the batches staged since caught up on) while the
//     connector still gives the snapshot there (SnapshotAt), also beside
//     another process's pass running it, and otherwise (a replace run
//     staged after the pin) retired, naming why, and planned anew; a
//     build planned without a pin (a resync) is pinned there
//     (PinGeneration); a generation's applied seq the state store records
//     behind the warehouse's markers is moved up to them (RecordApplied);
//  3. discover and stage the connector's new batches;
//  4. a replace run staged after what serves is a generation of kind
//     replace: planned (the same one-build-per-source compare-and-swap as
//     every build, superseding a build in flight that it replaces) when
//     its head is staged, pinned at the run's end once its final is, its
//     chunks the run's files; then fence, chunks, catch-up, swap as below.
//     A build that was owed when it arrived (a resync) stays requested and
//     runs after it. Otherwise, when a build is owed (nothing serves yet,
//     or one was requested) or in flight: Snapshot, PlanGeneration, fence,
//     the snapshot's chunks in order, catch-up of the live batches after
//     the pin onto the building generation, swap (catching up again while
//     the serving generation moves ahead: ErrBehind), RecordSwap. A build
//     that cannot start yet (ErrBuildInFlight; ErrNotConsistent, which a
//     half-arrived replace run makes the snapshot return; no data) is
//     deferred to a later pass and logged;
//  5. otherwise the live batches not applied yet are applied in Seq order
//     onto the serving generation, counting late rows (older than the
//     watermark already published);
//  6. the watermark is published: for a source with a time_column that
//     serves, the coverage of state.SourceKey is [start, max(time_column)
//     - lateness) of what the serving generation holds, start being the
//     definition's start or else the least time served, fenced on {source,
//     serving generation}. It grows with live batches and follows a swap,
//     also down. It is published also when step 5 stopped at a failing
//     batch: it covers what the view serves. The least and greatest
//     times served are not read from the table per pass: each live
//     batch's step reports those of the rows it wrote (and the late
//     ones among them), folded into the generation's times the state
//     store keeps as of its last batch (state.Generation.Times); the
//     table is read once when they are not known as of the batch the
//     warehouse's markers end at (a generation swapped in, a batch a
//     crashed or concurrent pass applied) or an upsert replaced rows.
//     A live batch whose staged rows lack the time_column is refused.
//
// A source stops at its first failing batch: later batches wait, in
// order, for a later pass (SourceReport.Blocked); when its file is then
// removed, the batch is skipped and the later ones apply (skip.go). Any
// other staged file that vanished before the build or live apply that
// needs it read it parks the source NEEDS_RESYNC, naming it, rather than
// serve a table without it; a resync rebuilds from what exists. Other
// sources continue.
package ingest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/gapless-dev/gapless/connector"
	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/interval"
	"github.com/gapless-dev/gapless/source"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

// RawSchema is the schema of the sources' physical generation tables.
const RawSchema = "gapless__raw"

// maxSwapTries bounds the catch-up/swap loop of one build in one pass.
const maxSwapTries = 8

// Hooks are called at fixed points of a pass; tests use them to crash a
// pass between two commits. A hook that returns an error ends the
// source's pass with it.
type Hooks struct {
	// AfterPlan runs after the state store planned generation gen, before
	// the warehouse fence moves to it.
	AfterPlan func(source string, gen int64) error
	// AfterSwap runs after the warehouse committed the swap of generation
	// gen, before the state store records it.
	AfterSwap func(source string, gen int64) error
	// BeforeStep runs before each warehouse step (fence, chunk, batch,
	// swap) of generation gen is sent to the warehouse; index is the chunk
	// index, the batch seq, or 0 (fence, swap).
	BeforeStep func(source string, step warehouse.IngestStep, gen, index int64) error
	// AfterStep runs after the warehouse committed that step (not after a
	// step it refused, as already applied or otherwise), before anything
	// else, the state store included, hears of it.
	AfterStep func(source string, step warehouse.IngestStep, gen, index int64) error
	// BeforePublish runs once the pass knows the times the serving
	// generation gen holds (kept from its steps, or read from the table),
	// before it publishes the watermark from them.
	BeforePublish func(source string, gen int64) error
}

// before runs the BeforeStep hook, if any.
func (h Hooks) before(source string, step warehouse.IngestStep, gen, index int64) error {
	if h.BeforeStep == nil {
		return nil
	}
	return h.BeforeStep(source, step, gen, index)
}

// after runs the AfterStep hook, if any.
func (h Hooks) after(source string, step warehouse.IngestStep, gen, index int64) error {
	if h.AfterStep == nil {
		return nil
	}
	return h.AfterStep(source, step, gen, index)
}

// Params are the parameters of Pass.
type Params struct {
	Store state.Store
	// Engine is the warehouse, for a caller that holds one open; when nil,
	// OpenEngine opens it.
	Engine warehouse.Ingester
	// OpenEngine opens the warehouse the first time a source of the pass
	// needs it, at most once per pass: a pass whose sources are all idle
	// never calls it. The caller closes what it opened. Used only when
	// Engine is nil.
	OpenEngine func(ctx context.Context) (warehouse.Ingester, error)
	// Sources are the project's source definitions (project.Sources).
	Sources map[string]*source.Definition
	// Connectors are the sources' connectors, one per source, matched by
	// Connector.Source.
	Connectors []connector.Connector
	// Root is the project folder that connectors' locations are relative
	// to.
	Root   string
	Clock  clockwork.Clock // real clock when nil
	Logger *slog.Logger    // slog.Default() when nil
	Hooks  Hooks
}

// SourceReport is what one pass did to one source.
type SourceReport struct {
	Source string
	// Staged is how many batches this pass staged.
	Staged int
	// Applied is how many live batches this pass applied to the serving
	// generation.
	Applied int
	// Built is the generation this pass swapped in; 0: none.
	Built int64
	// Healed says what was repaired from the warehouse ("" for nothing).
	Healed []string
	// Deferred is why a build owed was put off to a later pass ("" if not).
	Deferred string
	// Watermark is the complete-through time this pass published (zero:
	// none).
	Watermark time.Time
	// Replayed counts steps the warehouse refused as already applied
	// (ErrAlreadyApplied): a replay after a crash, or a racing worker.
	Replayed int
	// Fenced counts stale writes the warehouse fence refused (ErrFenced):
	// a retired generation's late chunk, batch or swap.
	Fenced int
	// LateRows counts rows applied this pass whose time_column is older
	// than the watermark already published when they arrived.
	LateRows int64
	// Skipped counts blocked batches this pass skipped because their
	// staged file was removed (see skippable); they are not in Applied.
	Skipped int
	// Blocked is the first batch that failed and holds back the later ones
	// (nil when none).
	Blocked *BlockedBatch
	// Err is the source's first failure; later batches wait for it.
	Err error
	// Idle says the source had nothing to land: the pass decided so from
	// the state store and Discover, without the warehouse, and left its
	// watermark as it was.
	Idle bool
}

// BlockedBatch is a staged batch that failed to apply: it and every later
// batch of its source wait for it to be fixed.
type BlockedBatch struct {
	Seq      int64
	Location string
	// StagedAt is when the batch was staged: the age of the block.
	StagedAt time.Time
	Reason   string
}

// Report is what one pass did, per source, by name.
type Report struct {
	Sources []SourceReport
}

// Err joins the sources' failures (nil when every source passed).
func (r Report) Err() error {
	var errs []error
	for _, s := range r.Sources {
		if s.Err != nil {
			errs = append(errs, s.Err)
		}
	}
	return errors.Join(errs...)
}

// BatchError is a live or catch-up batch, or a chunk, that failed: it
// names the source, the step and the staged file(s).
type BatchError struct {
	Source    string
	Step      warehouse.IngestStep
	Index     int64 // batch seq, or chunk index
	Locations []string
	Err       error
}

func (e *BatchError) Error() string {
	what := "batch"
	if e.Step == warehouse.StepChunk {
		what = "chunk"
	}
	return fmt.Sprintf("source %s: %s %d (%s): %v", e.Source, what, e.Index, strings.Join(e.Locations, ", "), e.Err)
}

func (e *BatchError) Unwrap() error { return e.Err }

// Pass runs one ingest pass over every source of p.Sources (in name
// order). It returns an error only when registering the sources, or
// reading their state, fails; each source's failure is in its
// SourceReport (Report.Err joins them).
func Pass(ctx context.Context, p Params) (Report, error) {
	if p.Clock == nil {
		p.Clock = clockwork.NewRealClock()
	}
	if p.Logger == nil {
		p.Logger = slog.Default()
	}
	names := make([]string, 0, len(p.Sources))
	for n := range p.Sources {
		names = append(names, n)
	}
	sort.Strings(names)
	conns := map[string]connector.Connector{}
	for _, c := range p.Connectors {
		conns[c.Source()] = c
	}
	defs := make([]state.SourceDefinition, 0, len(names))
	for _, n := range names {
		d := p.Sources[n]
		defs = append(defs, state.SourceDefinition{Name: n, Connector: string(d.Connector), DefinitionHash: Hash(d)})
	}
	var rep Report
	if len(defs) == 0 {
		return rep, nil
	}
	if _, err := p.Store.EnsureSources(ctx, state.EnsureSourcesParams{Sources: defs, Now: p.Clock.Now()}); err != nil {
		return rep, fmt.Errorf("registering sources: %w", err)
	}
	// One read of every source's state, for the idle checks.
	list, err := p.Store.ListSources(ctx, state.SourceFilter{Names: names})
	if err != nil {
		return rep, fmt.Errorf("reading the sources' state: %w", err)
	}
	srcs := make(map[string]*state.Source, len(list))
	for _, s := range list {
		srcs[s.Name] = s
	}
	open := &engineOpener{engine: p.Engine, open: p.OpenEngine}
	for _, n := range names {
		w := &worker{p: p, def: p.Sources[n], conn: conns[n], rep: SourceReport{Source: n}, src: srcs[n], opener: open}
		w.p.Engine = nil // set by engine(), once the source needs the warehouse
		if w.conn == nil {
			w.rep.Err = fmt.Errorf("%s: source %s: no connector", w.def.File, n)
		} else {
			w.rep.Err = w.run(ctx)
			if w.p.Engine != nil { // an idle source keeps its watermark
				if err := w.watermark(ctx); err != nil {
					w.rep.Err = errors.Join(w.rep.Err, err)
				}
			}
		}
		if w.rep.Err != nil {
			p.Logger.ErrorContext(ctx, "ingest pass of source failed", logkey.Model, n, logkey.Error, w.rep.Err.Error())
		}
		rep.Sources = append(rep.Sources, w.rep)
	}
	return rep, nil
}

// Hash identifies a definition's content for EnsureSources: what it lands
// and how, not where it was written.
func Hash(d *source.Definition) string {
	b, _ := json.Marshal(struct {
		Name       string
		Connector  source.Connector
		Files      *source.Files
		Apply      source.Apply
		UniqueKey  []string
		TimeColumn string
		Columns    any
	}{d.Name, d.Connector, d.Files, d.Apply, d.UniqueKey, d.TimeColumn, d.Columns})
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// Table is the physical table of generation gen of the named source:
// gapless__raw.raw__events__g<gen>.
func Table(name string, gen int64) warehouse.Table {
	return warehouse.Table{Schema: RawSchema, Name: strings.ReplaceAll(name, ".", "__") + "__g" + strconv.FormatInt(gen, 10)}
}

type worker struct {
	p    Params
	def  *source.Definition
	conn connector.Connector
	rep  SourceReport
	src  *state.Source
	ws   warehouse.IngestState
	// assumed: ws is not read from the warehouse but what the state store
	// says it holds (see assume); the first step the warehouse refuses
	// (already applied, behind, out of order, fenced) reads it (errReread).
	assumed bool
	// vanished are the staged locations discovery found gone.
	vanished map[string]bool
	// again: a build swapped in this round; the source may owe more.
	again bool
	// opener opens the pass's warehouse once, for the first source that
	// needs it; discovered: this pass ran Discover already, which found
	// found batches.
	opener     *engineOpener
	discovered bool
	found      int
	// What the pass knows of the serving generation's table as live()
	// applies onto it (see keepTimes): its times (nil: not known) and the
	// last batch seq it holds, both of generation timesGen; late, the
	// lateness bound of the batches (the watermark already published; zero:
	// none).
	timesGen int64
	times    *state.GenerationTimes
	seq      int64
	late     time.Time
}

// engineOpener is a pass's warehouse, opened on first use.
type engineOpener struct {
	engine warehouse.Ingester
	open   func(ctx context.Context) (warehouse.Ingester, error)
	err    error
}

func (o *engineOpener) get(ctx context.Context) (warehouse.Ingester, error) {
	if o.engine != nil || o.err != nil {
		return o.engine, o.err
	}
	if o.open == nil {
		o.err = errors.New("ingest: no warehouse (Params.Engine and Params.OpenEngine are both nil)")
		return nil, o.err
	}
	e, err := o.open(ctx)
	switch {
	case err != nil:
		o.err = fmt.Errorf("opening the warehouse: %w", err)
	case e == nil:
		o.err = errors.New("opening the warehouse: OpenEngine returned none")
	default:
		o.engine = e
	}
	return o.engine, o.err
}

// engine makes w.p.Engine the pass's warehouse, opening it if no source
// has yet.
func (w *worker) engine(ctx context.Context) error {
	if w.p.Engine != nil {
		return nil
	}
	e, err := w.opener.get(ctx)
	if err != nil {
		return fmt.Errorf("source %s: %w", w.name(), err)
	}
	w.p.Engine = e
	return nil
}

func (w *worker) name() string { return w.def.Name }

func (w *worker) log() *slog.Logger { return w.p.Logger.With(logkey.Model, w.name()) }

// refresh reads the source's state and its warehouse fence and markers.
func (w *worker) refresh(ctx context.Context) error {
	return w.read(ctx, false)
}

// read is refresh; with assume, a source that only applies live batches
// (see assume) skips the warehouse's IngestState.
func (w *worker) read(ctx context.Context, assume bool) error {
	if err := w.engine(ctx); err != nil {
		return err
	}
	src, err := w.p.Store.GetSource(ctx, w.name())
	if err != nil {
		return fmt.Errorf("source %s: reading its state: %w", w.name(), err)
	}
	w.src, w.assumed = src, false
	if assume && w.assume() {
		return nil
	}
	ws, err := w.p.Engine.IngestState(ctx, w.name())
	if err != nil {
		return fmt.Errorf("source %s: reading its warehouse fence: %w", w.name(), err)
	}
	w.ws = ws
	return nil
}

// assume sets w.ws to what the state store says the warehouse holds, for
// a source that serves with no build in flight, requested or parked: its
// fence and serving generation are the serving generation, whose markers
// end at the generation's applied seq. The state store never leads the
// warehouse (it records each step after the warehouse commits it), and
// the warehouse swaps only a generation the state store builds, so the
// warehouse can differ only by holding more batches (a crash between a
// commit and its RecordApplied) or by a fence another actor moved: the
// first live step then is refused (ErrAlreadyApplied, ErrBehind,
// ErrOutOfOrder, ErrFenced) with nothing written, and the pass reads
// the warehouse and heals from it as it would have (errReread). It
// reports whether it assumed.
func (w *worker) assume() bool {
	s := w.src
	if s == nil || s.Serving == 0 || s.Building != 0 || s.BuildRequested || s.ParkedReason != "" {
		return false
	}
	ws := warehouse.IngestState{Exists: true, PlannedGeneration: s.Serving, ServingGeneration: s.Serving}
	if seq := appliedSeq(s, s.Serving); seq > 0 {
		ws.Markers = []warehouse.IngestMarker{{Generation: s.Serving, Kind: warehouse.MarkerBatch, Index: seq}}
	}
	w.ws, w.assumed = ws, true
	return true
}

// reread reads the warehouse's fence and markers in place of what assume
// took from the state store, and heals from them.
func (w *worker) reread(ctx context.Context) error {
	if err := w.refresh(ctx); err != nil {
		return err
	}
	return w.heal(ctx)
}

// errReread: a step was refused while w.ws was assumed; nothing was
// written, and the pass reads the warehouse before it goes on.
var errReread = errors.New("the warehouse differs from what the state store records")

func (w *worker) run(ctx context.Context) error {
	if idle, err := w.idle(ctx); err != nil || idle {
		w.rep.Idle = idle
		return err
	}
	if err := w.read(ctx, true); err != nil {
		return err
	}
	if err := w.heal(ctx); err != nil {
		return err
	}
	if !w.discovered {
		if err := w.discover(ctx); err != nil {
			return err
		}
	}
	// A replace run met by the live apply or a catch-up is built in the
	// same pass, and a build deferred behind it then too.
	for range 4 {
		err := w.round(ctx)
		if errors.Is(err, errReplace) {
			continue
		}
		if errors.Is(err, errReread) {
			if err := w.reread(ctx); err != nil {
				return err
			}
			continue
		}
		if errors.Is(err, warehouse.ErrFenced) {
			// A stale write the warehouse refused: another actor moved the
			// generation (a resync retired it, a swap replaced it). Nothing
			// was written; the next pass works on the new generation.
			if rerr := w.refresh(ctx); rerr != nil {
				return rerr
			}
			return w.deferBuild(ctx, "fenced", err)
		}
		if err != nil || !w.again {
			return err
		}
		w.again = false
	}
	return nil
}

// round does one round of steps 4 and 5 (see the package doc): the
// replace run owed, else the build owed, else the live batches. It sets
// w.again when a build swapped in and the source may owe more.
func (w *worker) round(ctx context.Context) error {
	all, err := w.batches(ctx, 0)
	if err != nil {
		return err
	}
	if w.assumed && w.owedReplace(all) != nil {
		// Only the live apply runs on an assumed fence.
		if err := w.reread(ctx); err != nil {
			return err
		}
	}
	if r := w.owedReplace(all); r != nil || w.building().Kind == state.GenerationReplace {
		return w.replace(ctx, r, all)
	}
	if w.src.ParkedReason != "" {
		// NEEDS_RESYNC: it serves what it serves; nothing is applied or
		// built until a resync (or a replace run) rebuilds it.
		return w.deferBuild(ctx, "parked", nil)
	}
	if w.src.Building != 0 || w.src.Serving == 0 || w.src.BuildRequested {
		return w.build(ctx, all)
	}
	return w.live(ctx, all)
}

// idle reports whether the source has nothing to land, deciding from the
// state store (read for the whole pass) and the connector alone: no build
// is in flight, Discover finds nothing new, and either the serving
// generation's applied seq reaches the last staged batch (no build owed),
// or a build is owed but the connector's snapshot has nothing to build
// from yet (the build is deferred, as build would). Anything else,
// including an applied seq behind (a crash between a warehouse commit and
// RecordApplied, healed from the markers), is not idle. The applied seq
// never leads the warehouse, so an idle source has indeed nothing the
// warehouse lacks.
func (w *worker) idle(ctx context.Context) (bool, error) {
	s := w.src
	if s == nil || s.Building != 0 {
		return false, nil
	}
	if err := w.discover(ctx); err != nil || w.found > 0 {
		return false, err
	}
	if s.Serving == 0 || s.BuildRequested {
		snap, err := w.conn.Snapshot(ctx, w.p.Store)
		switch {
		case errors.Is(err, connector.ErrNotConsistent):
			return true, w.deferBuild(ctx, "not_consistent", err)
		case err == nil && len(snap.Chunks) == 0:
			return true, w.deferBuild(ctx, "no_data", nil)
		}
		return false, nil // a build to make, or a snapshot error build reports
	}
	return appliedSeq(s, s.Serving) >= s.LastSeq, nil
}

// appliedSeq is generation gen's applied seq as s records it.
func appliedSeq(s *state.Source, gen int64) int64 {
	for _, g := range s.Generations {
		if g.Generation == gen {
			return g.AppliedSeq
		}
	}
	return 0
}

// markedSeq is the last batch seq the warehouse's markers show applied to
// (or covered by the snapshot of) generation gen.
func markedSeq(ws warehouse.IngestState, gen int64) int64 {
	var seq int64
	for _, m := range ws.Markers {
		if m.Generation == gen && (m.Kind == warehouse.MarkerBatch || m.Kind == warehouse.MarkerCovered) {
			seq = max(seq, m.Index)
		}
	}
	return seq
}

// recordApplied records that generation gen holds every batch up to seq,
// after the warehouse committed it (RecordApplied only moves forward).
func (w *worker) recordApplied(ctx context.Context, gen, seq int64) error {
	if seq <= 0 {
		return nil
	}
	if _, err := w.p.Store.RecordApplied(ctx, state.RecordAppliedParams{Source: w.name(), Generation: gen, Seq: seq}); err != nil {
		return fmt.Errorf("source %s: recording batch %d applied to generation %d: %w", w.name(), seq, gen, err)
	}
	return nil
}

// recordTimes is recordApplied with the times the table holds as of seq
// (nil: not known, nothing recorded of them).
func (w *worker) recordTimes(ctx context.Context, gen, seq int64, t *state.GenerationTimes) error {
	if t == nil {
		return w.recordApplied(ctx, gen, seq)
	}
	if _, err := w.p.Store.RecordApplied(ctx, state.RecordAppliedParams{Source: w.name(), Generation: gen, Seq: seq, Times: t}); err != nil {
		return fmt.Errorf("source %s: recording batch %d applied to generation %d: %w", w.name(), seq, gen, err)
	}
	return nil
}

// keepTimes moves what the pass knows of the serving generation's times
// past live batch p.Index, given what its step did (res, err): known as
// of batch p.Index-1 and applied by this step, the batch's times fold in
// (an append or an upsert that replaced nothing widens them to the
// written rows'; a replace is the written rows'); anything else (the step
// was applied before, by a crashed or concurrent pass, or an upsert
// replaced rows whose times may have been the least or greatest) leaves
// them unknown, and the watermark reads the table once.
func (w *worker) keepTimes(p warehouse.IngestParams, res warehouse.IngestResult, err error) {
	known := w.times
	w.times = nil
	if err != nil && !errors.Is(err, warehouse.ErrAlreadyApplied) {
		w.times = known // nothing written
		return
	}
	w.seq = max(w.seq, p.Index)
	if err != nil || known == nil || known.Seq != p.Index-1 {
		return
	}
	lo, hi := res.MinTime.UTC().Truncate(time.Microsecond), res.MaxTime.UTC().Truncate(time.Microsecond)
	switch {
	case p.Apply == warehouse.IngestReplace:
	case res.Replaced > 0:
		return
	case hi.IsZero():
		lo, hi = known.Min, known.Max
	case !known.Max.IsZero():
		if known.Min.Before(lo) {
			lo = known.Min
		}
		if known.Max.After(hi) {
			hi = known.Max
		}
	}
	w.times = &state.GenerationTimes{Seq: p.Index, Min: lo, Max: hi}
}

// healApplied moves the applied seq of the serving and building
// generations up to the warehouse's markers where the state store lags.
func (w *worker) healApplied(ctx context.Context) error {
	for _, g := range []int64{w.src.Serving, w.src.Building} {
		if g == 0 {
			continue
		}
		if g == w.src.Building {
			if err := w.healChunks(ctx, g); err != nil {
				return err
			}
		}
		if m := markedSeq(w.ws, g); m > appliedSeq(w.src, g) {
			if err := w.recordApplied(ctx, g, m); err != nil {
				return err
			}
			w.rep.Healed = append(w.rep.Healed, fmt.Sprintf("recorded batch %d applied to generation %d", m, g))
			w.log().InfoContext(ctx, "healed: recorded the batches the warehouse applied", logkey.Reason, "applied_unrecorded",
				logkey.Generation, g)
		}
	}
	return nil
}

// healChunks moves the building generation g's chunks applied up to its
// chunk markers where the state store lags (a crash between a chunk's
// commit and its record).
func (w *worker) healChunks(ctx context.Context, g int64) error {
	marked := 0
	for _, m := range w.ws.Markers {
		if m.Generation == g && m.Kind == warehouse.MarkerChunk {
			marked = max(marked, int(m.Index)+1)
		}
	}
	for _, gen := range w.src.Generations {
		if gen.Generation == g && marked > gen.ChunksApplied {
			return w.recordChunks(ctx, g, marked)
		}
	}
	return nil
}

// heal repairs the state store from the warehouse: the warehouse commits
// each step before the state store hears of it.
func (w *worker) heal(ctx context.Context) error {
	ws, src := w.ws, w.src
	if ws.Exists && ws.ServingGeneration != 0 && ws.ServingGeneration != src.Serving && ws.ServingGeneration == src.Building {
		if _, err := w.p.Store.RecordSwap(ctx, state.RecordSwapParams{Source: w.name(), Generation: ws.ServingGeneration, Now: w.p.Clock.Now()}); err != nil {
			return fmt.Errorf("source %s: recording the swap of generation %d the warehouse holds: %w", w.name(), ws.ServingGeneration, err)
		}
		w.rep.Healed = append(w.rep.Healed, fmt.Sprintf("recorded swap of generation %d", ws.ServingGeneration))
		w.log().InfoContext(ctx, "healed: recorded a swap the warehouse committed", logkey.Reason, "swap_unrecorded")
		if err := w.refresh(ctx); err != nil {
			return err
		}
	}
	if err := w.healSkip(ctx); err != nil {
		return err
	}
	return w.healApplied(ctx)
}

func (w *worker) discover(ctx context.Context) error {
	w.discovered = true
	d, err := w.conn.Discover(ctx, w.p.Store)
	if err != nil {
		return fmt.Errorf("source %s: discovery: %w", w.name(), err)
	}
	w.found = len(d.Batches)
	if len(d.Vanished) > 0 {
		w.log().WarnContext(ctx, "staged files vanished from the source", logkey.Path, strings.Join(d.Vanished, ", "))
		w.vanished = map[string]bool{}
		for _, l := range d.Vanished {
			w.vanished[l] = true
		}
	}
	if len(d.Batches) == 0 {
		return nil
	}
	staged, err := w.p.Store.StageBatches(ctx, state.StageBatchesParams{Source: w.name(), Batches: d.Batches, Now: w.p.Clock.Now()})
	if err != nil {
		return fmt.Errorf("source %s: staging %d batches: %w", w.name(), len(d.Batches), err)
	}
	w.rep.Staged = len(staged)
	return nil
}

func (w *worker) batches(ctx context.Context, after int64) ([]state.Batch, error) {
	bs, err := w.p.Store.ListBatches(ctx, state.ListBatchesParams{Source: w.name(), AfterSeq: after})
	if err != nil {
		return nil, fmt.Errorf("source %s: listing staged batches: %w", w.name(), err)
	}
	return bs, nil
}

// covered is the last seq of bs whose batch the snapshot pinned at pin
// holds (To <= pin).
func covered(bs []state.Batch, pin int64) int64 {
	var c int64
	for _, b := range bs {
		if b.To <= pin {
			c = max(c, b.Seq)
		}
	}
	return c
}

func (w *worker) deferBuild(ctx context.Context, reason string, err error) error {
	w.rep.Deferred = reason
	attrs := []any{logkey.Reason, reason}
	if err != nil {
		attrs = append(attrs, logkey.Error, err.Error())
	}
	w.log().InfoContext(ctx, "build deferred to a later pass", attrs...)
	return nil
}

// building returns the source's building generation (zero when none).
func (w *worker) building() state.Generation {
	if w.src.Building == 0 {
		return state.Generation{}
	}
	for _, g := range w.src.Generations {
		if g.Generation == w.src.Building {
			return g
		}
	}
	return state.Generation{Generation: w.src.Building}
}

// pinOf returns the pin of generation g of the source (0: none, or no pin).
func (w *worker) pinOf(g int64) int64 {
	for _, x := range w.src.Generations {
		if x.Generation == g && x.Pin != nil {
			return *x.Pin
		}
	}
	return 0
}

// target is what a build lands: its pin, the pin's label, its chunks.
type target struct {
	pin    int64
	label  string
	chunks []connector.Chunk
}

// build plans (or resumes) a backfill generation and lands it up to its
// swap. A build left in flight by an earlier pass (a crash, or another
// process's pass, maybe running still) resumes at its own pin (resume);
// a generation planned without a pin (a resync, which plans at once to
// name it) is pinned here (PinGeneration), at the snapshot of now.
//
// A staged location gone from the source fails closed: the source is
// parked NEEDS_RESYNC naming it, and nothing incomplete is swapped in.
// Only pinning a generation planned without a pin, which a resync asked
// for after the loss, builds from what still exists.
func (w *worker) build(ctx context.Context, all []state.Batch) error {
	if gen := w.building(); gen.Generation != 0 && gen.Pin != nil {
		return w.resume(ctx, gen, all)
	}
	snap, err := w.conn.Snapshot(ctx, w.p.Store)
	if errors.Is(err, connector.ErrNotConsistent) {
		return w.deferBuild(ctx, "not_consistent", err)
	}
	var gone *connector.VanishedError
	if err != nil && !errors.As(err, &gone) {
		return fmt.Errorf("source %s: snapshot: %w", w.name(), err)
	}
	gen := w.building()
	if gen.Generation != 0 {
		if len(snap.Chunks) == 0 {
			return w.deferBuild(ctx, "no_data", nil)
		}
		if gone != nil {
			w.log().WarnContext(ctx, "a resync rebuilds from what exists: staged files vanished before they were read",
				logkey.Generation, gen.Generation, logkey.Path, strings.Join(gone.Locations, ", "))
		}
		gen, err = w.p.Store.PinGeneration(ctx, state.PinGenerationParams{Source: w.name(), Generation: gen.Generation,
			Pin: snap.Pin, PinLabel: snap.PinLabel, Chunks: len(snap.Chunks), Now: w.p.Clock.Now()})
		if errors.Is(err, state.ErrConflictingGeneration) {
			// Another pass pinned it (or retired it) first: the next round
			// works on what the state store holds now.
			w.again = true
			return w.refresh(ctx)
		}
		if err != nil {
			return fmt.Errorf("source %s: pinning generation %d: %w", w.name(), w.src.Building, err)
		}
		if err := w.refresh(ctx); err != nil {
			return err
		}
		return w.land(ctx, gen, target{pin: snap.Pin, label: snap.PinLabel, chunks: snap.Chunks}, all)
	}
	if gone != nil {
		return w.park(ctx, gone.Locations)
	}
	if len(snap.Chunks) == 0 {
		return w.deferBuild(ctx, "no_data", nil)
	}
	pin := snap.Pin
	gen, err = w.p.Store.PlanGeneration(ctx, state.PlanGenerationParams{Source: w.name(), Kind: state.GenerationBackfill,
		Pin: &pin, PinLabel: snap.PinLabel, Chunks: len(snap.Chunks), Now: w.p.Clock.Now()})
	if errors.Is(err, state.ErrBuildInFlight) {
		return w.deferBuild(ctx, state.ReasonSourceBuildInFlight, err)
	}
	if errors.Is(err, state.ErrSourceParked) {
		return w.deferBuild(ctx, "parked", err)
	}
	if err != nil {
		return fmt.Errorf("source %s: planning a generation: %w", w.name(), err)
	}
	if err := w.refresh(ctx); err != nil {
		return err
	}
	return w.land(ctx, gen, target{pin: snap.Pin, label: snap.PinLabel, chunks: snap.Chunks}, all)
}

// resume lands the pinned backfill generation gen that an earlier pass
// left in flight, at its own pin: its chunks are the connector's snapshot
// at that pin (SnapshotAt), the same the pass that planned it loaded, and
// every batch staged since is caught up on as a live batch; the
// warehouse refuses each step already applied, so a resume beside the
// pass still running it (another process) lands every row once and
// retires neither. Only when the pin is no longer a valid snapshot of the
// source (connector.ErrPinInvalid: a replace run staged after it replaces
// it, the queue lost what it covers) or its snapshot no longer has the
// chunks gen was planned with is gen retired, the retire event naming
// why, and a build planned anew. A location the pin needs that vanished
// parks the source, as for any build.
func (w *worker) resume(ctx context.Context, gen state.Generation, all []state.Batch) error {
	snap, err := w.conn.SnapshotAt(ctx, w.p.Store, *gen.Pin)
	var gone *connector.VanishedError
	reason := ""
	switch {
	case errors.As(err, &gone):
		return w.park(ctx, gone.Locations)
	case errors.Is(err, connector.ErrPinInvalid):
		reason = err.Error()
	case err != nil:
		return fmt.Errorf("source %s: snapshot at the pin %d of generation %d: %w", w.name(), *gen.Pin, gen.Generation, err)
	case len(snap.Chunks) != gen.Chunks:
		reason = fmt.Sprintf("source %s: snapshot at position %d: %d chunks now, %d when generation %d was planned",
			w.name(), *gen.Pin, len(snap.Chunks), gen.Chunks, gen.Generation)
	}
	if reason == "" {
		w.log().InfoContext(ctx, "resuming the build in flight at its pin", logkey.Generation, gen.Generation,
			logkey.Reason, "resume")
		return w.land(ctx, gen, target{pin: *gen.Pin, label: gen.PinLabel, chunks: snap.Chunks}, all)
	}
	_, err = w.p.Store.RetireGeneration(ctx, state.RetireGenerationParams{Source: w.name(), Generation: gen.Generation,
		Reason: reason, Now: w.p.Clock.Now()})
	if err != nil && !errors.Is(err, state.ErrConflictingGeneration) {
		return fmt.Errorf("source %s: retiring generation %d, whose pin is no longer valid: %w", w.name(), gen.Generation, err)
	}
	if err == nil {
		w.log().InfoContext(ctx, "build retired: its pin is no longer a valid snapshot", logkey.Generation, gen.Generation,
			logkey.Reason, reason)
	}
	// Retired here, or moved by another actor meanwhile: the next round
	// plans from what the state store holds now.
	w.again = true
	return w.refresh(ctx)
}

// land lands the building generation gen, pinned at t.pin: the warehouse
// fence, t's chunks in order, the catch-up of the live batches after the
// pin, the swap (catching up again while the serving generation moves
// ahead: ErrBehind), RecordSwap.
func (w *worker) land(ctx context.Context, gen state.Generation, t target, all []state.Batch) error {
	g := gen.Generation
	if h := w.p.Hooks.AfterPlan; h != nil {
		if err := h(w.name(), g); err != nil {
			return err
		}
	}
	cov := covered(all, t.pin)
	if !w.ws.Exists || w.ws.PlannedGeneration < g {
		if err := w.p.Hooks.before(w.name(), warehouse.StepFence, g, 0); err != nil {
			return err
		}
		_, err := w.p.Engine.ApplyIngest(ctx, warehouse.IngestParams{Source: w.name(), Step: warehouse.StepFence,
			Generation: g, From: w.ws.PlannedGeneration, Covered: cov})
		if err = w.count(err); err != nil {
			return fmt.Errorf("source %s: fencing generation %d: %w", w.name(), g, err)
		}
		if err := w.p.Hooks.after(w.name(), warehouse.StepFence, g, 0); err != nil {
			return err
		}
		if err := w.recordApplied(ctx, g, cov); err != nil {
			return err
		}
	}
	for _, ch := range t.chunks {
		if err := w.step(ctx, warehouse.StepChunk, g, int64(ch.Index), false, ch.Locations); err != nil {
			return err
		}
	}
	for try := 0; ; try++ {
		if _, err := w.catchUp(ctx, g, cov, true); err != nil {
			return err
		}
		if err := w.p.Hooks.before(w.name(), warehouse.StepSwap, g, 0); err != nil {
			return err
		}
		_, err := w.p.Engine.ApplyIngest(ctx, warehouse.IngestParams{Source: w.name(), Step: warehouse.StepSwap, Generation: g,
			Chunks: int64(len(t.chunks)), Table: Table(w.name(), g), View: w.view()})
		if errors.Is(err, warehouse.ErrBehind) && try < maxSwapTries {
			continue
		}
		if err = w.count(err); err != nil {
			return fmt.Errorf("source %s: swapping in generation %d: %w", w.name(), g, err)
		}
		if err == nil {
			if err := w.p.Hooks.after(w.name(), warehouse.StepSwap, g, 0); err != nil {
				return err
			}
		}
		break
	}
	if h := w.p.Hooks.AfterSwap; h != nil {
		if err := h(w.name(), g); err != nil {
			return err
		}
	}
	if _, err := w.p.Store.RecordSwap(ctx, state.RecordSwapParams{Source: w.name(), Generation: g, Now: w.p.Clock.Now()}); err != nil {
		return fmt.Errorf("source %s: recording the swap of generation %d: %w", w.name(), g, err)
	}
	w.rep.Built = g
	w.again = true
	w.log().InfoContext(ctx, "source generation swapped in", logkey.Generation, g)
	return w.refresh(ctx)
}

// count counts a step the warehouse refused as already applied (a replay,
// done) or fenced (a stale write), and returns err but for a replay.
func (w *worker) count(err error) error {
	switch {
	case errors.Is(err, warehouse.ErrAlreadyApplied):
		w.rep.Replayed++
		return nil
	case errors.Is(err, warehouse.ErrFenced):
		w.rep.Fenced++
	}
	return err
}

// park parks the source NEEDS_RESYNC, pinned to the generations it read,
// because locations it still needs vanished; it returns the error the
// pass reports. Parking again for the same locations writes nothing.
func (w *worker) park(ctx context.Context, locs []string) error {
	locs = slices.Clone(locs)
	slices.Sort(locs)
	reason := fmt.Sprintf("staged file %s vanished before it was read: run `gapless sources resync %s` to rebuild from what exists",
		strings.Join(locs, ", "), w.name())
	if _, err := w.p.Store.ParkSource(ctx, state.ParkSourceParams{Source: w.name(),
		Expect: state.SourceExpectation{Building: w.src.Building, Serving: w.src.Serving}, Reason: reason, Now: w.p.Clock.Now()}); err != nil {
		return fmt.Errorf("source %s: parking it NEEDS_RESYNC: %w", w.name(), err)
	}
	w.rep.Deferred = "needs_resync"
	w.log().WarnContext(ctx, "source parked NEEDS_RESYNC: staged files vanished before they were read",
		logkey.Path, strings.Join(locs, ", "), logkey.Reason, "vanished")
	if err := w.refresh(ctx); err != nil {
		return err
	}
	return fmt.Errorf("%s: %w", w.def.File, &connector.VanishedError{Source: w.name(), Locations: locs})
}

// replaceRun is a replace run staged in the queue.
type replaceRun struct {
	name    string
	batches []state.Batch // head to final, in Seq order
	final   bool          // its replace_final batch is staged
}

// end is the position after the run: the pin of its generation.
func (r *replaceRun) end() int64 { return r.batches[len(r.batches)-1].To }

// owedReplace returns the replace run the source owes a generation of
// kind replace: the last one staged that starts at or after the serving
// generation's pin (it arrived after what serves), unless the build in
// flight is a backfill whose snapshot already holds it (pinned at or after
// its end). Earlier runs it replaces whole. nil: none.
func (w *worker) owedReplace(all []state.Batch) *replaceRun {
	servingPin := w.pinOf(w.src.Serving)
	var last *replaceRun
	for _, b := range all {
		if b.ReplaceRun == "" || b.From < servingPin {
			continue
		}
		if last == nil || last.name != b.ReplaceRun || last.final {
			last = &replaceRun{name: b.ReplaceRun}
		}
		last.batches = append(last.batches, b)
		last.final = last.final || b.Kind == state.BatchReplaceFinal
	}
	if last == nil {
		return nil
	}
	if b := w.building(); b.Kind == state.GenerationBackfill && b.Pin != nil && last.final && *b.Pin >= last.end() {
		return nil
	}
	return last
}

// replace lands replace run r as a generation of kind replace, pinned at
// the run's end, whose chunks are exactly the run's files; it catches up
// on the batches staged after it and swaps. A build in flight for
// anything else is superseded (retired) first; a generation is planned
// when the run's head is staged, through the same one-build-per-source
// compare-and-swap as every build, so a build planned while the run is
// still arriving defers (ErrBuildInFlight), and the run's generation is
// pinned (PinGeneration) once its final batch is staged. A resync that was
// owed when the run arrived is built after it.
func (w *worker) replace(ctx context.Context, r *replaceRun, all []state.Batch) error {
	gen := w.building()
	if r == nil {
		// The building replace generation's run is no longer staged.
		_, err := w.p.Store.RetireGeneration(ctx, state.RetireGenerationParams{Source: w.name(), Generation: gen.Generation,
			Reason: "its replace run is no longer staged", Now: w.p.Clock.Now()})
		if err != nil {
			return fmt.Errorf("source %s: retiring generation %d: %w", w.name(), gen.Generation, err)
		}
		w.again = true
		return w.refresh(ctx)
	}
	mine := gen.Kind == state.GenerationReplace && (gen.Pin == nil || (r.final && *gen.Pin == r.end()))
	carry := w.src.Serving != 0 && (w.src.BuildRequested || (gen.Generation != 0 && !mine && gen.Kind == state.GenerationBackfill))
	if gen.Generation != 0 && !mine {
		_, err := w.p.Store.RetireGeneration(ctx, state.RetireGenerationParams{Source: w.name(), Generation: gen.Generation,
			Reason: "superseded by replace run " + r.name, Now: w.p.Clock.Now()})
		if err != nil {
			return fmt.Errorf("source %s: retiring generation %d, superseded by replace run %s: %w", w.name(), gen.Generation, r.name, err)
		}
		if err := w.refresh(ctx); err != nil {
			return err
		}
		gen = state.Generation{}
	}
	chunks := runChunks(r)
	label := "replace run " + r.name
	if gen.Generation == 0 {
		// A build that was owed (a resync) is not what the run is: it stays
		// requested, in the planning transaction itself, and is built once
		// the run serves.
		p := state.PlanGenerationParams{Source: w.name(), Kind: state.GenerationReplace, PinLabel: label, AllowParked: true,
			KeepRequested: carry, Now: w.p.Clock.Now()}
		if r.final {
			end := r.end()
			p.Pin, p.Chunks = &end, len(chunks)
		}
		var err error
		gen, err = w.p.Store.PlanGeneration(ctx, p)
		if errors.Is(err, state.ErrBuildInFlight) {
			return w.deferBuild(ctx, state.ReasonSourceBuildInFlight, err)
		}
		if err != nil {
			return fmt.Errorf("source %s: planning the generation of replace run %s: %w", w.name(), r.name, err)
		}
		if err := w.refresh(ctx); err != nil {
			return err
		}
	}
	if !r.final {
		return w.deferBuild(ctx, "replace_arriving", nil)
	}
	if gen.Pin == nil {
		var err error
		gen, err = w.p.Store.PinGeneration(ctx, state.PinGenerationParams{Source: w.name(), Generation: gen.Generation,
			Pin: r.end(), PinLabel: label, Chunks: len(chunks), Now: w.p.Clock.Now()})
		if err != nil {
			return fmt.Errorf("source %s: pinning generation %d of replace run %s: %w", w.name(), w.src.Building, r.name, err)
		}
		if err := w.refresh(ctx); err != nil {
			return err
		}
	}
	var gone []string
	for _, b := range r.batches {
		if w.vanished[b.Location] {
			gone = append(gone, b.Location)
		}
	}
	if len(gone) > 0 {
		return w.park(ctx, gone)
	}
	return w.land(ctx, gen, target{pin: r.end(), label: label, chunks: chunks}, all)
}

// maxChunkFiles is the most files in one chunk of a replace generation.
const maxChunkFiles = 512

// runChunks are the chunks of r's generation: its files, in Seq order.
func runChunks(r *replaceRun) []connector.Chunk {
	var out []connector.Chunk
	for _, b := range r.batches {
		n := len(out)
		if n == 0 || len(out[n-1].Locations) >= maxChunkFiles {
			out = append(out, connector.Chunk{Index: n, From: b.From})
			n++
		}
		out[n-1].Locations = append(out[n-1].Locations, b.Location)
		out[n-1].To = b.To
	}
	return out
}

// live applies the batches the serving generation has not applied, in Seq
// order, and counts the late rows among them. It returns errReplace when
// it met a replace run's batch, which it does not apply: the run becomes a
// generation of its own (replace).
//
// all is the source's staged batches, as the round listed them.
func (w *worker) live(ctx context.Context, all []state.Batch) error {
	s := w.src.Serving
	var start int64
	for _, m := range w.ws.Markers {
		if m.Generation == s && (m.Kind == warehouse.MarkerBatch || m.Kind == warehouse.MarkerCovered) {
			start = max(start, m.Index)
		}
	}
	w.timesGen, w.seq, w.times, w.late = s, start, nil, time.Time{}
	if w.def.TimeColumn != "" {
		// The times the state store keeps are the table's when they are
		// as of the batch the warehouse's markers end at.
		for _, g := range w.src.Generations {
			if g.Generation == s && g.Times != nil && g.Times.Seq == start {
				w.times = g.Times
			}
		}
		key := state.SourceKey(w.name())
		if cov, err := w.p.Store.GetIntervals(ctx, []state.VersionKey{key}); err == nil {
			w.late = cov[key].Frontier()
		} else {
			w.log().WarnContext(ctx, "late rows not counted: reading the published watermark failed", logkey.Error, err.Error())
		}
	}
	before := w.rep.LateRows
	var after []state.Batch
	for _, b := range all { // in Seq order
		if b.Seq > start {
			after = append(after, b)
		}
	}
	n, err := w.apply(ctx, s, after, false)
	w.rep.Applied += n
	if rows := w.rep.LateRows - before; rows > 0 {
		w.log().WarnContext(ctx, "late rows applied: older than the watermark already published",
			logkey.Rows, rows, logkey.Interval, w.late.Format(time.RFC3339), logkey.Generation, s)
		if _, aerr := w.p.Store.AddLateRows(ctx, state.AddLateRowsParams{Source: w.name(), Generation: s, Rows: rows}); aerr != nil {
			w.log().WarnContext(ctx, "late rows not added to the source's total", logkey.Rows, rows, logkey.Generation, s,
				logkey.Error, aerr.Error())
		}
	}
	return err
}

var errReplace = errors.New("replace run")

// catchUp applies the batches after seq start onto gen, in Seq order, and
// returns how many it applied. A replace run's batch is not applied: it
// returns errReplace (the run is a generation of its own). A batch whose
// file vanished parks the source, unless it is the source's blocked batch
// or a batch skipped before (skippable), which is skipped; the first batch
// that fails is the report's Blocked, and holds back the later ones.
func (w *worker) catchUp(ctx context.Context, gen, start int64, catchUp bool) (int, error) {
	bs, err := w.batches(ctx, start)
	if err != nil {
		return 0, err
	}
	return w.apply(ctx, gen, bs, catchUp)
}

// apply is catchUp of the staged batches bs (in Seq order).
func (w *worker) apply(ctx context.Context, gen int64, bs []state.Batch, catchUp bool) (int, error) {
	n := 0
	for _, b := range bs {
		if b.ReplaceRun != "" {
			return n, errReplace
		}
		if w.assumed && (w.vanished[b.Location] || w.skippable(b, gen)) {
			return n, errReread // a skip or a park rests on the warehouse's markers
		}
		if w.skippable(b, gen) {
			if err := w.skip(ctx, gen, b, catchUp); err != nil {
				return n, err
			}
			continue
		}
		if w.vanished[b.Location] {
			return n, w.park(ctx, []string{b.Location})
		}
		err := w.step(ctx, warehouse.StepBatch, gen, b.Seq, catchUp, []string{b.Location})
		if err != nil {
			var be *BatchError
			if w.rep.Blocked == nil && !errors.Is(err, warehouse.ErrFenced) && errors.As(err, &be) {
				w.rep.Blocked = &BlockedBatch{Seq: b.Seq, Location: b.Location, StagedAt: b.StagedAt, Reason: be.Err.Error()}
				w.recordBlocked(ctx, gen, be)
			}
			return n, err
		}
		n++
	}
	return n, nil
}

func (w *worker) view() warehouse.Table {
	return warehouse.Table{Schema: w.def.Schema(), Name: w.def.Table()}
}

// step applies one chunk or batch; ErrAlreadyApplied counts as done.
func (w *worker) step(ctx context.Context, step warehouse.IngestStep, gen, idx int64, catchUp bool, locs []string) error {
	fail := func(err error) error {
		return &BatchError{Source: w.name(), Step: step, Index: idx, Locations: locs, Err: err}
	}
	files, err := w.files(locs)
	if err != nil {
		return fail(err)
	}
	p := warehouse.IngestParams{Source: w.name(), Step: step, Generation: gen, Index: idx, CatchUp: catchUp,
		Table: Table(w.name(), gen), Files: files, Apply: warehouse.IngestAppend}
	switch w.def.Apply {
	case source.ApplyUpsert:
		p.Apply, p.Key = warehouse.IngestUpsert, w.def.UniqueKey
	case source.ApplyReplace:
		if step == warehouse.StepBatch {
			p.Apply = warehouse.IngestReplace
		}
	}
	onServing := step == warehouse.StepBatch && !catchUp && gen == w.timesGen && w.def.TimeColumn != ""
	if onServing {
		p.TimeColumn, p.LateBefore = w.def.TimeColumn, w.late
	}
	if err := w.p.Hooks.before(w.name(), step, gen, idx); err != nil {
		return err
	}
	res, err := w.p.Engine.ApplyIngest(ctx, p)
	if w.assumed && (errors.Is(err, warehouse.ErrAlreadyApplied) || errors.Is(err, warehouse.ErrBehind) ||
		errors.Is(err, warehouse.ErrOutOfOrder) || errors.Is(err, warehouse.ErrFenced)) {
		return errReread // nothing written
	}
	if w.count(err) != nil {
		return fail(err)
	}
	if onServing {
		w.keepTimes(p, res, err)
		if err == nil && !w.late.IsZero() {
			w.rep.LateRows += res.Late
		}
	}
	if err == nil {
		if err := w.p.Hooks.after(w.name(), step, gen, idx); err != nil {
			return err
		}
	}
	if onServing {
		return w.recordTimes(ctx, gen, idx, w.times)
	}
	if step == warehouse.StepBatch {
		return w.recordApplied(ctx, gen, idx)
	}
	return w.recordChunks(ctx, gen, int(idx)+1) // chunks apply in order, from 0
}

// recordChunks records that generation gen holds its first n chunks,
// after the warehouse committed them, so `gapless sources` shows a build's
// progress from the state store.
func (w *worker) recordChunks(ctx context.Context, gen int64, n int) error {
	if _, err := w.p.Store.RecordApplied(ctx, state.RecordAppliedParams{Source: w.name(), Generation: gen, Chunks: n}); err != nil {
		return fmt.Errorf("source %s: recording %d chunks applied to generation %d: %w", w.name(), n, gen, err)
	}
	return nil
}

// recordBlocked records in the state store that the batch of be failed on
// generation gen (its seq, the reason naming the file, one more attempt);
// RecordApplied clears it once the batch applies. Failing to record it is
// logged: the pass already fails on the batch, which names it.
func (w *worker) recordBlocked(ctx context.Context, gen int64, be *BatchError) {
	_, err := w.p.Store.RecordBlocked(ctx, state.RecordBlockedParams{Source: w.name(), Generation: gen, Seq: be.Index,
		Location: strings.Join(be.Locations, ", "), Reason: be.Error(), Now: w.p.Clock.Now()})
	if err != nil {
		w.log().WarnContext(ctx, "the blocked batch was not recorded in the state store", logkey.Generation, gen, logkey.Error, err.Error())
	}
}

// files resolves locations against the project folder; one format per
// step, from the file names.
func (w *worker) files(locs []string) (warehouse.StagedFiles, error) {
	var sf warehouse.StagedFiles
	for _, l := range locs {
		var f warehouse.FileFormat
		switch strings.ToLower(filepath.Ext(l)) {
		case ".parquet":
			f = warehouse.FormatParquet
		case ".csv":
			f = warehouse.FormatCSV
		case ".json", ".ndjson", ".jsonl":
			f = warehouse.FormatJSON
		default:
			return sf, fmt.Errorf("%s: not a .parquet, .csv or .ndjson file", l)
		}
		if sf.Format != "" && sf.Format != f {
			return sf, fmt.Errorf("%s: a %s file among %s files of one chunk", l, f, sf.Format)
		}
		sf.Format = f
		sf.Paths = append(sf.Paths, filepath.Join(w.p.Root, filepath.FromSlash(l)))
	}
	return sf, nil
}

// Reader is the part of a warehouse engine the watermark reads the served
// times with; an Ingester that is not one publishes no watermark.
type Reader interface {
	ReadOnlyQuery(ctx context.Context, sql string, args ...any) (*warehouse.Result, error)
	QuoteIdent(name string) string
	QuoteTable(t warehouse.Table) string
}

// watermark publishes the source's coverage (see the package doc):
// [start, max(time_column) - lateness) of what the serving generation
// holds, exactly. It grows as live batches land; at a swap it follows the
// new generation, also down: a replace run that ends earlier than what
// served before, or holds no times, takes back the coverage beyond its
// own (what models already computed stays theirs; they are only not
// given later intervals the source no longer holds). The write is fenced
// on {source, serving generation}: a pass that raced a swap, a resync or a
// removal publishes nothing for a generation that no longer serves
// (counted as Fenced).
func (w *worker) watermark(ctx context.Context) error {
	col := w.def.TimeColumn
	if col == "" || w.src == nil || w.src.Serving == 0 {
		return nil
	}
	r, ok := w.p.Engine.(Reader)
	if !ok {
		return nil
	}
	gen := w.src.Serving
	t, err := w.servedTimes(ctx, r, gen)
	if err != nil {
		return err
	}
	if h := w.p.Hooks.BeforePublish; h != nil {
		if err := h(w.name(), gen); err != nil {
			return err
		}
	}
	var want interval.Set
	end := t.Max.Add(-w.def.Watermark.Lateness)
	if !t.Max.IsZero() {
		start := t.Min
		if !w.def.Start.IsZero() {
			start = w.def.Start.UTC()
		}
		if end.After(start) {
			want = interval.NewSet(interval.NewRange(start, end))
		}
	}
	key := state.SourceKey(w.name())
	have, err := w.p.Store.GetIntervals(ctx, []state.VersionKey{key})
	if err != nil {
		return fmt.Errorf("source %s: reading its published watermark: %w", w.name(), err)
	}
	fence := &state.Fence{Source: w.name(), SourceGeneration: gen}
	now := w.p.Clock.Now()
	if extra := have[key].Subtract(want); !extra.IsEmpty() {
		err = w.p.Store.RemoveIntervals(ctx, state.IntervalsParams{Key: key, Ranges: extra, Fence: fence, Now: now})
		if err == nil {
			w.log().InfoContext(ctx, "source coverage follows the generation that serves: taken back",
				logkey.Generation, gen, logkey.Interval, extra.String())
		}
	}
	if add := want.Subtract(have[key]); err == nil && !add.IsEmpty() {
		err = w.p.Store.AddIntervals(ctx, state.IntervalsParams{Key: key, Ranges: add, Fence: fence, Now: now})
	}
	if errors.Is(err, state.ErrFenced) {
		w.rep.Fenced++
		w.log().InfoContext(ctx, "watermark not published: the generation it was read from no longer serves",
			logkey.Generation, gen, logkey.Error, err.Error())
		return nil
	}
	if err != nil {
		return fmt.Errorf("source %s: publishing its watermark %s: %w", w.name(), end.Format(time.RFC3339), err)
	}
	if !want.IsEmpty() {
		w.rep.Watermark = end
	}
	return nil
}

// servedTimes is the least and greatest time the serving generation gen
// holds: what live() kept of them, as of the last batch it applied, or
// else read from the view (one min/max over the table: after a swap, or
// when a batch was applied by a crashed or concurrent pass) and recorded
// in the state store as of the last batch the pass knows the table holds
// (no later than what the read saw; a later batch folds in idempotently).
func (w *worker) servedTimes(ctx context.Context, r Reader, gen int64) (state.GenerationTimes, error) {
	if w.timesGen == gen && w.times != nil && w.times.Seq == w.seq {
		return *w.times, nil
	}
	seq := markedSeq(w.ws, gen)
	if w.timesGen == gen {
		seq = w.seq
	}
	col := w.def.TimeColumn
	q := fmt.Sprintf("SELECT min(%[1]s), max(%[1]s) FROM %[2]s", r.QuoteIdent(col), r.QuoteTable(w.view()))
	res, err := r.ReadOnlyQuery(ctx, q)
	if err != nil {
		return state.GenerationTimes{}, fmt.Errorf("%s: source %s: reading the time_column %s for its watermark: %w", w.def.File, w.name(), col, err)
	}
	t := state.GenerationTimes{Seq: seq}
	if len(res.Rows) != 1 || len(res.Rows[0]) != 2 {
		return t, fmt.Errorf("%s: source %s: reading the time_column %s for its watermark: %d rows, not one of min and max", w.def.File, w.name(), col, len(res.Rows))
	}
	lo, okLo := res.Rows[0][0].(time.Time)
	hi, okHi := res.Rows[0][1].(time.Time)
	switch {
	case res.Rows[0][1] == nil: // nothing served with a time
	case !okLo || !okHi:
		return t, fmt.Errorf("%s: source %s: time_column %s is %T, not a timestamp or date", w.def.File, w.name(), col, res.Rows[0][1])
	default:
		t.Min, t.Max = lo.UTC().Truncate(time.Microsecond), hi.UTC().Truncate(time.Microsecond)
	}
	if _, err := w.p.Store.RecordApplied(ctx, state.RecordAppliedParams{Source: w.name(), Generation: gen, Seq: seq, Times: &t}); err != nil {
		w.log().WarnContext(ctx, "the served times were not recorded: the next pass reads them again",
			logkey.Generation, gen, logkey.Error, err.Error())
	}
	return t, nil
}
