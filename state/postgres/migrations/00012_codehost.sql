-- The code-host store (state.CodeHostStore): what the pull-request bot
-- knows. Every transition locks the row it changes (FOR UPDATE), checks
-- its compare-and-swap on it (a revision, a state or a token) and writes,
-- in one transaction. Instants are int64 microseconds since the Unix
-- epoch; 0: unset.

-- +goose Up

-- One row per webhook delivery (X-GitHub-Delivery): a replayed id is not
-- recorded again.
CREATE TABLE webhook_deliveries (
    id              TEXT    NOT NULL PRIMARY KEY,
    event           TEXT    NOT NULL,
    action          TEXT    NOT NULL DEFAULT '',
    repo            TEXT    NOT NULL DEFAULT '',
    status          TEXT    NOT NULL DEFAULT 'received'
                    CHECK (status IN ('received', 'processed', 'ignored', 'failed')),
    error           TEXT    NOT NULL DEFAULT '',
    received_at_us  BIGINT  NOT NULL,
    processed_at_us BIGINT  NOT NULL DEFAULT 0
);
CREATE INDEX webhook_deliveries_newest ON webhook_deliveries (received_at_us DESC, id);

-- The bot's verdict per pull request and target environment. revision
-- counts the writes: PutPRCheck is a compare-and-swap on it.
CREATE TABLE pr_checks (
    repo               TEXT    NOT NULL,
    number             INTEGER NOT NULL CHECK (number > 0),
    env                TEXT    NOT NULL,
    head_sha           TEXT    NOT NULL,
    base_sha           TEXT    NOT NULL DEFAULT '',
    merge_sha          TEXT    NOT NULL DEFAULT '',
    pr_environment     TEXT    NOT NULL DEFAULT '',
    plan_id            TEXT    NOT NULL DEFAULT '',
    planned_generation BIGINT  NOT NULL DEFAULT 0,
    verdict            TEXT    NOT NULL CHECK (verdict IN ('pending', 'success', 'changes', 'failure', 'error')),
    summary            TEXT    NOT NULL DEFAULT '',
    detail             JSON,                       -- NULL: none
    closed             BOOLEAN NOT NULL DEFAULT false,
    revision           BIGINT  NOT NULL CHECK (revision > 0),
    updated_at_us      BIGINT  NOT NULL,
    PRIMARY KEY (repo, number, env)
);
CREATE INDEX pr_checks_by_env ON pr_checks (env, repo, number);

-- One row per check run the bot wants on a head: desired (JSON of
-- state.CheckDesired) at desired_revision, and the revision the code host
-- was last confirmed to show (rendered_revision, never above the desired
-- one, never moving backward).
CREATE TABLE check_renders (
    repo              TEXT    NOT NULL,
    number            INTEGER NOT NULL CHECK (number > 0),
    head_sha          TEXT    NOT NULL,
    name              TEXT    NOT NULL,
    desired           JSON    NOT NULL,
    desired_revision  BIGINT  NOT NULL CHECK (desired_revision > 0),
    rendered_revision BIGINT  NOT NULL DEFAULT 0,
    check_run_id      BIGINT  NOT NULL DEFAULT 0,
    last_error        TEXT    NOT NULL DEFAULT '',
    updated_at_us     BIGINT  NOT NULL,
    rendered_at_us    BIGINT  NOT NULL DEFAULT 0,
    PRIMARY KEY (repo, number, head_sha, name),
    CHECK (rendered_revision >= 0 AND rendered_revision <= desired_revision)
);
-- The renders the code host lags behind, for the sweep that re-renders them.
CREATE INDEX check_renders_lagging ON check_renders (repo, number) WHERE rendered_revision < desired_revision;

-- One row per comment posted once on a PR, named by its hidden marker:
-- claimed by one token at a time until expires_at_us, then posted
-- (comment_id > 0) for good.
CREATE TABLE pr_comments (
    repo           TEXT    NOT NULL,
    number         INTEGER NOT NULL CHECK (number > 0),
    marker         TEXT    NOT NULL,
    owner          TEXT    NOT NULL DEFAULT '',
    token          TEXT    NOT NULL,
    claimed_at_us  BIGINT  NOT NULL,
    expires_at_us  BIGINT  NOT NULL,
    comment_id     BIGINT  NOT NULL DEFAULT 0,
    posted_at_us   BIGINT  NOT NULL DEFAULT 0,
    PRIMARY KEY (repo, number, marker)
);

-- Deploy attempts: requested pending, started running under a lease, ended
-- promoted, failed, cancelled or abandoned. held and rendered are the
-- merge gate's states between pending and running (the next issue): they
-- are admitted here already, and deploy_attempts_one_active counts them
-- with running, so the gate needs no change of this index. Per-PR holds
-- will be a table of their own (gate_holds) referencing an attempt's id.
CREATE TABLE deploy_attempts (
    id                   TEXT    NOT NULL PRIMARY KEY,
    env                  TEXT    NOT NULL,
    repo                 TEXT    NOT NULL DEFAULT '',
    number               INTEGER NOT NULL DEFAULT 0,
    head_sha             TEXT    NOT NULL DEFAULT '',
    origin               TEXT    NOT NULL DEFAULT '',
    trigger_kind         TEXT    NOT NULL CHECK (trigger_kind IN ('deploy_command', 'merge', 'cli')),
    requested_by         TEXT    NOT NULL DEFAULT '',
    state                TEXT    NOT NULL CHECK (state IN ('pending', 'held', 'rendered', 'running',
                                                           'promoted', 'failed', 'cancelled', 'abandoned')),
    owner                TEXT    NOT NULL DEFAULT '',
    lease_token          TEXT    NOT NULL DEFAULT '',
    lease_expires_at_us  BIGINT  NOT NULL DEFAULT 0,
    plan_id              TEXT    NOT NULL DEFAULT '',
    result_generation    BIGINT  NOT NULL DEFAULT 0,
    error                TEXT    NOT NULL DEFAULT '',
    merge_sha            TEXT    NOT NULL DEFAULT '',
    merge_error          TEXT    NOT NULL DEFAULT '',
    merge_recorded_at_us BIGINT  NOT NULL DEFAULT 0,
    created_at_us        BIGINT  NOT NULL,
    started_at_us        BIGINT  NOT NULL DEFAULT 0,
    finished_at_us       BIGINT  NOT NULL DEFAULT 0,
    updated_at_us        BIGINT  NOT NULL
);
-- The schema's own guard of "one active attempt per environment": of two
-- racing starts, the second write fails here even if its check was wrong.
CREATE UNIQUE INDEX deploy_attempts_one_active ON deploy_attempts (env)
    WHERE state IN ('held', 'rendered', 'running');
CREATE INDEX deploy_attempts_by_env ON deploy_attempts (env, created_at_us);
CREATE INDEX deploy_attempts_by_state ON deploy_attempts (state, created_at_us);
CREATE INDEX deploy_attempts_by_pr ON deploy_attempts (repo, number, created_at_us) WHERE repo <> '';

-- +goose Down
DROP TABLE deploy_attempts;
DROP TABLE pr_comments;
DROP TABLE check_renders;
DROP TABLE pr_checks;
DROP TABLE webhook_deliveries;
