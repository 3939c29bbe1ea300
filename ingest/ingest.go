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
// point, lands every row of the source exactly once.
//
// One pass of one source, in order:
//
//  1. register (EnsureSources, for all sources at once);
//  2. heal: a swap the warehouse committed that the state has not recorded
//     is recorded (RecordSwap). A build the state shows in flight is
//     resumed in step 4 (its fence replayed when the warehouse's lags)
//     when the snapshot still pins where it was planned, and otherwise
//     retired (RequestBuild with Retire) and planned anew;
//  3. discover and stage the connector's new batches;
//  4. when a build is owed (nothing serves yet, or one was requested) and
//     none is in flight: Snapshot, PlanGeneration, fence, the snapshot's
//     chunks in order, catch-up of the live batches after the pin onto
//     the building generation, swap (catching up again while the serving
//     generation moves ahead: ErrBehind), RecordSwap. A build that cannot
//     start yet (ErrBuildInFlight, ErrNotConsistent, no data) is deferred
//     to a later pass and logged;
//  5. otherwise the live batches not applied yet are applied in Seq order
//     onto the serving generation;
//  6. the watermark is published: for a source with a time_column that
//     serves, the coverage of state.SourceKey grows to [start,
//     max(time_column) - lateness), start being the definition's start or
//     else the least time served. It is published also when step 5 stopped
//     at a failing batch: it covers what the view serves.
//
// A source stops at its first failing batch: later batches wait, in
// order, for a later pass. Other sources continue.
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
	Store  state.Store
	Engine warehouse.Ingester
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
	// Blocked is the first batch that failed and holds back the later ones
	// (nil when none).
	Blocked *BlockedBatch
	// Err is the source's first failure; later batches wait for it.
	Err error
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
// order). It returns an error only when registering the sources fails;
// each source's failure is in its SourceReport (Report.Err joins them).
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
	for _, n := range names {
		w := &worker{p: p, def: p.Sources[n], conn: conns[n], rep: SourceReport{Source: n}}
		if w.conn == nil {
			w.rep.Err = fmt.Errorf("%s: source %s: no connector", w.def.File, n)
		} else {
			w.rep.Err = w.run(ctx)
			if err := w.watermark(ctx); err != nil {
				w.rep.Err = errors.Join(w.rep.Err, err)
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
}

func (w *worker) name() string { return w.def.Name }

func (w *worker) log() *slog.Logger { return w.p.Logger.With(logkey.Model, w.name()) }

func (w *worker) refresh(ctx context.Context) error {
	src, err := w.p.Store.GetSource(ctx, w.name())
	if err != nil {
		return fmt.Errorf("source %s: reading its state: %w", w.name(), err)
	}
	ws, err := w.p.Engine.IngestState(ctx, w.name())
	if err != nil {
		return fmt.Errorf("source %s: reading its warehouse fence: %w", w.name(), err)
	}
	w.src, w.ws = src, ws
	return nil
}

func (w *worker) run(ctx context.Context) error {
	if err := w.refresh(ctx); err != nil {
		return err
	}
	if err := w.heal(ctx); err != nil {
		return err
	}
	if err := w.discover(ctx); err != nil {
		return err
	}
	for range 2 { // a replace run met live requests a build: built in the same pass
		if w.src.Building != 0 || w.src.Serving == 0 || w.src.BuildRequested {
			return w.build(ctx)
		}
		again, err := w.live(ctx)
		if err != nil || !again {
			return err
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
		return w.refresh(ctx)
	}
	return nil
}

func (w *worker) discover(ctx context.Context) error {
	d, err := w.conn.Discover(ctx, w.p.Store)
	if err != nil {
		return fmt.Errorf("source %s: discovery: %w", w.name(), err)
	}
	if len(d.Vanished) > 0 {
		w.log().WarnContext(ctx, "staged files vanished from the source", logkey.Path, strings.Join(d.Vanished, ", "))
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

// build plans (or resumes) a generation and lands it up to its swap.
func (w *worker) build(ctx context.Context) error {
	snap, err := w.conn.Snapshot(ctx, w.p.Store)
	if errors.Is(err, connector.ErrNotConsistent) {
		return w.deferBuild(ctx, "not_consistent", err)
	}
	if err != nil {
		return fmt.Errorf("source %s: snapshot: %w", w.name(), err)
	}
	var gen state.Generation
	if w.src.Building != 0 {
		// A build left in flight by an earlier pass: resumed when the
		// snapshot still pins where it did, else retired and planned anew.
		for _, g := range w.src.Generations {
			if g.Generation == w.src.Building {
				gen = g
			}
		}
		if gen.Pin == nil || *gen.Pin != snap.Pin || gen.Chunks != len(snap.Chunks) {
			if _, err := w.p.Store.RequestBuild(ctx, state.RequestBuildParams{Source: w.name(), Retire: w.src.Building,
				Reason: "the snapshot moved since the build began", Now: w.p.Clock.Now()}); err != nil {
				return fmt.Errorf("source %s: retiring the stale build of generation %d: %w", w.name(), w.src.Building, err)
			}
			if err := w.refresh(ctx); err != nil {
				return err
			}
			gen = state.Generation{}
		}
	}
	if len(snap.Chunks) == 0 {
		return w.deferBuild(ctx, "no_data", nil)
	}
	if gen.Generation == 0 {
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
	}
	g := gen.Generation
	if h := w.p.Hooks.AfterPlan; h != nil {
		if err := h(w.name(), g); err != nil {
			return err
		}
	}
	all, err := w.batches(ctx, 0)
	if err != nil {
		return err
	}
	cov := covered(all, snap.Pin)
	if !w.ws.Exists || w.ws.PlannedGeneration < g {
		if err := w.p.Hooks.before(w.name(), warehouse.StepFence, g, 0); err != nil {
			return err
		}
		_, err := w.p.Engine.ApplyIngest(ctx, warehouse.IngestParams{Source: w.name(), Step: warehouse.StepFence,
			Generation: g, From: w.ws.PlannedGeneration, Covered: cov})
		if err != nil {
			return fmt.Errorf("source %s: fencing generation %d: %w", w.name(), g, err)
		}
		if err := w.p.Hooks.after(w.name(), warehouse.StepFence, g, 0); err != nil {
			return err
		}
	}
	for _, ch := range snap.Chunks {
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
			Chunks: int64(len(snap.Chunks)), Table: Table(w.name(), g), View: w.view()})
		if errors.Is(err, warehouse.ErrBehind) && try < maxSwapTries {
			continue
		}
		if err != nil && !errors.Is(err, warehouse.ErrAlreadyApplied) {
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
	w.log().InfoContext(ctx, "source generation swapped in", logkey.Generation, g)
	return w.refresh(ctx)
}

// live applies the batches the serving generation has not applied, in Seq
// order. It returns true when it met a replace run (a build is now
// requested).
func (w *worker) live(ctx context.Context) (bool, error) {
	s := w.src.Serving
	var start int64
	for _, m := range w.ws.Markers {
		if m.Generation == s && (m.Kind == warehouse.MarkerBatch || m.Kind == warehouse.MarkerCovered) {
			start = max(start, m.Index)
		}
	}
	n, err := w.catchUp(ctx, s, start, false)
	w.rep.Applied += n
	if errors.Is(err, errReplace) {
		return true, w.refresh(ctx)
	}
	return false, err
}

var errReplace = errors.New("replace run")

// catchUp applies the batches after seq start onto gen, in Seq order, and
// returns how many it applied. A replace run's batch is not applied: it
// requests a build (live) or is left to the snapshot.
func (w *worker) catchUp(ctx context.Context, gen, start int64, catchUp bool) (int, error) {
	bs, err := w.batches(ctx, start)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, b := range bs {
		if b.ReplaceRun != "" {
			if catchUp {
				return n, fmt.Errorf("source %s: replace run %s arrived during the build of generation %d: a later pass rebuilds", w.name(), b.ReplaceRun, gen)
			}
			if _, err := w.p.Store.RequestBuild(ctx, state.RequestBuildParams{Source: w.name(),
				Reason: "replace run " + b.ReplaceRun, Now: w.p.Clock.Now()}); err != nil {
				return n, fmt.Errorf("source %s: requesting the build of replace run %s: %w", w.name(), b.ReplaceRun, err)
			}
			return n, errReplace
		}
		err := w.step(ctx, warehouse.StepBatch, gen, b.Seq, catchUp, []string{b.Location})
		if err != nil {
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
	if err := w.p.Hooks.before(w.name(), step, gen, idx); err != nil {
		return err
	}
	_, err = w.p.Engine.ApplyIngest(ctx, p)
	if err != nil && !errors.Is(err, warehouse.ErrAlreadyApplied) {
		return fail(err)
	}
	if err == nil {
		return w.p.Hooks.after(w.name(), step, gen, idx)
	}
	return nil
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

// watermark publishes the source's coverage (see the package doc). It only
// adds: coverage never shrinks.
func (w *worker) watermark(ctx context.Context) error {
	col := w.def.TimeColumn
	if col == "" || w.src == nil || w.src.Serving == 0 {
		return nil
	}
	r, ok := w.p.Engine.(Reader)
	if !ok {
		return nil
	}
	q := fmt.Sprintf("SELECT min(%[1]s), max(%[1]s) FROM %[2]s", r.QuoteIdent(col), r.QuoteTable(w.view()))
	res, err := r.ReadOnlyQuery(ctx, q)
	if err != nil {
		return fmt.Errorf("%s: source %s: reading the time_column %s for its watermark: %w", w.def.File, w.name(), col, err)
	}
	if len(res.Rows) != 1 || len(res.Rows[0]) != 2 {
		return nil
	}
	lo, okLo := res.Rows[0][0].(time.Time)
	hi, okHi := res.Rows[0][1].(time.Time)
	if !okLo || !okHi {
		if res.Rows[0][1] == nil {
			return nil // nothing served with a time yet
		}
		return fmt.Errorf("%s: source %s: time_column %s is %T, not a timestamp or date", w.def.File, w.name(), col, res.Rows[0][1])
	}
	start := lo.UTC()
	if !w.def.Start.IsZero() {
		start = w.def.Start.UTC()
	}
	end := hi.UTC().Add(-w.def.Watermark.Lateness)
	if !end.After(start) {
		return nil
	}
	if err := w.p.Store.AddIntervals(ctx, state.IntervalsParams{Key: state.SourceKey(w.name()),
		Ranges: interval.NewSet(interval.NewRange(start, end)), Now: w.p.Clock.Now()}); err != nil {
		return fmt.Errorf("source %s: publishing its watermark %s: %w", w.name(), end.Format(time.RFC3339), err)
	}
	w.rep.Watermark = end
	return nil
}
