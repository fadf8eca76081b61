-- +goose NO TRANSACTION
-- +goose Up
-- Backs account-erasure/requested: deletion_requested_at < cutoff AND deleted_at IS NULL.
CREATE INDEX CONCURRENTLY accounts_deletion_requested_at ON accounts (deletion_requested_at) WHERE deleted_at IS NULL;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS accounts_deletion_requested_at;
