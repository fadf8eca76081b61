-- +goose NO TRANSACTION
-- +goose Up
-- Backs consents/orphaned: user_id IS NULL AND expires_at < cutoff.
CREATE INDEX CONCURRENTLY consent_records_expires_at_orphaned ON consent_records (expires_at) WHERE user_id IS NULL;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS consent_records_expires_at_orphaned;
