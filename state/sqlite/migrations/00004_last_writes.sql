-- The last write of each interval record (state.LastWrite): when ranges were
-- last added to (name, version), and the span of what that add wrote.
-- Instants are int64 microseconds since the Unix epoch (state.Micros).

-- +goose Up

-- One row per interval key ever added to, upserted by AddIntervals in its
-- transaction; RemoveIntervals leaves it, DeleteIntervals deletes it.
CREATE TABLE interval_last_writes (
    name     TEXT    NOT NULL,
    version  TEXT    NOT NULL,
    at_us    INTEGER NOT NULL,
    start_us INTEGER NOT NULL,
    end_us   INTEGER NOT NULL,
    PRIMARY KEY (name, version),
    CHECK (start_us < end_us)
) WITHOUT ROWID;

-- +goose Down
DROP TABLE interval_last_writes;
