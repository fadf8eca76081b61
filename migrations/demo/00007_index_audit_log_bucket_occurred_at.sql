-- +goose NO TRANSACTION
-- +goose Up
-- Backs audit-log/operational and audit-log/compliance: retention_bucket = ... AND occurred_at < cutoff.
CREATE INDEX CONCURRENTLY audit_log_bucket_occurred_at ON audit_log (retention_bucket, occurred_at);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS audit_log_bucket_occurred_at;
