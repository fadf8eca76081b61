-- +goose NO TRANSACTION
-- +goose Up
-- Backs the cascade from accounts and wipe_account's delete.
CREATE INDEX CONCURRENTLY refresh_tokens_account_id ON refresh_tokens (account_id);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS refresh_tokens_account_id;
