package ingest

import (
	"context"
	"fmt"

	"github.com/gapless-dev/gapless/internal/logkey"
	"github.com/gapless-dev/gapless/state"
	"github.com/gapless-dev/gapless/warehouse"
)

// Removing a bad file continues: a staged batch whose file failed to
// apply blocks its source (state.Source.Blocked); when that file is then
// removed, the batch can never apply, and nothing of it was ever applied,
// so the pass skips it (a warehouse skip: the batch's marker with no rows)
// and applies the batches after it. The state store records the skip on
// the batch (state.Batch.SkippedAt, with the source_batch_skipped event in
// the same transaction), so that every later generation skips it too: a
// snapshot leaves it out and a catch-up skips it, and a rebuild after the
// skip proceeds from what exists instead of finding the file vanished.
// Any other vanished file still parks the source NEEDS_RESYNC: its rows
// may be owed, and serving without them would hide that.

// skippable reports whether batch b is skipped on generation gen: the
// state store records it skipped (on any generation), or its staged file
// vanished and it is the batch the state store records as blocking the
// source on gen (same seq, same file): a file that failed to apply and
// was then removed.
func (w *worker) skippable(b state.Batch, gen int64) bool {
	if !b.SkippedAt.IsZero() {
		return true
	}
	bl := w.src.Blocked
	return w.vanished[b.Location] && bl != nil && bl.Generation == gen && bl.Seq == b.Seq && bl.Location == b.Location
}

// skipReason is the source_batch_skipped event's reason for batch seq of
// location loc.
func skipReason(loc string, seq int64) string {
	return fmt.Sprintf("staged file %s was removed while its batch %d blocked the source: skipped, the later batches apply", loc, seq)
}

// skip skips batch b on generation gen (see skippable): the warehouse
// writes its marker and no row, in order and fenced like any batch; then
// the state store records the skip (recordSkip). A skip the warehouse
// already holds (a replay) is recorded all the same: the state store
// announces a batch's skip once, however often it is recorded.
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
	if err == nil {
		if err := w.p.Hooks.after(w.name(), warehouse.StepBatch, gen, b.Seq); err != nil {
			return err
		}
	}
	if err := w.recordSkip(ctx, gen, b.Seq, b.Location); err != nil {
		return err
	}
	w.rep.Skipped++
	return nil
}

// recordSkip records in the state store that generation gen's table holds
// the skip of batch seq (file loc): RecordSkipped marks the batch, moves
// the applied seq, clears the block and writes the source_batch_skipped
// event in one transaction, so that a crash leaves either all of it or
// none (then healed, see healSkip).
func (w *worker) recordSkip(ctx context.Context, gen, seq int64, loc string) error {
	_, err := w.p.Store.RecordSkipped(ctx, state.RecordSkippedParams{Source: w.name(), Generation: gen, Seq: seq,
		Reason: skipReason(loc, seq), Now: w.p.Clock.Now()})
	if err != nil {
		return fmt.Errorf("source %s: recording the skip of batch %d (%s) on generation %d: %w", w.name(), seq, loc, gen, err)
	}
	w.log().WarnContext(ctx, "blocked batch skipped: its staged file was removed", logkey.Path, loc,
		logkey.Generation, gen, logkey.Reason, "removed_while_blocked")
	return nil
}

// healSkip records a skip the warehouse committed but the state store
// never heard of (a crash between the two): the source's blocked batch on
// generation g has a batch marker holding no row, and its staged file is
// gone. A blocked batch's marker is written only by its skip or by its
// apply once its file is fixed, and a fixed file is not gone. It runs
// before the applied seq is healed from the markers, which would clear the
// block and forget the skip.
func (w *worker) healSkip(ctx context.Context) error {
	bl := w.src.Blocked
	if bl == nil {
		return nil
	}
	marked := false
	for _, m := range w.ws.Markers {
		if m.Generation == bl.Generation && m.Kind == warehouse.MarkerBatch && m.Index == bl.Seq && m.Rows == 0 {
			marked = true
		}
	}
	if !marked {
		return nil
	}
	if !w.discovered {
		if err := w.discover(ctx); err != nil {
			return err
		}
	}
	if !w.vanished[bl.Location] {
		return nil
	}
	if err := w.recordSkip(ctx, bl.Generation, bl.Seq, bl.Location); err != nil {
		return err
	}
	w.rep.Healed = append(w.rep.Healed, fmt.Sprintf("recorded the skip of batch %d on generation %d", bl.Seq, bl.Generation))
	w.log().InfoContext(ctx, "healed: recorded a skip the warehouse committed", logkey.Reason, "skip_unrecorded",
		logkey.Generation, bl.Generation)
	return w.refresh(ctx)
}
