-- The first schema of gapless's PostgreSQL state store.
--
-- Every instant is a BIGINT of microseconds since the Unix epoch (UTC), the
-- encoding of state.Micros: 0 means "unset". Nothing here reads the server
-- clock; "now" is always a parameter.

-- +goose Up

-- Snapshots are immutable: the key is the model name at its fingerprint.
CREATE TABLE snapshots (
    name        TEXT  NOT NULL,
    fingerprint TEXT  NOT NULL,
    version     TEXT  NOT NULL,
    payload     JSONB NOT NULL,
    PRIMARY KEY (name, fingerprint)
);

-- One row per interval record (model name at a version). Interval writers
-- lock this row (FOR UPDATE, through an upsert) before reading and rewriting
-- the ranges of the key, and a promotion's check locks it FOR SHARE, so no
-- interval change slips between a check and the promotion it guards. rev
-- counts the writes.
CREATE TABLE interval_keys (
    name    TEXT   NOT NULL,
    version TEXT   NOT NULL,
    rev     BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (name, version)
);

-- Covered ranges [start_us, end_us), merged: the ranges of one key never
-- overlap and never touch, so there is one row per gap-separated run, never
-- one per bucket.
CREATE TABLE intervals (
    name     TEXT   NOT NULL,
    version  TEXT   NOT NULL,
    start_us BIGINT NOT NULL,
    end_us   BIGINT NOT NULL,
    PRIMARY KEY (name, version, start_us),
    CONSTRAINT intervals_non_empty CHECK (start_us < end_us)
);

-- Environments are never physically deleted: deleting one marks it deleted
-- and keeps its generation, so a generation is never reused for a name and a
-- writer fenced on an old generation can never match a re-created
-- environment. A deleted row reads as absent.
CREATE TABLE environments (
    name              TEXT    PRIMARY KEY,
    generation        BIGINT  NOT NULL DEFAULT 0,
    plan_id           TEXT    NOT NULL DEFAULT '',
    previous_plan_id  TEXT    NOT NULL DEFAULT '',
    snapshots         JSONB   NOT NULL DEFAULT '[]',
    promoted_at_us    BIGINT  NOT NULL DEFAULT 0,
    finalized_at_us   BIGINT  NOT NULL DEFAULT 0,
    expires_at_us     BIGINT  NOT NULL DEFAULT 0,
    invalidated       BOOLEAN NOT NULL DEFAULT FALSE,
    deleted           BOOLEAN NOT NULL DEFAULT TRUE
);

-- Plans: payload is JSONB so that saving the same plan twice compares
-- documents, not bytes; payload_text keeps the caller's exact bytes, because
-- the store treats a payload as opaque.
CREATE TABLE plans (
    id            TEXT   PRIMARY KEY,
    environment   TEXT   NOT NULL,
    payload       JSONB  NOT NULL,
    payload_text  TEXT   NOT NULL,
    created_at_us BIGINT NOT NULL
);

CREATE TABLE applications (
    id      BIGSERIAL PRIMARY KEY,
    plan_id TEXT   NOT NULL,
    stage   TEXT   NOT NULL,
    status  TEXT   NOT NULL,
    detail  JSON,
    at_us   BIGINT NOT NULL
);
CREATE INDEX applications_plan_id ON applications (plan_id, id);

CREATE TABLE leases (
    key            TEXT   PRIMARY KEY,
    owner          TEXT   NOT NULL,
    token          TEXT   NOT NULL,
    acquired_at_us BIGINT NOT NULL,
    expires_at_us  BIGINT NOT NULL
);

-- Event ids are assigned under a transaction-scoped advisory lock, so they
-- become visible in id order and "id > cursor" never skips an event.
CREATE TABLE events (
    id          BIGSERIAL PRIMARY KEY,
    at_us       BIGINT NOT NULL,
    kind        TEXT   NOT NULL,
    environment TEXT   NOT NULL DEFAULT '',
    model       TEXT   NOT NULL DEFAULT '',
    plan_id     TEXT   NOT NULL DEFAULT '',
    reason      TEXT   NOT NULL DEFAULT '',
    data        JSON
);
CREATE INDEX events_environment ON events (environment, id) WHERE environment <> '';
CREATE INDEX events_plan_id ON events (plan_id, id) WHERE plan_id <> '';
CREATE INDEX events_model ON events (model, id) WHERE model <> '';

-- +goose Down
DROP TABLE events;
DROP TABLE leases;
DROP TABLE applications;
DROP TABLE plans;
DROP TABLE environments;
DROP TABLE intervals;
DROP TABLE interval_keys;
DROP TABLE snapshots;
