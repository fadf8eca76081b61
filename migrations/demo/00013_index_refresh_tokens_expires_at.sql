-- +goose NO TRANSACTION
-- +goose Up
-- Backs refresh-tokens/expired: expires_at < cutoff.
CREATE INDEX CONCURRENTLY refresh_tokens_expires_at ON refresh_tokens (expires_at);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS refresh_tokens_expires_at;
