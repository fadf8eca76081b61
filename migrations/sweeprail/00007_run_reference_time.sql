-- +goose Up
-- The instant a run's cutoffs count back from (the database's clock when it took its lease):
-- with each pass's cutoff in passes, what an audit of the run compares the deleted rows with.
ALTER TABLE sweeprail.run ADD COLUMN IF NOT EXISTS reference_time timestamptz;

-- +goose Down
ALTER TABLE sweeprail.run DROP COLUMN IF EXISTS reference_time;
