package storekit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gapless-dev/gapless/state"
)

// SourceRow is a sources row as both stores keep it: instants in
// microseconds, generations 0 for none.
type SourceRow struct {
	Name, Connector, DefinitionHash string
	Building, Serving, Last         int64
	Requested                       bool
	Parked                          string
	// DeferredFor is the in-flight generation the last source_plan_deferred
	// event named, so a planner retrying every tick records one deferral
	// per generation, not one per tick.
	DeferredFor                      int64
	RegisteredAt, UpdatedAt, Removed int64
	// LastSeq is the highest batch Seq ever staged. It is read with the
	// row but written only by the queue (BatchTx.SetQueue), never by
	// PutSource.
	LastSeq int64
	// Block is the source's blocked batch (Block.Seq 0: none) and LateRows
	// its late rows' running total: read with the row, written only by
	// BlockTx.PutBlock and PutLateRows, never by PutSource.
	Block    state.SourceBlock
	LateRows int64
}

// Record returns the public record of r, without generations.
func (r SourceRow) Record() *state.Source {
	return &state.Source{
		Name: r.Name, Connector: r.Connector, DefinitionHash: r.DefinitionHash,
		Building: r.Building, Serving: r.Serving, LastGeneration: r.Last,
		BuildRequested: r.Requested, ParkedReason: r.Parked, LastSeq: r.LastSeq,
		RegisteredAt: FromMicros(r.RegisteredAt), UpdatedAt: FromMicros(r.UpdatedAt),
		RemovedAt: FromMicros(r.Removed), LateRows: r.LateRows,
		Blocked: r.blocked(),
	}
}

// blocked is r's block as Source.Blocked shows it: nil when there is none,
// or when it failed on a generation that is neither building nor serving
// any more (retired: what failed on it is moot).
func (r SourceRow) blocked() *state.SourceBlock {
	b := r.Block
	if b.Seq == 0 || b.Generation == 0 || (b.Generation != r.Building && b.Generation != r.Serving) {
		return nil
	}
	return &b
}

// SourceTx is what the sources transitions need of one store transaction.
// Source locks the row it reads until the transaction ends (PostgreSQL:
// FOR UPDATE; SQLite: the transaction holds the write lock), so that what a
// transition checks is still true when it writes: each transition below is
// a compare-and-swap whose predicate is checked on the locked row.
type SourceTx interface {
	// Source reads and locks the named row; found is false when there is
	// none.
	Source(ctx context.Context, name string) (row SourceRow, found bool, err error)
	// Generation reads one generation row.
	Generation(ctx context.Context, source string, g int64) (gen state.Generation, found bool, err error)
	// PutSource inserts or replaces the row.
	PutSource(ctx context.Context, row SourceRow) error
	// InsertGeneration inserts a new generation row; one that exists is an
	// error (a generation is never issued twice).
	InsertGeneration(ctx context.Context, gen state.Generation) error
	// PutGeneration replaces an existing generation row.
	PutGeneration(ctx context.Context, gen state.Generation) error
	// AppendEvents appends events in order.
	AppendEvents(ctx context.Context, events []state.Event) error
	// DropBatches deletes the source's staged batches and forgets the
	// position its queue reached (not its highest Seq, never reused).
	DropBatches(ctx context.Context, source string) error
}

// sourceEvent builds one source event.
func sourceEvent(kind, source, reason string, now time.Time, d state.SourceEventData) (state.Event, error) {
	raw, err := json.Marshal(d)
	if err != nil {
		return state.Event{}, fmt.Errorf("encoding the %s event: %w", kind, err)
	}
	return state.Event{At: FromMicros(Micros(now)), Kind: kind, Model: source, Reason: reason, Data: raw}, nil
}

// put writes row (stamped updated at now), the generations and the event.
func put(ctx context.Context, tx SourceTx, row *SourceRow, now time.Time, gens []state.Generation, ev ...state.Event) error {
	row.UpdatedAt = Micros(now)
	if err := tx.PutSource(ctx, *row); err != nil {
		return fmt.Errorf("writing source %q: %w", row.Name, err)
	}
	for _, g := range gens {
		if err := tx.PutGeneration(ctx, g); err != nil {
			return fmt.Errorf("writing generation %d of source %q: %w", g.Generation, g.Source, err)
		}
	}
	if len(ev) > 0 {
		if err := tx.AppendEvents(ctx, ev); err != nil {
			return fmt.Errorf("appending the events of source %q: %w", row.Name, err)
		}
	}
	return nil
}

// defined reads the locked row of a defined (not removed) source, or fails
// wrapping state.ErrNotFound.
func defined(ctx context.Context, tx SourceTx, name string) (SourceRow, error) {
	row, found, err := tx.Source(ctx, name)
	if err != nil {
		return SourceRow{}, fmt.Errorf("reading source %q: %w", name, err)
	}
	if !found || row.Removed != 0 {
		return SourceRow{}, fmt.Errorf("source %q: %w", name, state.ErrNotFound)
	}
	return row, nil
}

// checkCall refuses a transition without a source name or a Now.
func checkCall(source string, now time.Time) error {
	if source == "" {
		return errors.New("the source name is required")
	}
	if now.IsZero() {
		return fmt.Errorf("source %q: %w", source, state.ErrNoNow)
	}
	return nil
}

// EnsureSources registers definitions (see state.SourceStore). Rows are
// locked in name order, so two concurrent calls cannot deadlock.
func EnsureSources(ctx context.Context, tx SourceTx, p state.EnsureSourcesParams) ([]*state.Source, error) {
	if p.Now.IsZero() {
		return nil, state.ErrNoNow
	}
	defs := slices.Clone(p.Sources)
	slices.SortFunc(defs, func(a, b state.SourceDefinition) int { return strings.Compare(a.Name, b.Name) })
	out := make([]*state.Source, 0, len(defs))
	for i, d := range defs {
		if d.Name == "" || d.Connector == "" {
			return nil, fmt.Errorf("source definition %+v: a name and a connector are required", d)
		}
		if i > 0 && defs[i-1].Name == d.Name {
			return nil, fmt.Errorf("source %q is defined twice", d.Name)
		}
		row, found, err := tx.Source(ctx, d.Name)
		if err != nil {
			return nil, fmt.Errorf("reading source %q: %w", d.Name, err)
		}
		reason := ""
		switch {
		case !found:
			reason = state.ReasonSourceNew
			row = SourceRow{Name: d.Name, RegisteredAt: Micros(p.Now)}
		case row.Removed != 0:
			// Defined again: a fresh source but for the generations, which
			// continue from the tombstone's last one.
			reason = state.ReasonSourceDefinedAgain
			row = SourceRow{Name: d.Name, Last: row.Last, RegisteredAt: Micros(p.Now)}
		case row.Connector != d.Connector || row.DefinitionHash != d.DefinitionHash:
			reason = state.ReasonSourceChanged
		}
		if reason != "" {
			if reason != state.ReasonSourceChanged {
				row.Requested = true
			}
			row.Connector, row.DefinitionHash = d.Connector, d.DefinitionHash
			ev, err := sourceEvent(state.EventSourceRegistered, d.Name, reason, p.Now,
				state.SourceEventData{Building: row.Building, Serving: row.Serving})
			if err != nil {
				return nil, err
			}
			row.UpdatedAt = Micros(p.Now)
			if err := put(ctx, tx, &row, p.Now, nil, ev); err != nil {
				return nil, err
			}
		}
		out = append(out, row.Record())
	}
	return out, nil
}

// PlanGeneration issues the next generation when no build is in flight.
// It returns the generation, or refused (wrapping state.ErrBuildInFlight
// or state.ErrSourceParked) with what must still be committed: the
// deferral event, once per in-flight generation. err aborts the
// transaction.
func PlanGeneration(ctx context.Context, tx SourceTx, p state.PlanGenerationParams) (gen state.Generation, refused, err error) {
	if err := checkCall(p.Source, p.Now); err != nil {
		return state.Generation{}, nil, err
	}
	switch p.Kind {
	case state.GenerationBackfill, state.GenerationReplace:
		// A backfill planned without a pin (a resync, which plans at once
		// to name the generation) is pinned by the pass that builds it.
	default:
		return state.Generation{}, nil, fmt.Errorf("source %q: unknown generation kind %q (backfill or replace)", p.Source, p.Kind)
	}
	if p.Chunks < 0 {
		return state.Generation{}, nil, fmt.Errorf("source %q: negative chunk count %d", p.Source, p.Chunks)
	}
	row, err := defined(ctx, tx, p.Source)
	if err != nil {
		return state.Generation{}, nil, err
	}
	// The one-build-per-source compare-and-swap: building must be none.
	if row.Building != 0 && !mutated(MutantPlanNotExclusive) {
		refused = fmt.Errorf("%w: source %q builds generation %d", state.ErrBuildInFlight, p.Source, row.Building)
		if row.DeferredFor == row.Building {
			return state.Generation{}, refused, nil
		}
		ev, err := sourceEvent(state.EventSourcePlanDeferred, p.Source, state.ReasonSourceBuildInFlight, p.Now,
			state.SourceEventData{Generation: row.Building, Kind: p.Kind, Building: row.Building, Serving: row.Serving})
		if err != nil {
			return state.Generation{}, nil, err
		}
		// Only the deferral mark changes: updated_at stays what the last
		// transition set.
		row.DeferredFor = row.Building
		if err := tx.PutSource(ctx, row); err != nil {
			return state.Generation{}, nil, fmt.Errorf("writing source %q: %w", row.Name, err)
		}
		if err := tx.AppendEvents(ctx, []state.Event{ev}); err != nil {
			return state.Generation{}, nil, fmt.Errorf("appending the events of source %q: %w", row.Name, err)
		}
		return state.Generation{}, refused, nil
	}
	if row.Parked != "" && !p.AllowParked {
		return state.Generation{}, fmt.Errorf("%w: source %q: %s", state.ErrSourceParked, p.Source, row.Parked), nil
	}
	row.Last++
	row.Building = row.Last
	if !p.KeepRequested {
		row.Requested = false
	}
	gen = state.Generation{
		Source: p.Source, Generation: row.Last, Kind: p.Kind, Pin: clonePin(p.Pin), PinLabel: p.PinLabel,
		Chunks: p.Chunks, Status: state.GenerationBuilding, CreatedAt: FromMicros(Micros(p.Now)),
	}
	ev, err := sourceEvent(state.EventSourcePlanned, p.Source, "", p.Now, state.SourceEventData{
		Generation: gen.Generation, Kind: gen.Kind, Pin: gen.Pin, PinLabel: gen.PinLabel, Chunks: gen.Chunks,
		Building: row.Building, Serving: row.Serving,
	})
	if err != nil {
		return state.Generation{}, nil, err
	}
	if err := tx.InsertGeneration(ctx, gen); err != nil {
		return state.Generation{}, nil, fmt.Errorf("inserting generation %d of source %q: %w", gen.Generation, p.Source, err)
	}
	if err := put(ctx, tx, &row, p.Now, nil, ev); err != nil {
		return state.Generation{}, nil, err
	}
	return gen, nil, nil
}

func clonePin(p *int64) *int64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// building reads the locked row and generation g, and refuses with
// state.ErrConflictingGeneration unless g is the source's building
// generation and still building.
func building(ctx context.Context, tx SourceTx, source string, g int64) (SourceRow, state.Generation, error) {
	row, err := defined(ctx, tx, source)
	if err != nil {
		return SourceRow{}, state.Generation{}, err
	}
	if row.Building != g {
		return SourceRow{}, state.Generation{}, fmt.Errorf("%w: source %q builds generation %s, not %d",
			state.ErrConflictingGeneration, source, genOrNone(row.Building), g)
	}
	gen, found, err := tx.Generation(ctx, source, g)
	if err != nil {
		return SourceRow{}, state.Generation{}, fmt.Errorf("reading generation %d of source %q: %w", g, source, err)
	}
	if !found || gen.Status != state.GenerationBuilding {
		return SourceRow{}, state.Generation{}, fmt.Errorf("%w: generation %d of source %q is %s, not building",
			state.ErrConflictingGeneration, g, source, gen.Status)
	}
	return row, gen, nil
}

func genOrNone(g int64) string {
	if g == 0 {
		return "none"
	}
	return fmt.Sprint(g)
}

// PinGeneration records the pin of the building generation that has none.
func PinGeneration(ctx context.Context, tx SourceTx, p state.PinGenerationParams) (state.Generation, error) {
	if err := checkCall(p.Source, p.Now); err != nil {
		return state.Generation{}, err
	}
	if p.Chunks < 0 {
		return state.Generation{}, fmt.Errorf("source %q: negative chunk count %d", p.Source, p.Chunks)
	}
	row, gen, err := building(ctx, tx, p.Source, p.Generation)
	if err != nil {
		return state.Generation{}, err
	}
	if gen.Pin != nil {
		return state.Generation{}, fmt.Errorf("%w: generation %d of source %q is already pinned at %d",
			state.ErrConflictingGeneration, p.Generation, p.Source, *gen.Pin)
	}
	pin := p.Pin
	gen.Pin, gen.PinLabel, gen.Chunks = &pin, p.PinLabel, p.Chunks
	ev, err := sourceEvent(state.EventSourcePinned, p.Source, "", p.Now, state.SourceEventData{
		Generation: gen.Generation, Kind: gen.Kind, Pin: gen.Pin, PinLabel: gen.PinLabel, Chunks: gen.Chunks,
		Building: row.Building, Serving: row.Serving,
	})
	if err != nil {
		return state.Generation{}, err
	}
	return gen, put(ctx, tx, &row, p.Now, []state.Generation{gen}, ev)
}

// retire marks the building generation gen retired for reason and moves
// row to no build in flight, a build requested; it returns the event.
func retire(row *SourceRow, gen *state.Generation, reason string, now time.Time) (state.Event, error) {
	gen.Status, gen.RetiredReason, gen.RetiredAt = state.GenerationRetired, reason, FromMicros(Micros(now))
	row.Building, row.Requested = 0, true
	return sourceEvent(state.EventSourceRetired, row.Name, reason, now, state.SourceEventData{
		Generation: gen.Generation, Kind: gen.Kind, Building: row.Building, Serving: row.Serving,
	})
}

// RetireGeneration retires the building generation p.Generation.
func RetireGeneration(ctx context.Context, tx SourceTx, p state.RetireGenerationParams) (*state.Source, error) {
	if err := checkCall(p.Source, p.Now); err != nil {
		return nil, err
	}
	if p.Reason == "" {
		return nil, fmt.Errorf("source %q: retiring generation %d needs a reason", p.Source, p.Generation)
	}
	row, gen, err := building(ctx, tx, p.Source, whateverBuilds(ctx, tx, MutantRetireAnyGeneration, p.Source, p.Generation))
	if err != nil {
		return nil, err
	}
	ev, err := retire(&row, &gen, p.Reason, p.Now)
	if err != nil {
		return nil, err
	}
	if err := put(ctx, tx, &row, p.Now, []state.Generation{gen}, ev); err != nil {
		return nil, err
	}
	return row.Record(), nil
}

// RecordSwap records that the building generation p.Generation serves.
func RecordSwap(ctx context.Context, tx SourceTx, p state.RecordSwapParams) (*state.Source, error) {
	if err := checkCall(p.Source, p.Now); err != nil {
		return nil, err
	}
	if p.Generation <= 0 {
		return nil, fmt.Errorf("source %q: generation %d: generations start at 1", p.Source, p.Generation)
	}
	cur, err := defined(ctx, tx, p.Source)
	if err != nil {
		return nil, err
	}
	if cur.Serving == p.Generation {
		return cur.Record(), nil // a replay of the swap already recorded
	}
	row, gen, err := building(ctx, tx, p.Source, whateverBuilds(ctx, tx, MutantSwapWithoutGenerationPredicate, p.Source, p.Generation))
	if err != nil {
		return nil, err
	}
	if gen.Pin == nil {
		return nil, fmt.Errorf("source %q: generation %d has no pin yet: it cannot have swapped", p.Source, p.Generation)
	}
	gens := []state.Generation{}
	replaced := row.Serving
	if replaced != 0 {
		old, found, err := tx.Generation(ctx, p.Source, replaced)
		if err != nil {
			return nil, fmt.Errorf("reading generation %d of source %q: %w", replaced, p.Source, err)
		}
		if found && old.Status != state.GenerationRetired {
			old.Status, old.RetiredReason, old.RetiredAt = state.GenerationRetired, state.RetiredReplaced, FromMicros(Micros(p.Now))
			gens = append(gens, old)
		}
	}
	gen.Status, gen.SwappedAt = state.GenerationSwapped, FromMicros(Micros(p.Now))
	gens = append(gens, gen)
	row.Serving, row.Building, row.Parked = gen.Generation, 0, ""
	ev, err := sourceEvent(state.EventSourceSwapped, p.Source, "", p.Now, state.SourceEventData{
		Generation: gen.Generation, Kind: gen.Kind, Pin: gen.Pin, PinLabel: gen.PinLabel, Chunks: gen.Chunks,
		Replaced: replaced, Building: row.Building, Serving: row.Serving,
	})
	if err != nil {
		return nil, err
	}
	if err := put(ctx, tx, &row, p.Now, gens, ev); err != nil {
		return nil, err
	}
	return row.Record(), nil
}

// RequestBuild requests a build, clears the park, and retires p.Retire.
func RequestBuild(ctx context.Context, tx SourceTx, p state.RequestBuildParams) (*state.Source, error) {
	if err := checkCall(p.Source, p.Now); err != nil {
		return nil, err
	}
	if p.Reason == "" {
		return nil, fmt.Errorf("source %q: a build request needs a reason", p.Source)
	}
	var (
		row    SourceRow
		gens   []state.Generation
		events []state.Event
		err    error
	)
	if p.Retire != 0 {
		var gen state.Generation
		if row, gen, err = building(ctx, tx, p.Source, whateverBuilds(ctx, tx, MutantRetireAnyGeneration, p.Source, p.Retire)); err != nil {
			return nil, err
		}
		ev, err := retire(&row, &gen, p.Reason, p.Now)
		if err != nil {
			return nil, err
		}
		gens, events = append(gens, gen), append(events, ev)
	} else if row, err = defined(ctx, tx, p.Source); err != nil {
		return nil, err
	}
	row.Requested, row.Parked = true, ""
	ev, err := sourceEvent(state.EventSourceResyncRequest, p.Source, p.Reason, p.Now, state.SourceEventData{
		Generation: p.Retire, Building: row.Building, Serving: row.Serving,
	})
	if err != nil {
		return nil, err
	}
	if err := put(ctx, tx, &row, p.Now, gens, append(events, ev)...); err != nil {
		return nil, err
	}
	return row.Record(), nil
}

// expected reads the locked row of a defined source and refuses with
// state.ErrConflictingGeneration unless its building and serving
// generations are what the caller read.
func expected(ctx context.Context, tx SourceTx, source string, e state.SourceExpectation) (SourceRow, error) {
	row, err := defined(ctx, tx, source)
	if err != nil {
		return SourceRow{}, err
	}
	if row.Building != e.Building || row.Serving != e.Serving {
		return SourceRow{}, fmt.Errorf("%w: source %q builds %s and serves %s, the caller read building %s and serving %s",
			state.ErrConflictingGeneration, source, genOrNone(row.Building), genOrNone(row.Serving),
			genOrNone(e.Building), genOrNone(e.Serving))
	}
	return row, nil
}

// ParkSource parks the source NEEDS_RESYNC, pinned to p.Expect.
func ParkSource(ctx context.Context, tx SourceTx, p state.ParkSourceParams) (*state.Source, error) {
	if err := checkCall(p.Source, p.Now); err != nil {
		return nil, err
	}
	if p.Reason == "" {
		return nil, fmt.Errorf("source %q: parking needs a reason", p.Source)
	}
	row, err := expected(ctx, tx, p.Source, p.Expect)
	if err != nil {
		return nil, err
	}
	if row.Parked == p.Reason {
		return row.Record(), nil
	}
	row.Parked = p.Reason
	ev, err := sourceEvent(state.EventSourceNeedsResync, p.Source, p.Reason, p.Now,
		state.SourceEventData{Building: row.Building, Serving: row.Serving})
	if err != nil {
		return nil, err
	}
	if err := put(ctx, tx, &row, p.Now, nil, ev); err != nil {
		return nil, err
	}
	return row.Record(), nil
}

// UnparkSource clears the park, pinned to p.Expect.
func UnparkSource(ctx context.Context, tx SourceTx, p state.UnparkSourceParams) (*state.Source, error) {
	if err := checkCall(p.Source, p.Now); err != nil {
		return nil, err
	}
	row, err := expected(ctx, tx, p.Source, p.Expect)
	if err != nil {
		return nil, err
	}
	if row.Parked == "" {
		return row.Record(), nil
	}
	was := row.Parked
	row.Parked = ""
	ev, err := sourceEvent(state.EventSourceUnparked, p.Source, was, p.Now,
		state.SourceEventData{Building: row.Building, Serving: row.Serving})
	if err != nil {
		return nil, err
	}
	if err := put(ctx, tx, &row, p.Now, nil, ev); err != nil {
		return nil, err
	}
	return row.Record(), nil
}

// RemoveSource removes the source, pinned to p.Expect, keeping a tombstone.
func RemoveSource(ctx context.Context, tx SourceTx, p state.RemoveSourceParams) (*state.Source, error) {
	if err := checkCall(p.Source, p.Now); err != nil {
		return nil, err
	}
	row, err := expected(ctx, tx, p.Source, p.Expect)
	if err != nil {
		return nil, err
	}
	var gens []state.Generation
	for _, g := range []int64{row.Building, row.Serving} {
		if g == 0 {
			continue
		}
		gen, found, err := tx.Generation(ctx, p.Source, g)
		if err != nil {
			return nil, fmt.Errorf("reading generation %d of source %q: %w", g, p.Source, err)
		}
		if found && gen.Status != state.GenerationRetired {
			gen.Status, gen.RetiredReason, gen.RetiredAt = state.GenerationRetired, state.RetiredRemoved, FromMicros(Micros(p.Now))
			gens = append(gens, gen)
		}
	}
	ev, err := sourceEvent(state.EventSourceRemoved, p.Source, "", p.Now,
		state.SourceEventData{Building: row.Building, Serving: row.Serving})
	if err != nil {
		return nil, err
	}
	row.Building, row.Serving, row.Requested, row.Parked, row.DeferredFor = 0, 0, false, "", 0
	row.Removed = Micros(p.Now)
	if err := tx.DropBatches(ctx, p.Source); err != nil {
		return nil, fmt.Errorf("dropping the staged batches of source %q: %w", p.Source, err)
	}
	if err := put(ctx, tx, &row, p.Now, gens, ev); err != nil {
		return nil, err
	}
	return row.Record(), nil
}

// AppliedTx is what RecordApplied, RecordBlocked and AddLateRows need of
// one store transaction: the source's row, locked, its queue head, and the
// writes of its block and late rows.
type AppliedTx interface {
	SourceTx
	// Queue is BatchTx.Queue.
	Queue(ctx context.Context, source string) (lastSeq, lastTo int64, found bool, err error)
	// PutBlock writes the source's block (b.Seq 0 clears it).
	PutBlock(ctx context.Context, source string, b state.SourceBlock) error
	// PutLateRows writes the source's late rows' running total.
	PutLateRows(ctx context.Context, source string, total int64) error
	// BatchSeq reads the source's staged batch seq.
	BatchSeq(ctx context.Context, source string, seq int64) (b state.Batch, found bool, err error)
	// PutSkipped marks the source's batch seq skipped at at.
	PutSkipped(ctx context.Context, source string, seq int64, at time.Time) error
}

// live reads the locked row of the defined source and generation g of it,
// refusing a retired or unknown generation with
// state.ErrConflictingGeneration: the {source, generation} pin of
// RecordApplied, RecordBlocked and AddLateRows.
func live(ctx context.Context, tx AppliedTx, source string, g int64, what string) (SourceRow, state.Generation, error) {
	if source == "" {
		return SourceRow{}, state.Generation{}, errors.New("the source name is required")
	}
	if g <= 0 {
		return SourceRow{}, state.Generation{}, fmt.Errorf("source %q: generation %d: generations start at 1", source, g)
	}
	row, err := defined(ctx, tx, source)
	if err != nil {
		return SourceRow{}, state.Generation{}, err
	}
	gen, found, err := tx.Generation(ctx, source, g)
	if err != nil {
		return SourceRow{}, state.Generation{}, fmt.Errorf("reading generation %d of source %q: %w", g, source, err)
	}
	if !found {
		return SourceRow{}, state.Generation{}, fmt.Errorf("%w: source %q has no generation %d", state.ErrConflictingGeneration, source, g)
	}
	if gen.Status == state.GenerationRetired {
		return SourceRow{}, state.Generation{}, fmt.Errorf("%w: generation %d of source %q is retired: %s",
			state.ErrConflictingGeneration, g, source, what)
	}
	return row, gen, nil
}

// RecordApplied moves generation p.Generation's applied seq (and chunks
// applied) forward to p.Seq (p.Chunks) (see state.SourceStore), and clears
// the source's block on that generation once the seq reaches it. The
// source's row is locked first, so the check of the generation's status
// and applied seq holds at the write against every transition (a
// concurrent RecordSwap retiring it, another recorder): the
// compare-and-swap is pinned to {source, generation} and to the stored
// seq, never to the source's displayed state.
func RecordApplied(ctx context.Context, tx AppliedTx, p state.RecordAppliedParams) (state.Generation, error) {
	if p.Seq < 0 {
		return state.Generation{}, fmt.Errorf("source %q: generation %d: negative applied seq %d", p.Source, p.Generation, p.Seq)
	}
	if p.Chunks < 0 {
		return state.Generation{}, fmt.Errorf("source %q: generation %d: negative chunks applied %d", p.Source, p.Generation, p.Chunks)
	}
	row, gen, err := live(ctx, tx, p.Source, p.Generation, "nothing is applied to it any more")
	if err != nil {
		return state.Generation{}, err
	}
	moved := false
	if p.Seq > gen.AppliedSeq || (p.Seq < gen.AppliedSeq && mutated(MutantAppliedMovesBackward)) {
		lastSeq, _, _, err := tx.Queue(ctx, p.Source)
		if err != nil {
			return state.Generation{}, fmt.Errorf("reading the queue of source %q: %w", p.Source, err)
		}
		if p.Seq > lastSeq {
			return state.Generation{}, fmt.Errorf("source %q: generation %d: batch %d was never staged (the queue ends at %d)",
				p.Source, p.Generation, p.Seq, lastSeq)
		}
		gen.AppliedSeq, moved = p.Seq, true
	}
	if p.Chunks > gen.ChunksApplied {
		if p.Chunks > gen.Chunks {
			return state.Generation{}, fmt.Errorf("source %q: generation %d: %d chunks applied of %d", p.Source, p.Generation, p.Chunks, gen.Chunks)
		}
		gen.ChunksApplied, moved = p.Chunks, true
	}
	if t := p.Times; t != nil && (gen.Times == nil || t.Seq > gen.Times.Seq) {
		if t.Seq < 0 || t.Seq > gen.AppliedSeq {
			return state.Generation{}, fmt.Errorf("source %q: generation %d: times as of batch %d, which is not applied (applied seq %d)",
				p.Source, p.Generation, t.Seq, gen.AppliedSeq)
		}
		if t.Min.IsZero() != t.Max.IsZero() || t.Max.Before(t.Min) {
			return state.Generation{}, fmt.Errorf("source %q: generation %d: times %s to %s are not a least and a greatest",
				p.Source, p.Generation, t.Min, t.Max)
		}
		gen.Times, moved = &state.GenerationTimes{Seq: t.Seq, Min: t.Min.UTC().Truncate(time.Microsecond), Max: t.Max.UTC().Truncate(time.Microsecond)}, true
	}
	if !moved {
		return gen, nil // behind or equal: another recorder got there first
	}
	if err := tx.PutGeneration(ctx, gen); err != nil {
		return state.Generation{}, fmt.Errorf("writing generation %d of source %q: %w", gen.Generation, p.Source, err)
	}
	if b := row.Block; b.Seq != 0 && b.Generation == gen.Generation && b.Seq <= gen.AppliedSeq {
		if err := tx.PutBlock(ctx, p.Source, state.SourceBlock{}); err != nil {
			return state.Generation{}, fmt.Errorf("clearing the blocked batch %d of source %q: %w", b.Seq, p.Source, err)
		}
	}
	return gen, nil
}

// RecordBlocked records that batch p.Seq failed on generation p.Generation
// (see state.SourceStore), pinned to {source, generation} on the locked
// row.
func RecordBlocked(ctx context.Context, tx AppliedTx, p state.RecordBlockedParams) (state.SourceBlock, error) {
	if err := checkCall(p.Source, p.Now); err != nil {
		return state.SourceBlock{}, err
	}
	if p.Location == "" || p.Reason == "" {
		return state.SourceBlock{}, fmt.Errorf("source %q: batch %d: a blocked batch needs its location and the reason", p.Source, p.Seq)
	}
	row, gen, err := live(ctx, tx, p.Source, p.Generation, "what fails on it no longer blocks the source")
	if err != nil {
		return state.SourceBlock{}, err
	}
	if p.Seq <= gen.AppliedSeq {
		return state.SourceBlock{}, fmt.Errorf("source %q: generation %d already holds batch %d (applied through %d): it cannot block",
			p.Source, p.Generation, p.Seq, gen.AppliedSeq)
	}
	lastSeq, _, _, err := tx.Queue(ctx, p.Source)
	if err != nil {
		return state.SourceBlock{}, fmt.Errorf("reading the queue of source %q: %w", p.Source, err)
	}
	if p.Seq > lastSeq {
		return state.SourceBlock{}, fmt.Errorf("source %q: batch %d was never staged (the queue ends at %d)", p.Source, p.Seq, lastSeq)
	}
	now := FromMicros(Micros(p.Now))
	b := row.Block
	if b.Seq != p.Seq {
		b = state.SourceBlock{Seq: p.Seq, FirstFailedAt: now}
	}
	b.Generation, b.Location, b.Reason, b.LastFailedAt = p.Generation, p.Location, p.Reason, now
	b.Attempts++
	if err := tx.PutBlock(ctx, p.Source, b); err != nil {
		return state.SourceBlock{}, fmt.Errorf("recording the blocked batch %d of source %q: %w", p.Seq, p.Source, err)
	}
	return b, nil
}

// RecordSkipped marks batch p.Seq skipped, moves generation p.Generation's
// applied seq to it and appends the source_batch_skipped event, in the
// caller's transaction (see state.SourceStore): the pin is {source,
// generation} on the locked row and the seq on the staged batch, and a
// batch already skipped is not marked or announced again.
func RecordSkipped(ctx context.Context, tx AppliedTx, p state.RecordSkippedParams) (state.Batch, error) {
	if err := checkCall(p.Source, p.Now); err != nil {
		return state.Batch{}, err
	}
	if p.Reason == "" {
		return state.Batch{}, fmt.Errorf("source %q: batch %d: a skip needs its reason", p.Source, p.Seq)
	}
	if _, _, err := live(ctx, tx, p.Source, p.Generation, "nothing is skipped on it any more"); err != nil {
		return state.Batch{}, err
	}
	b, found, err := tx.BatchSeq(ctx, p.Source, p.Seq)
	if err != nil {
		return state.Batch{}, fmt.Errorf("reading batch %d of source %q: %w", p.Seq, p.Source, err)
	}
	if !found {
		return state.Batch{}, fmt.Errorf("source %q: batch %d is not in the queue (never staged, or pruned): it cannot be skipped", p.Source, p.Seq)
	}
	if _, err := RecordApplied(ctx, tx, state.RecordAppliedParams{Source: p.Source, Generation: p.Generation, Seq: p.Seq}); err != nil {
		return state.Batch{}, err
	}
	if !b.SkippedAt.IsZero() {
		return b, nil // skipped already: forward only, announced once
	}
	b.SkippedAt = FromMicros(Micros(p.Now))
	if err := tx.PutSkipped(ctx, p.Source, p.Seq, b.SkippedAt); err != nil {
		return state.Batch{}, fmt.Errorf("marking batch %d of source %q skipped: %w", p.Seq, p.Source, err)
	}
	ev, err := sourceEvent(state.EventSourceBatchSkipped, p.Source, p.Reason, p.Now,
		state.SourceEventData{Generation: p.Generation, Seq: p.Seq, Location: b.Location})
	if err != nil {
		return state.Batch{}, err
	}
	if err := tx.AppendEvents(ctx, []state.Event{ev}); err != nil {
		return state.Batch{}, fmt.Errorf("appending the %s event of source %q: %w", state.EventSourceBatchSkipped, p.Source, err)
	}
	return b, nil
}

// AddLateRows adds p.Rows to the source's late rows' running total (see
// state.SourceStore), pinned to {source, generation} on the locked row.
func AddLateRows(ctx context.Context, tx AppliedTx, p state.AddLateRowsParams) (int64, error) {
	if p.Rows < 0 {
		return 0, fmt.Errorf("source %q: negative late rows %d", p.Source, p.Rows)
	}
	row, _, err := live(ctx, tx, p.Source, p.Generation, "its late rows are not counted")
	if err != nil {
		return 0, err
	}
	if p.Rows == 0 {
		return row.LateRows, nil
	}
	total := row.LateRows + p.Rows
	if err := tx.PutLateRows(ctx, p.Source, total); err != nil {
		return 0, fmt.Errorf("adding the late rows of source %q: %w", p.Source, err)
	}
	return total, nil
}
