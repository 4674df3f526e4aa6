-- +goose Up
-- An endpoint an administrator registered to receive events. The secret is the HMAC key of the
-- Standard Webhooks signature: it must be readable to sign, so it is stored as is (shown to the
-- administrator once, at registration, and never by the API again).
CREATE TABLE webhook_endpoints (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    url        text NOT NULL,
    events     text[] NOT NULL CHECK (cardinality(events) > 0),
    secret     bytea NOT NULL,
    created_by bigint NOT NULL,
    created_at timestamptz NOT NULL DEFAULT statement_timestamp()
);

-- The relay marks each outbox row once it made its deliveries (in the same transaction), so
-- rows still to relay are a small index. The rows written before this migration are marked
-- relayed now: no endpoint existed, there is nothing to deliver, and the relay need not walk
-- the whole history on its first start.
ALTER TABLE notification_outbox ADD COLUMN relayed_at timestamptz;
UPDATE notification_outbox SET relayed_at = created_at;
CREATE INDEX notification_outbox_unrelayed_idx ON notification_outbox (id) WHERE relayed_at IS NULL;

-- One delivery per (event, endpoint). Deliveries to one endpoint about one media item form a
-- chain in outbox order: only the oldest unfinished one has a job (QUEUED); the others WAIT
-- until it is DELIVERED or DEAD, which enqueues the next (see webhooks/relay.go).
CREATE TABLE webhook_deliveries (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    endpoint_id  bigint NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    outbox_id    bigint NOT NULL REFERENCES notification_outbox (id),
    media_id     bigint NOT NULL,
    status       text NOT NULL DEFAULT 'WAITING' CHECK (status IN ('WAITING', 'QUEUED', 'DELIVERED', 'DEAD')),
    job_id       bigint,
    event_at     timestamptz NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT statement_timestamp(),
    delivered_at timestamptz,
    UNIQUE (outbox_id, endpoint_id),
    CHECK ((status = 'WAITING') = (job_id IS NULL))
);

CREATE INDEX webhook_deliveries_chain_idx ON webhook_deliveries (endpoint_id, media_id, outbox_id) WHERE status IN ('WAITING', 'QUEUED');
CREATE INDEX webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id, id DESC);

-- +goose Down
DROP TABLE webhook_deliveries;
DROP INDEX notification_outbox_unrelayed_idx;
ALTER TABLE notification_outbox DROP COLUMN relayed_at;
DROP TABLE webhook_endpoints;
