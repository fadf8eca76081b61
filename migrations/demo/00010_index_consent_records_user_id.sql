-- +goose NO TRANSACTION
-- +goose Up
-- Backs the foreign key to accounts and wipe_account's update.
CREATE INDEX CONCURRENTLY consent_records_user_id ON consent_records (user_id);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS consent_records_user_id;
