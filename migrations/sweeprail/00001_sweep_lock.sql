-- +goose Up
-- sweeprail's own objects live in schema sweeprail, apart from the tables it sweeps. The schema
-- itself is created by the migrations package before goose runs (CREATE SCHEMA only when it is
-- missing, so a schema a DBA created beforehand needs no CREATE privilege on the database),
-- because goose keeps this set's version table, sweeprail.goose_db_version, inside it.

-- The single-flight lease of DESIGN.md: one row per running sweep, labelled by the sweep's name.
CREATE TABLE sweeprail.sweep_lock (
    label        text PRIMARY KEY,
    owner        uuid NOT NULL,
    locked_at    timestamptz NOT NULL,
    locked_until timestamptz NOT NULL
);

-- +goose Down
DROP TABLE sweeprail.sweep_lock;
