-- +goose Up
-- Every committed batch's record of itself, written in the batch's own transaction: when the
-- reply to a batch's COMMIT is lost, the row is there exactly when the batch committed, and the
-- runner asks for it on a fresh connection. A batch whose outcome was never settled is settled by
-- inserting its key with committed false, which waits for the batch's transaction if it is still
-- open and makes the answer final either way. Pruned with the run history.
CREATE TABLE sweeprail.run_batch (
    run_id      uuid NOT NULL,
    pass        text NOT NULL,
    batch       integer NOT NULL,
    rows        bigint NOT NULL,
    committed   boolean NOT NULL DEFAULT true,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, pass, batch)
);
CREATE INDEX run_batch_recorded_at ON sweeprail.run_batch (recorded_at);

-- A run holding a batch whose outcome its runner could not learn (the database was out of reach
-- when it asked): the next run of the sweep settles it, in the run's passes, and clears the flag.
ALTER TABLE sweeprail.run ADD COLUMN IF NOT EXISTS unsettled boolean NOT NULL DEFAULT false;
CREATE INDEX run_unsettled ON sweeprail.run (sweep) WHERE unsettled;

-- +goose Down
ALTER TABLE sweeprail.run DROP COLUMN IF EXISTS unsettled;
DROP TABLE sweeprail.run_batch;
