-- What `gapless sources` reads from the state store alone, so it answers
-- while another process holds the warehouse: the chunks a generation's
-- table holds (state.Generation.ChunksApplied, a cache of the warehouse's
-- chunk markers that RecordApplied only moves forward), the source's
-- blocked batch (state.Source.Blocked: RecordBlocked writes it, pinned to
-- a generation that is not retired; RecordApplied clears it once the batch
-- applies; blocked_seq 0: none) and its late rows' running total
-- (AddLateRows). PutSource never writes these columns.

-- +goose Up
ALTER TABLE source_generations ADD COLUMN chunks_applied INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sources ADD COLUMN blocked_generation INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sources ADD COLUMN blocked_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sources ADD COLUMN blocked_location TEXT NOT NULL DEFAULT '';
ALTER TABLE sources ADD COLUMN blocked_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE sources ADD COLUMN blocked_first_failed_at_us INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sources ADD COLUMN blocked_last_failed_at_us INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sources ADD COLUMN blocked_attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sources ADD COLUMN late_rows INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE sources DROP COLUMN late_rows;
ALTER TABLE sources DROP COLUMN blocked_attempts;
ALTER TABLE sources DROP COLUMN blocked_last_failed_at_us;
ALTER TABLE sources DROP COLUMN blocked_first_failed_at_us;
ALTER TABLE sources DROP COLUMN blocked_reason;
ALTER TABLE sources DROP COLUMN blocked_location;
ALTER TABLE sources DROP COLUMN blocked_seq;
ALTER TABLE sources DROP COLUMN blocked_generation;
ALTER TABLE source_generations DROP COLUMN chunks_applied;
