-- The last write of each interval record (state.LastWrite): when ranges were
-- last added to (name, version), and the span of what that add wrote.
-- Instants are int64 microseconds since the Unix epoch (state.Micros).

-- +goose Up

-- Every interval writer already upserts and locks the key's interval_keys
-- row; an add stamps these columns in that same upsert, so recording the
-- last write costs no statement and no round trip. A row whose key was
-- never added to (only removed from) has them NULL. DeleteIntervals deletes
-- the row, and with it the last write.
ALTER TABLE interval_keys
    ADD COLUMN last_write_at_us    BIGINT,
    ADD COLUMN last_write_start_us BIGINT,
    ADD COLUMN last_write_end_us   BIGINT;

-- +goose Down
ALTER TABLE interval_keys
    DROP COLUMN last_write_end_us,
    DROP COLUMN last_write_start_us,
    DROP COLUMN last_write_at_us;
