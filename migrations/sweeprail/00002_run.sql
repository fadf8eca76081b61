-- +goose Up
-- The run history: one row per run, skipped and failed ones included, written at the run's start
-- and completed at its end (a run whose process died keeps finished_at NULL). Times are the
-- database's clock. Every run prunes rows past RUN_HISTORY_RETENTION, a bounded number at a time.
CREATE TABLE sweeprail.run (
    run_id             uuid PRIMARY KEY,
    sweep              text NOT NULL,
    started_at         timestamptz NOT NULL DEFAULT now(),
    finished_at        timestamptz,
    stop_reason        text,
    truncated          boolean NOT NULL DEFAULT false,
    skipped            boolean NOT NULL DEFAULT false,
    deleted            bigint NOT NULL DEFAULT 0,
    archived           bigint NOT NULL DEFAULT 0,
    partitions_dropped bigint NOT NULL DEFAULT 0,
    throttled_ms       bigint NOT NULL DEFAULT 0,
    passes             jsonb NOT NULL DEFAULT '[]',
    error              jsonb,
    request_id         text NOT NULL DEFAULT ''
);
CREATE INDEX run_sweep_started_at ON sweeprail.run (sweep, started_at DESC);
CREATE INDEX run_started_at ON sweeprail.run (started_at);

-- +goose Down
DROP TABLE sweeprail.run;
