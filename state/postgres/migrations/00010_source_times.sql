-- The least and greatest time_column value a source generation's table
-- holds as of applied seq times_seq (state.Generation.Times; times_seq -1:
-- not known; a NULL time: no row holds one), which the ingest pass keeps
-- the source's watermark from without reading the table. RecordApplied
-- with Times writes them, pinned to a generation that is not retired,
-- only forward in times_seq.

-- +goose Up
ALTER TABLE source_generations ADD COLUMN times_seq BIGINT NOT NULL DEFAULT -1 CHECK (times_seq >= -1);
ALTER TABLE source_generations ADD COLUMN times_min_us BIGINT;
ALTER TABLE source_generations ADD COLUMN times_max_us BIGINT;

-- +goose Down
ALTER TABLE source_generations DROP COLUMN times_max_us;
ALTER TABLE source_generations DROP COLUMN times_min_us;
ALTER TABLE source_generations DROP COLUMN times_seq;
