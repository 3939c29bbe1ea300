-- When an environment last stopped serving each model version
-- (state.Store.LastServed): the time the janitor's snapshot_ttl is measured
-- from. Instants are int64 microseconds since the Unix epoch (state.Micros).

-- +goose Up

-- One row per version an environment ever stopped serving, upserted (the
-- latest time wins, GREATEST) by Promote and DeleteEnvironment in their
-- transactions, which hold the environment row's lock; DeleteIntervals
-- deletes it with the version's intervals.
CREATE TABLE version_last_served (
    name    TEXT   NOT NULL,
    version TEXT   NOT NULL,
    at_us   BIGINT NOT NULL,
    PRIMARY KEY (name, version)
);

-- +goose Down
DROP TABLE version_last_served;
