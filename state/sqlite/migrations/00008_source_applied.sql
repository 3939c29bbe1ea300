-- The last live batch seq each source generation's table holds
-- (state.Generation.AppliedSeq): a cache of the warehouse's apply
-- markers, which stay the arbiter. RecordApplied only moves it forward, on
-- a generation that is not retired. It lets an ingest pass see from the
-- state store alone that a source has nothing to land.

-- +goose Up
ALTER TABLE source_generations ADD COLUMN applied_seq INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE source_generations DROP COLUMN applied_seq;
