package ingest

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

// Removing a bad file continues: a staged batch whose file failed to
// apply blocks its source (state.Source.Blocked); when that file is then
// removed, the batch can never apply, and nothing of it was ever applied,
// so the pass skips it (a warehouse skip: the batch's marker with no rows)
// and applies the batches after it. Any other vanished file still parks
// the source NEEDS_RESYNC: its rows may be owed, and serving without them
// would hide that.

// skippable reports whether batch b, whose staged file vanished, is the
// batch the state store records as blocking the source on generation gen
// (same seq, same file): a file that failed to apply and was then removed.
func (w *worker) skippable(b state.Batch, gen int64) bool {
	bl := w.src.Blocked
	return bl != nil && bl.Generation == gen && bl.Seq == b.Seq && bl.Location == b.Location
}

// skip skips blocked batch b on generation gen (see skippable): the
// warehouse writes its marker and no row, in order and fenced like any
// batch; then the state store records it applied, which clears the block,
// and the source_batch_skipped event names the file. A skip the
// warehouse already holds (a replay) is done. The event is written after
// the warehouse commit and RecordApplied; a crash between them loses the
// event, not the skip.
func (w *worker) skip(ctx context.Context, gen int64, b state.Batch, catchUp bool) error {
	locs := []string{b.Location}
	fail := func(err error) error {
		return &BatchError{Source: w.name(), Step: warehouse.StepBatch, Index: b.Seq, Locations: locs, Err: err}
	}
	if err := w.p.Hooks.before(w.name(), warehouse.StepBatch, gen, b.Seq); err != nil {
		return err
	}
	_, err := w.p.Engine.ApplyIngest(ctx, warehouse.IngestParams{Source: w.name(), Step: warehouse.StepBatch, Generation: gen,
		Index: b.Seq, CatchUp: catchUp, Table: Table(w.name(), gen), Skip: true})
	if w.count(err) != nil {
		return fail(err)
	}
	committed := err == nil
	if committed {
		if err := w.p.Hooks.after(w.name(), warehouse.StepBatch, gen, b.Seq); err != nil {
			return err
		}
	}
	if err := w.recordApplied(ctx, gen, b.Seq); err != nil {
		return err
	}
	w.rep.Skipped++
	reason := fmt.Sprintf("staged file %s was removed while its batch %d blocked the source: skipped, the later batches apply", b.Location, b.Seq)
	w.log().WarnContext(ctx, "blocked batch skipped: its staged file was removed", logkey.Path, b.Location,
		logkey.Generation, gen, logkey.Reason, "removed_while_blocked")
	if !committed {
		return nil // the pass that committed the skip wrote its event
	}
	data, err := json.Marshal(state.SourceEventData{Generation: gen, Seq: b.Seq, Location: b.Location})
	if err != nil {
		return fmt.Errorf("source %s: encoding the %s event: %w", w.name(), state.EventSourceBatchSkipped, err)
	}
	if _, err := w.p.Store.AppendEvents(ctx, state.Event{At: w.p.Clock.Now(), Kind: state.EventSourceBatchSkipped, Model: w.name(),
		Reason: reason, Data: data}); err != nil {
		return fmt.Errorf("source %s: recording the skip of batch %d (%s): %w", w.name(), b.Seq, b.Location, err)
	}
	return nil
}
