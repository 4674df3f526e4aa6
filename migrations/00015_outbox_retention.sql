-- +goose Up
-- The outbox and the webhook deliveries are pruned by age (PLAYHEAD_OUTBOX_RETENTION,
-- webhooks.Retention), in batches that read a batch: each table gets a partial index on the time
-- a row becomes prunable, which holds only the rows that may go.
--
-- A delivery is prunable once it ended (DELIVERED or DEAD), from finished_at: a DEAD delivery
-- an admin retries is QUEUED again and its finished_at cleared. The rows that ended before this
-- migration take their delivered_at, or their creation for the DEAD ones.
ALTER TABLE webhook_deliveries ADD COLUMN finished_at timestamptz;
UPDATE webhook_deliveries SET finished_at = coalesce(delivered_at, created_at) WHERE status IN ('DELIVERED', 'DEAD');
CREATE INDEX webhook_deliveries_finished_idx ON webhook_deliveries (finished_at) WHERE finished_at IS NOT NULL;

-- An outbox row is prunable once relayed (its deliveries made) and none of its deliveries is
-- left; the event stream resumes from it until then.
CREATE INDEX notification_outbox_relayed_idx ON notification_outbox (created_at) WHERE relayed_at IS NOT NULL;

-- outbox_retention holds, per member, the highest outbox id of theirs that was pruned. A
-- stream of that member resuming from an id below it may have missed events, and is told to
-- resync (GET /v1/events); other members' prunes do not concern it.
CREATE TABLE outbox_retention (
    member_id      bigint PRIMARY KEY,
    pruned_through bigint NOT NULL
);

-- +goose Down
DROP TABLE outbox_retention;
DROP INDEX notification_outbox_relayed_idx;
DROP INDEX webhook_deliveries_finished_idx;
ALTER TABLE webhook_deliveries DROP COLUMN finished_at;
