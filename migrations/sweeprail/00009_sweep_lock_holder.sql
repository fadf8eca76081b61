-- +goose Up
-- The session that holds a lease: its backend's pid and start. A run keeps that session open for
-- its length, so a lease whose session is gone from pg_stat_activity (its process ended, or the
-- server restarted) is taken over at once rather than after its TTL. NULL in a row written by an
-- older version: that lease is taken over by its TTL alone.
ALTER TABLE sweeprail.sweep_lock
    ADD COLUMN IF NOT EXISTS holder_pid integer,
    ADD COLUMN IF NOT EXISTS holder_started timestamptz;

-- +goose Down
ALTER TABLE sweeprail.sweep_lock DROP COLUMN IF EXISTS holder_started, DROP COLUMN IF EXISTS holder_pid;
