-- +goose NO TRANSACTION
-- +goose Up
-- Backs the outbox keep guard (NOT EXISTS a delivery) and the foreign key check on every outbox delete.
CREATE INDEX CONCURRENTLY webhook_deliveries_outbox_event_id ON webhook_deliveries (outbox_event_id);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS webhook_deliveries_outbox_event_id;
