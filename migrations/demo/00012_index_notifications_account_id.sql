-- +goose NO TRANSACTION
-- +goose Up
-- Backs the cascade from accounts and wipe_account's delete.
CREATE INDEX CONCURRENTLY notifications_account_id ON notifications (account_id);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS notifications_account_id;
