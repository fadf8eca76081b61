-- +goose Up
-- An answer that ran nothing because another run held the lease is recorded once per sweep and
-- minute, not once per request: the history grows with the runs, not with the request rate.
-- requests counts the answers a row stands for (1 for a run); skip_minute is the minute a
-- coalesced row collects, NULL for every other row.
ALTER TABLE sweeprail.run
    ADD COLUMN requests bigint NOT NULL DEFAULT 1,
    ADD COLUMN skip_minute timestamptz;

-- +goose Down
ALTER TABLE sweeprail.run DROP COLUMN skip_minute, DROP COLUMN requests;
