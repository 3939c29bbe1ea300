package storekit

import (
	"context"
	"fmt"
	"time"

	"github.com/gapless-dev/gapless/state"
)

// BatchTx is what StageBatches needs of one store transaction. Queue locks
// the source's row until the transaction ends, as SourceTx.Source does, so
// two stagers of one source serialise.
type BatchTx interface {
	// Queue reads and locks the source's queue head: the highest Seq ever
	// staged and the To of that batch (0 and 0 for none); found is false
	// for an unknown or removed source.
	Queue(ctx context.Context, source string) (lastSeq, lastTo int64, found bool, err error)
	// BatchAt returns the staged batch of the source starting at from.
	BatchAt(ctx context.Context, source string, from int64) (b state.Batch, found bool, err error)
	// InsertBatch inserts a batch (its Seq assigned).
	InsertBatch(ctx context.Context, b state.Batch) error
	// SetQueue records the new queue head.
	SetQueue(ctx context.Context, source string, lastSeq, lastTo int64) error
}

// sameBatch reports whether a and b are one batch staged twice.
func sameBatch(a, b state.Batch) bool {
	return a.From == b.From && a.To == b.To && a.Kind == b.Kind && a.ReplaceRun == b.ReplaceRun && a.Location == b.Location
}

// StageBatches appends p.Batches to the source's queue (see
// state.BatchQueue): idempotent by position, monotone in position, all or
// nothing. Seqs continue from the highest ever staged, so none is reused
// after a prune.
func StageBatches(ctx context.Context, tx BatchTx, p state.StageBatchesParams) ([]state.Batch, error) {
	if err := checkCall(p.Source, p.Now); err != nil {
		return nil, err
	}
	for i, b := range p.Batches {
		if b.From >= b.To {
			return nil, fmt.Errorf("source %q: batch %d covers positions [%d, %d): From must be before To", p.Source, i, b.From, b.To)
		}
		if b.Location == "" {
			return nil, fmt.Errorf("source %q: batch %d at position %d has no location", p.Source, i, b.From)
		}
		switch b.Kind {
		case state.BatchAppend, state.BatchUpsert, state.BatchDelete:
		case state.BatchReplaceHead, state.BatchReplaceTail, state.BatchReplaceFinal:
			if b.ReplaceRun == "" {
				return nil, fmt.Errorf("source %q: %s batch at position %d names no replace run", p.Source, b.Kind, b.From)
			}
		default:
			return nil, fmt.Errorf("source %q: batch at position %d has unknown kind %q", p.Source, b.From, b.Kind)
		}
	}
	lastSeq, lastTo, found, err := tx.Queue(ctx, p.Source)
	if err != nil {
		return nil, fmt.Errorf("reading the queue of source %q: %w", p.Source, err)
	}
	if !found {
		return nil, fmt.Errorf("source %q: %w", p.Source, state.ErrNotFound)
	}
	out := make([]state.Batch, 0, len(p.Batches))
	for _, b := range p.Batches {
		b.Source = p.Source
		if b.From < lastTo && !mutated(MutantStageRenumbers) {
			staged, ok, err := tx.BatchAt(ctx, p.Source, b.From)
			if err != nil {
				return nil, fmt.Errorf("reading the batch of source %q at position %d: %w", p.Source, b.From, err)
			}
			if !ok || !sameBatch(staged, b) {
				return nil, fmt.Errorf("source %q: a batch at positions [%d, %d) (%s) overlaps what is staged, up to position %d, and is not a staged batch again",
					p.Source, b.From, b.To, b.Location, lastTo)
			}
			out = append(out, staged)
			continue
		}
		lastSeq++
		b.Seq, b.StagedAt, b.SkippedAt = lastSeq, FromMicros(Micros(p.Now)), time.Time{}
		b.MinTime, b.MaxTime = FromMicros(Micros(b.MinTime)), FromMicros(Micros(b.MaxTime))
		if err := tx.InsertBatch(ctx, b); err != nil {
			return nil, fmt.Errorf("staging the batch of source %q at position %d: %w", p.Source, b.From, err)
		}
		lastTo = b.To
		out = append(out, b)
	}
	if err := tx.SetQueue(ctx, p.Source, lastSeq, lastTo); err != nil {
		return nil, fmt.Errorf("writing the queue of source %q: %w", p.Source, err)
	}
	return out, nil
}
