-- +goose Up
-- One coalesced row per sweep and minute: the key that the skipped answers of a minute meet on.
-- Built in the migration's transaction, not CONCURRENTLY: the history is pruned to its retention,
-- so the build is short, and a concurrent build would wait for every other replica's migration
-- that queues on the set's advisory lock with a transaction open, which deadlocks.
CREATE UNIQUE INDEX IF NOT EXISTS run_skip_minute ON sweeprail.run (sweep, skip_minute)
    WHERE skip_minute IS NOT NULL;

-- +goose Down
DROP INDEX IF EXISTS sweeprail.run_skip_minute;
