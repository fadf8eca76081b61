-- +goose Up
-- The nonces of accepted signed requests, until their signature's window closes: every replica
-- and every restarted process refuses a request another one already accepted. The in-memory
-- cache stays the first line; this is the shared one. Expired rows are purged by the API.
CREATE TABLE sweeprail.replay_nonce (
    nonce      uuid PRIMARY KEY,
    expires_at timestamptz NOT NULL
);
CREATE INDEX replay_nonce_expires_at ON sweeprail.replay_nonce (expires_at);

-- +goose Down
DROP TABLE sweeprail.replay_nonce;
