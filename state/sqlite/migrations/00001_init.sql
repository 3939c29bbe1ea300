-- The first schema of the SQLite state store. Instants are int64
-- microseconds since the Unix epoch (state.Micros); 0 means "unset".

-- +goose Up

-- snapshots holds every pushed snapshot as its JSON form. A snapshot is
-- immutable: the first push of a key wins.
CREATE TABLE snapshots (
    name        TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    version     TEXT NOT NULL,
    payload     TEXT NOT NULL,
    PRIMARY KEY (name, fingerprint)
);

-- intervals holds each version's covered time as merged ranges [start, end):
-- within one (name, version) the rows never overlap or touch.
CREATE TABLE intervals (
    name     TEXT    NOT NULL,
    version  TEXT    NOT NULL,
    start_us INTEGER NOT NULL,
    end_us   INTEGER NOT NULL,
    PRIMARY KEY (name, version, start_us),
    CHECK (start_us < end_us)
);

-- environments is one row per live environment. snapshots is a JSON array
-- of state.SnapshotRef sorted by name.
CREATE TABLE environments (
    name             TEXT    NOT NULL PRIMARY KEY,
    generation       INTEGER NOT NULL CHECK (generation > 0),
    plan_id          TEXT    NOT NULL,
    previous_plan_id TEXT    NOT NULL DEFAULT '',
    snapshots        TEXT    NOT NULL,
    promoted_at_us   INTEGER NOT NULL,
    finalized_at_us  INTEGER NOT NULL DEFAULT 0,
    expires_at_us    INTEGER NOT NULL DEFAULT 0,
    invalidated      INTEGER NOT NULL DEFAULT 0
);

-- environment_generations remembers the last generation handed out per
-- environment name, and outlives DeleteEnvironment, so that a recreated
-- environment never reuses a generation a stale fence might still hold.
CREATE TABLE environment_generations (
    name       TEXT    NOT NULL PRIMARY KEY,
    generation INTEGER NOT NULL
);

CREATE TABLE plans (
    id            TEXT    NOT NULL PRIMARY KEY,
    environment   TEXT    NOT NULL,
    payload       TEXT    NOT NULL,
    created_at_us INTEGER NOT NULL
);

-- AUTOINCREMENT: ids are never reused, so they only ever increase.
CREATE TABLE plan_applications (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    plan_id TEXT    NOT NULL REFERENCES plans (id) ON DELETE CASCADE,
    stage   TEXT    NOT NULL,
    status  TEXT    NOT NULL,
    detail  TEXT,
    at_us   INTEGER NOT NULL
);
CREATE INDEX plan_applications_by_plan ON plan_applications (plan_id, id);

CREATE TABLE leases (
    key            TEXT    NOT NULL PRIMARY KEY,
    owner          TEXT    NOT NULL,
    token          TEXT    NOT NULL,
    acquired_at_us INTEGER NOT NULL,
    expires_at_us  INTEGER NOT NULL
);

CREATE TABLE events (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    at_us       INTEGER NOT NULL,
    kind        TEXT    NOT NULL,
    environment TEXT    NOT NULL DEFAULT '',
    model       TEXT    NOT NULL DEFAULT '',
    plan_id     TEXT    NOT NULL DEFAULT '',
    reason      TEXT    NOT NULL DEFAULT '',
    data        TEXT
);
CREATE INDEX events_by_kind ON events (kind, id);
CREATE INDEX events_by_environment ON events (environment, id);
CREATE INDEX events_by_model ON events (model, id);
CREATE INDEX events_by_plan ON events (plan_id, id);

-- +goose Down
DROP TABLE events;
DROP TABLE leases;
DROP TABLE plan_applications;
DROP TABLE plans;
DROP TABLE environment_generations;
DROP TABLE environments;
DROP TABLE intervals;
DROP TABLE snapshots;
