-- +goose NO TRANSACTION
-- +goose Up
-- One coalesced row per sweep and minute: the key that the skipped answers of a minute meet on.
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS run_skip_minute ON sweeprail.run (sweep, skip_minute)
    WHERE skip_minute IS NOT NULL;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS sweeprail.run_skip_minute;
