-- The merge gate (state.GateStore): the environments under the gate, the
-- holds a deploy attempt records on the pull requests targeting its
-- environment before it changes anything, and the gate's stamps on the
-- attempt. Every transition runs in one BEGIN IMMEDIATE transaction with
-- the attempt's row, its holds and its history event. Instants are int64
-- microseconds since the Unix epoch; 0: unset.

-- +goose Up

-- One row per environment under the merge gate: its repository, the
-- default gate mode of its attempts, and why the gate cannot be trusted
-- ('' when it can).
CREATE TABLE gate_targets (
    env           TEXT    NOT NULL PRIMARY KEY,
    repo          TEXT    NOT NULL DEFAULT '',
    mode          TEXT    NOT NULL CHECK (mode IN ('rendered', 'recorded')),
    unsafe        TEXT    NOT NULL DEFAULT '',
    updated_at_us INTEGER NOT NULL
) WITHOUT ROWID;

-- One row per pull request one deploy attempt holds: unreleased
-- (released_at_us = 0) until that attempt's own settle releases it.
CREATE TABLE gate_holds (
    attempt_id     TEXT    NOT NULL,
    env            TEXT    NOT NULL,
    repo           TEXT    NOT NULL,
    number         INTEGER NOT NULL CHECK (number > 0),
    head_sha       TEXT    NOT NULL DEFAULT '',
    created_at_us  INTEGER NOT NULL,
    rendered_at_us INTEGER NOT NULL DEFAULT 0,
    render_error   TEXT    NOT NULL DEFAULT '',
    released_at_us INTEGER NOT NULL DEFAULT 0,
    release_reason TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (attempt_id, repo, number)
) WITHOUT ROWID;
-- The active holds of an environment (gate status, the write-path guard)
-- and of a pull request (its desired check).
CREATE INDEX gate_holds_active_by_env ON gate_holds (env, repo, number) WHERE released_at_us = 0;
CREATE INDEX gate_holds_active_by_pr ON gate_holds (repo, number) WHERE released_at_us = 0;

-- The gate's stamps on a deploy attempt (state.DeployAttempt): its mode
-- ('' for an attempt that never went through the gate), the environment's
-- generation when its holds were recorded, when they were recorded and
-- rendered, when a fenced promotion committed under it, and its settle.
ALTER TABLE deploy_attempts ADD COLUMN mode TEXT NOT NULL DEFAULT ''
    CHECK (mode IN ('', 'rendered', 'recorded'));
ALTER TABLE deploy_attempts ADD COLUMN base_generation INTEGER NOT NULL DEFAULT 0;
ALTER TABLE deploy_attempts ADD COLUMN holds_recorded_at_us INTEGER NOT NULL DEFAULT 0;
ALTER TABLE deploy_attempts ADD COLUMN holds_rendered_at_us INTEGER NOT NULL DEFAULT 0;
ALTER TABLE deploy_attempts ADD COLUMN promoted_at_us INTEGER NOT NULL DEFAULT 0;
ALTER TABLE deploy_attempts ADD COLUMN settled_at_us INTEGER NOT NULL DEFAULT 0;
ALTER TABLE deploy_attempts ADD COLUMN settled_by TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE deploy_attempts DROP COLUMN settled_by;
ALTER TABLE deploy_attempts DROP COLUMN settled_at_us;
ALTER TABLE deploy_attempts DROP COLUMN promoted_at_us;
ALTER TABLE deploy_attempts DROP COLUMN holds_rendered_at_us;
ALTER TABLE deploy_attempts DROP COLUMN holds_recorded_at_us;
ALTER TABLE deploy_attempts DROP COLUMN base_generation;
ALTER TABLE deploy_attempts DROP COLUMN mode;
DROP TABLE gate_holds;
DROP TABLE gate_targets;
