-- +goose Up
-- The xAPI relay (package xapi) marks each completion row of the outbox once it made its
-- statement, in the same transaction, like the webhook relay's relayed_at: the two relays run
-- apart, so each keeps its own mark. Only the completion kinds are ever relayed to a Learning
-- Record Store, so the index holds only those not yet relayed (and, while xAPI is off, until
-- the event history's retention removes them).
ALTER TABLE notification_outbox ADD COLUMN xapi_relayed_at timestamptz;
CREATE INDEX notification_outbox_xapi_unrelayed_idx ON notification_outbox (id)
    WHERE xapi_relayed_at IS NULL AND kind IN ('playback_completed', 'collection_completed');

-- One statement per completion, built when relayed and sent as stored, so that every attempt
-- (and an admin retry) sends the same content under the same id: a Learning Record Store
-- answers a statement id it already has with 204 or 409 and keeps the first. The row is the
-- subject of its xapi_statement job; it is deleted once the store accepted it, kept DEAD
-- (dead_at) for an admin retry until the event history's retention, and deleted with its
-- member's other rows at an erasure. No foreign key to the outbox: its retention prunes the
-- outbox row whatever became of the statement.
CREATE TABLE xapi_statements (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    outbox_id    bigint NOT NULL UNIQUE,
    member_id    bigint NOT NULL,
    statement_id uuid NOT NULL,
    body         jsonb NOT NULL,
    status       text NOT NULL DEFAULT 'QUEUED' CHECK (status IN ('QUEUED', 'DEAD')),
    dead_at      timestamptz,
    created_at   timestamptz NOT NULL DEFAULT statement_timestamp(),
    CHECK ((status = 'DEAD') = (dead_at IS NOT NULL))
);

CREATE INDEX xapi_statements_member_idx ON xapi_statements (member_id);
CREATE INDEX xapi_statements_dead_idx ON xapi_statements (dead_at) WHERE dead_at IS NOT NULL;

-- +goose Down
DROP TABLE xapi_statements;
DROP INDEX notification_outbox_xapi_unrelayed_idx;
ALTER TABLE notification_outbox DROP COLUMN xapi_relayed_at;
