-- A skipped batch (state.Batch.SkippedAt, RecordSkipped): its staged data
-- is gone for good and no generation holds a row of it, so a snapshot
-- leaves it out instead of finding it vanished. 0: not skipped; once set it
-- never changes.

-- +goose Up
ALTER TABLE source_batches ADD COLUMN skipped_at_us BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE source_batches DROP COLUMN skipped_at_us;
