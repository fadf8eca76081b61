-- +goose NO TRANSACTION
-- +goose Up
-- Backs idempotency-records/abandoned: status='in_progress' AND lease_expires_at < now().
CREATE INDEX CONCURRENTLY idempotency_records_lease_expires_at_in_progress ON idempotency_records (lease_expires_at) WHERE status = 'in_progress';

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS idempotency_records_lease_expires_at_in_progress;
