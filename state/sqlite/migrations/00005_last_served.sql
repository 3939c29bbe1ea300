-- When an environment last stopped serving each model version
-- (state.Store.LastServed): the time the janitor's snapshot_ttl is measured
-- from. Instants are int64 microseconds since the Unix epoch (state.Micros).

-- +goose Up

-- One row per version an environment ever stopped serving, upserted (the
-- latest time wins) by Promote and DeleteEnvironment in their transactions;
-- DeleteIntervals deletes it with the version's intervals.
CREATE TABLE version_last_served (
    name    TEXT    NOT NULL,
    version TEXT    NOT NULL,
    at_us   INTEGER NOT NULL,
    PRIMARY KEY (name, version)
) WITHOUT ROWID;

-- +goose Down
DROP TABLE version_last_served;
