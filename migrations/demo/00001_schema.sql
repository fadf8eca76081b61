-- +goose Up
-- The reference schema of the bundled catalog: a small multi-tenant SaaS's tables that grow
-- without bound. sweeprail's own lease table is not here: it lives in schema sweeprail (the
-- migrations of ../sweeprail/). Indexes that back the sweep predicates are created
-- CONCURRENTLY in migrations of their own, so adding one to a live table never blocks writes.

CREATE TABLE accounts (
    id                    uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    email                 text NOT NULL,
    display_name          text,
    created_at            timestamptz NOT NULL DEFAULT now(),
    deletion_requested_at timestamptz,
    deleted_at            timestamptz,
    CONSTRAINT accounts_email_key UNIQUE (email),
    CONSTRAINT accounts_deleted_after_request CHECK (deleted_at IS NULL OR deletion_requested_at IS NOT NULL)
);

CREATE TABLE email_messages (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id  uuid REFERENCES accounts (id) ON DELETE SET NULL,
    to_address  text NOT NULL,
    subject     text NOT NULL,
    body        text NOT NULL DEFAULT '',
    status      text NOT NULL DEFAULT 'queued',
    attempts    integer NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL DEFAULT now(),
    sent_at     timestamptz,
    CONSTRAINT email_messages_status_check CHECK (status IN ('queued', 'sent', 'failed')),
    CONSTRAINT email_messages_sent_at_check CHECK (status <> 'sent' OR sent_at IS NOT NULL)
);

CREATE TABLE outbox_events (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    aggregate_type text NOT NULL,
    aggregate_id   text NOT NULL,
    event_type     text NOT NULL,
    payload        jsonb NOT NULL DEFAULT '{}',
    created_at     timestamptz NOT NULL DEFAULT now(),
    dispatched_at  timestamptz
);

CREATE TABLE webhook_deliveries (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- The foreign key is the outbox sweep's last line of defence: its keep guard skips
    -- referenced events, and should the guard ever miss one, the delete fails instead of
    -- orphaning a delivery.
    outbox_event_id bigint NOT NULL REFERENCES outbox_events (id),
    endpoint_url    text NOT NULL,
    status          text NOT NULL DEFAULT 'pending',
    attempts        integer NOT NULL DEFAULT 0,
    response_code   integer,
    created_at      timestamptz NOT NULL DEFAULT now(),
    last_attempt_at timestamptz,
    CONSTRAINT webhook_deliveries_status_check CHECK (status IN ('pending', 'success', 'failed', 'dead_letter'))
);

CREATE TABLE audit_log (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- No foreign key to accounts: the audit trail outlives the account it speaks of.
    actor_account_id uuid,
    action           text NOT NULL,
    retention_bucket text NOT NULL DEFAULT 'operational',
    details          jsonb NOT NULL DEFAULT '{}',
    occurred_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT audit_log_retention_bucket_check CHECK (retention_bucket IN ('operational', 'compliance'))
);

CREATE TABLE consent_records (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- NULL once the account is erased: the record is kept, anonymous, until it expires.
    user_id    uuid REFERENCES accounts (id) ON DELETE SET NULL,
    purpose    text NOT NULL,
    granted    boolean NOT NULL,
    granted_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);

CREATE TABLE notifications (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    kind       text NOT NULL,
    body       text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    read_at    timestamptz
);

CREATE TABLE refresh_tokens (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    token_hash bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz,
    CONSTRAINT refresh_tokens_token_hash_key UNIQUE (token_hash)
);

CREATE TABLE idempotency_records (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id       uuid REFERENCES accounts (id) ON DELETE CASCADE,
    idempotency_key  text NOT NULL,
    request_hash     bytea NOT NULL,
    status           text NOT NULL DEFAULT 'in_progress',
    created_at       timestamptz NOT NULL DEFAULT now(),
    -- An in-progress claim is live while its lease lasts; its worker renews it.
    lease_expires_at timestamptz NOT NULL,
    completed_at     timestamptz,
    response_code    integer,
    response_body    jsonb,
    CONSTRAINT idempotency_records_key UNIQUE (account_id, idempotency_key),
    CONSTRAINT idempotency_records_status_check CHECK (status IN ('in_progress', 'completed')),
    CONSTRAINT idempotency_records_completed_check CHECK (status <> 'completed' OR completed_at IS NOT NULL)
);

-- wipe_account erases one account's personal data exactly once. The deleted_at IS NULL guard
-- stands on the UPDATE that claims the row, so when two callers race, READ COMMITTED re-checks
-- it after the first commits and the second wipes nothing and writes no audit or outbox row.
-- +goose StatementBegin
CREATE FUNCTION wipe_account(p_id uuid) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE accounts
       SET email = 'erased+' || id::text || '@invalid',
           display_name = NULL,
           deleted_at = now()
     WHERE id = p_id
       AND deleted_at IS NULL
       AND deletion_requested_at IS NOT NULL;
    IF NOT FOUND THEN
        RETURN false;
    END IF;

    DELETE FROM refresh_tokens WHERE account_id = p_id;
    DELETE FROM notifications WHERE account_id = p_id;
    DELETE FROM idempotency_records WHERE account_id = p_id;
    UPDATE email_messages SET account_id = NULL, to_address = 'erased@invalid' WHERE account_id = p_id;
    UPDATE consent_records SET user_id = NULL WHERE user_id = p_id;

    INSERT INTO audit_log (actor_account_id, action, retention_bucket, details)
    VALUES (NULL, 'ACCOUNT_WIPED', 'compliance', jsonb_build_object('account_id', p_id));
    INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
    VALUES ('account', p_id::text, 'account.wiped', jsonb_build_object('account_id', p_id));
    RETURN true;
END;
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION wipe_account(uuid);
DROP TABLE idempotency_records, refresh_tokens, notifications, consent_records,
    audit_log, webhook_deliveries, outbox_events, email_messages, accounts;
