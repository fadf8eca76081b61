-- +goose NO TRANSACTION
-- +goose Up
-- Backs email-messages/failed: status='failed' AND created_at < cutoff.
CREATE INDEX CONCURRENTLY email_messages_created_at_failed ON email_messages (created_at) WHERE status = 'failed';

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS email_messages_created_at_failed;
