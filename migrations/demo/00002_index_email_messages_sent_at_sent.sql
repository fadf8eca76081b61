-- +goose NO TRANSACTION
-- +goose Up
-- Backs email-messages/sent: status='sent' AND sent_at < cutoff.
CREATE INDEX CONCURRENTLY email_messages_sent_at_sent ON email_messages (sent_at) WHERE status = 'sent';

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS email_messages_sent_at_sent;
