-- The process that holds each lease (state.LeaseHolder): its host, PID and
-- start identity, so that a lease whose holder no longer runs can be taken
-- over before it expires (state.Store.TakeOverLease). Leases taken before
-- this migration have an unknown holder ('' and 0) and simply expire.

-- +goose Up
ALTER TABLE leases
    ADD COLUMN holder_host  TEXT   NOT NULL DEFAULT '',
    ADD COLUMN holder_pid   BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN holder_start TEXT   NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE leases
    DROP COLUMN holder_start,
    DROP COLUMN holder_pid,
    DROP COLUMN holder_host;
