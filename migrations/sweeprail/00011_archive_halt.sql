-- +goose Up
-- A sweep halted because a foreign archive, read back after a batch's commit, did not hold the
-- rows the batch deleted (or could not be read): no batch of the sweep runs while its row is
-- here, so at most one batch's rows are ever exposed. An operator releases the sweep by deleting
-- the row, once the rows are restored or their loss accepted.
CREATE TABLE sweeprail.archive_halt (
    sweep     text PRIMARY KEY,
    pass      text NOT NULL,
    run_id    uuid NOT NULL,
    message   text NOT NULL,
    halted_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE sweeprail.archive_halt;
