-- Oban's job table as Oban's own migrations leave it in the default prefix ("public"):
-- oban-bg/oban, lib/oban/migrations/postgres/v01.ex through v14.ex (Oban.Migrations.Postgres,
-- @current_version 14, read at commit 2939e3134d0812195fbfcfe9a8e8d4bbd30bb23b, Oban 2.23.0),
-- folded into the final definitions as Ecto's PostgreSQL adapter writes them (:map is jsonb,
-- :utc_datetime_usec is timestamp without time zone holding UTC, default [] is ARRAY[]::type,
-- index names are <table>_<columns>_index). Only oban_jobs and its state enum: oban_peers (v11)
-- plays no part in sweeping it. The migration that changed each part is noted.

CREATE TYPE oban_job_state AS ENUM (
    'available',
    'suspended', -- v14 (v01 creates it on a fresh install)
    'scheduled',
    'executing',
    'retryable',
    'completed',
    'discarded',
    'cancelled' -- v09 (likewise)
);

CREATE TABLE oban_jobs (
    id bigserial,
    state oban_job_state NOT NULL DEFAULT 'available',
    queue text NOT NULL DEFAULT 'default',
    worker text NOT NULL,
    args jsonb NOT NULL DEFAULT '{}', -- v10: DEFAULT %{}
    errors jsonb[] NOT NULL DEFAULT ARRAY[]::jsonb[],
    attempt integer NOT NULL DEFAULT 0,
    max_attempts integer NOT NULL DEFAULT 20,
    inserted_at timestamp NOT NULL DEFAULT timezone('UTC', now()),
    scheduled_at timestamp NOT NULL DEFAULT timezone('UTC', now()),
    attempted_at timestamp,
    completed_at timestamp,
    attempted_by text[], -- v03
    discarded_at timestamp, -- v08
    priority integer NOT NULL DEFAULT 0, -- v08, NOT NULL in v10
    tags text[] DEFAULT ARRAY[]::text[], -- v08
    meta jsonb DEFAULT '{}', -- v09
    cancelled_at timestamp, -- v09
    PRIMARY KEY (id)
);

ALTER TABLE oban_jobs ADD CONSTRAINT worker_length CHECK (char_length(worker) > 0 AND char_length(worker) < 128); -- v02
ALTER TABLE oban_jobs ADD CONSTRAINT queue_length CHECK (char_length(queue) > 0 AND char_length(queue) < 128); -- v02
ALTER TABLE oban_jobs ADD CONSTRAINT positive_max_attempts CHECK (max_attempts > 0); -- v10
ALTER TABLE oban_jobs ADD CONSTRAINT attempt_range CHECK (attempt between 0 and max_attempts); -- v10
ALTER TABLE oban_jobs ADD CONSTRAINT non_negative_priority CHECK (priority >= 0) NOT VALID; -- v12, replacing v10's priority_range

CREATE INDEX oban_jobs_state_queue_priority_scheduled_at_id_index ON oban_jobs (state, queue, priority, scheduled_at, id); -- v08
CREATE INDEX oban_jobs_args_index ON oban_jobs USING gin (args); -- v10
CREATE INDEX oban_jobs_meta_index ON oban_jobs USING gin (meta); -- v10
CREATE INDEX oban_jobs_state_cancelled_at_index ON oban_jobs (state, cancelled_at); -- v13
CREATE INDEX oban_jobs_state_discarded_at_index ON oban_jobs (state, discarded_at); -- v13
