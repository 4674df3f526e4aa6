-- +goose Up
-- GET /v1/events reads a member's outbox rows after the last one it sent (or the one named by
-- Last-Event-ID): one index range read per wake.
CREATE INDEX notification_outbox_member_idx ON notification_outbox (member_id, id);

-- +goose Down
DROP INDEX notification_outbox_member_idx;
