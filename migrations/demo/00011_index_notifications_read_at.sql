-- +goose NO TRANSACTION
-- +goose Up
-- Backs notifications/read: read_at IS NOT NULL AND read_at < cutoff.
CREATE INDEX CONCURRENTLY notifications_read_at ON notifications (read_at) WHERE read_at IS NOT NULL;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS notifications_read_at;
