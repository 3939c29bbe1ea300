-- Freshness debt: the gaps a promotion policy accepted serving, until the
-- scheduler fills them (state.Debt). Instants are BIGINT microseconds since
-- the Unix epoch (state.Micros), as in 00001: 0 means "unset".

-- +goose Up

-- A debt is open while repaired_at_us = 0 AND superseded_at_us = 0. It is
-- inserted by the promotion that accepted it (in the promotion's
-- transaction), stamped repaired by the interval write that completes the
-- coverage of [start_us, end_us) for (model, version), or settled by a
-- later promotion of the environment that no longer serves the version:
-- stamped repaired if the version it serves instead covers the range, else
-- stamped superseded, and carried to new debts on that version for what it
-- misses (carried_from names the debt they were carried from; 0 for a debt
-- a policy accepted).
CREATE TABLE debts (
    id               BIGSERIAL PRIMARY KEY,
    environment      TEXT    NOT NULL,
    model            TEXT    NOT NULL,
    version          TEXT    NOT NULL,
    start_us         BIGINT  NOT NULL,
    end_us           BIGINT  NOT NULL,
    plan_id          TEXT    NOT NULL,
    policy           TEXT    NOT NULL DEFAULT '',
    bound            BIGINT  NOT NULL DEFAULT 0,
    advances         BIGINT  NOT NULL DEFAULT 0,
    accepted_at_us   BIGINT  NOT NULL,
    repaired_at_us   BIGINT  NOT NULL DEFAULT 0,
    superseded_at_us BIGINT  NOT NULL DEFAULT 0,
    carried_from     BIGINT  NOT NULL DEFAULT 0,
    CONSTRAINT debts_non_empty CHECK (start_us < end_us)
);

-- Every interval write looks up the open debts of its key, so that lookup
-- must stay one probe of a small index however many debts were ever
-- repaired; a promotion looks up the open debts of its environment.
CREATE INDEX debts_open_by_key ON debts (model, version, id)
    WHERE repaired_at_us = 0 AND superseded_at_us = 0;
CREATE INDEX debts_open_by_environment ON debts (environment, id)
    WHERE repaired_at_us = 0 AND superseded_at_us = 0;

-- +goose Down
DROP TABLE debts;
