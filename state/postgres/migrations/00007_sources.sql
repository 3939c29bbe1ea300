-- Sources (state.SourceStore): one row per source name and one per
-- generation, the state machine of design note Part B3. Every transition
-- locks the source's row FOR UPDATE, checks its compare-and-swap on it and
-- writes, in one transaction. Instants are int64 microseconds since the
-- Unix epoch.

-- +goose Up

-- One row per source name ever registered. RemoveSource keeps the row as
-- a tombstone (removed_at_us > 0) so last_generation, the highest
-- generation ever issued, survives: a generation is never reused.
CREATE TABLE sources (
    name                    TEXT    PRIMARY KEY,
    connector               TEXT    NOT NULL,
    definition_hash         TEXT    NOT NULL,
    building_generation     BIGINT,                    -- NULL: no build in flight
    serving_generation      BIGINT  NOT NULL DEFAULT 0, -- 0: nothing served yet
    last_generation         BIGINT  NOT NULL DEFAULT 0,
    build_requested         BOOLEAN NOT NULL DEFAULT false,
    parked_reason           TEXT,                      -- NULL: not parked (NEEDS_RESYNC otherwise)
    deferred_for_generation BIGINT  NOT NULL DEFAULT 0, -- the build the last source_plan_deferred named
    registered_at_us        BIGINT  NOT NULL,
    updated_at_us           BIGINT  NOT NULL,
    removed_at_us           BIGINT  NOT NULL DEFAULT 0,
    last_batch_seq          BIGINT  NOT NULL DEFAULT 0, -- the highest Seq ever staged (never reused)
    last_batch_to           BIGINT  NOT NULL DEFAULT 0, -- the To of that batch
    CHECK (serving_generation >= 0 AND serving_generation <= last_generation),
    CHECK (building_generation IS NULL OR
           (building_generation > serving_generation AND building_generation <= last_generation))
);

-- One row per generation issued. The partial unique index is the schema's
-- own guard of "one build per source at a time".
CREATE TABLE source_generations (
    source         TEXT    NOT NULL REFERENCES sources (name),
    generation     BIGINT  NOT NULL CHECK (generation > 0),
    kind           TEXT    NOT NULL CHECK (kind IN ('backfill', 'replace')),
    pin            BIGINT,                  -- NULL while a replace run is arriving
    pin_label      TEXT    NOT NULL DEFAULT '',
    chunks         INTEGER NOT NULL DEFAULT 0 CHECK (chunks >= 0),
    status         TEXT    NOT NULL CHECK (status IN ('building', 'swapped', 'retired')),
    retired_reason TEXT    NOT NULL DEFAULT '',
    created_at_us  BIGINT  NOT NULL,
    swapped_at_us  BIGINT  NOT NULL DEFAULT 0,
    retired_at_us  BIGINT  NOT NULL DEFAULT 0,
    PRIMARY KEY (source, generation)
);
CREATE UNIQUE INDEX source_generations_one_build ON source_generations (source) WHERE status = 'building';

-- The live queue (state.BatchQueue): one row per staged batch, in Seq
-- order, which is position order. Staging is idempotent by position.
CREATE TABLE source_batches (
    source       TEXT    NOT NULL REFERENCES sources (name),
    seq          BIGINT  NOT NULL CHECK (seq > 0),
    pos_from     BIGINT  NOT NULL,
    pos_to       BIGINT  NOT NULL,
    kind         TEXT    NOT NULL CHECK (kind IN ('append', 'upsert', 'delete', 'replace_head', 'replace_tail', 'replace_final')),
    replace_run  TEXT    NOT NULL DEFAULT '',
    location     TEXT    NOT NULL,
    row_count    BIGINT  NOT NULL DEFAULT 0,
    min_time_us  BIGINT  NOT NULL DEFAULT 0,
    max_time_us  BIGINT  NOT NULL DEFAULT 0,
    staged_at_us BIGINT  NOT NULL,
    PRIMARY KEY (source, seq),
    UNIQUE (source, pos_from),
    CHECK (pos_from < pos_to)
);

-- +goose Down
DROP TABLE source_batches;
DROP TABLE source_generations;
DROP TABLE sources;
