-- +goose Up
-- Runs that found nothing to do (nothing deleted, archived, processed or dropped, no error, not
-- truncated) share one row per sweep and minute, as lease-held answers do: the history grows
-- with the work, not with the schedule. idle_minute is the minute such a row collects, NULL for
-- every other row. Built in the migration's transaction, as run_skip_minute is, for its reasons.
ALTER TABLE sweeprail.run ADD COLUMN IF NOT EXISTS idle_minute timestamptz;
CREATE UNIQUE INDEX IF NOT EXISTS run_idle_minute ON sweeprail.run (sweep, idle_minute)
    WHERE idle_minute IS NOT NULL;

-- +goose Down
DROP INDEX IF EXISTS sweeprail.run_idle_minute;
ALTER TABLE sweeprail.run DROP COLUMN IF EXISTS idle_minute;
