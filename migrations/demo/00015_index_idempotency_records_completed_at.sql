-- +goose NO TRANSACTION
-- +goose Up
-- Backs idempotency-records/completed: status='completed' AND completed_at < cutoff.
CREATE INDEX CONCURRENTLY idempotency_records_completed_at ON idempotency_records (completed_at) WHERE status = 'completed';

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS idempotency_records_completed_at;
