-- +goose NO TRANSACTION
-- +goose Up
-- Backs the ON DELETE SET NULL of accounts and wipe_account's update.
CREATE INDEX CONCURRENTLY email_messages_account_id ON email_messages (account_id);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS email_messages_account_id;
