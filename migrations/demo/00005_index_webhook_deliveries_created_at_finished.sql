-- +goose NO TRANSACTION
-- +goose Up
-- Backs webhook-deliveries/finished: status IN ('success','dead_letter') AND created_at < cutoff.
CREATE INDEX CONCURRENTLY webhook_deliveries_created_at_finished ON webhook_deliveries (created_at) WHERE status IN ('success', 'dead_letter');

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS webhook_deliveries_created_at_finished;
