-- +goose NO TRANSACTION
-- +goose Up
-- Backs outbox/dispatched: dispatched_at IS NOT NULL AND dispatched_at < cutoff.
CREATE INDEX CONCURRENTLY outbox_events_dispatched_at ON outbox_events (dispatched_at) WHERE dispatched_at IS NOT NULL;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS outbox_events_dispatched_at;
