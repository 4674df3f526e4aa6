-- +goose Up
-- The history retention (history.Expire, PLAYHEAD_HISTORY_RETENTION) removes the playback rows
-- not watched for longer than the retention, oldest first, a batch at a time. It finds them by
-- listed_at, the hour of event_time (migration 00014), not by event_time: a flush rewrites
-- event_time on every position, and an index on it would turn each of those HOT updates into
-- one that writes an index entry; listed_at changes once an hour for a player reporting every
-- 5 s, when playback_continue_idx changes anyway. Selecting by listed_at < cutoff removes a row
-- up to an hour later than event_time would, never earlier.
CREATE INDEX playback_listed_idx ON playback (listed_at);

-- started_at is when the row was first written: the flush that brought the member's first
-- report of the media (within the flush interval of it). The export's "started" reads it.
-- Rows written before the column existed have none (NULL: not known). No flush statement
-- names it, and it is not indexed, so a position update still changes no indexed column.
ALTER TABLE playback ADD COLUMN started_at timestamptz;
ALTER TABLE playback ALTER COLUMN started_at SET DEFAULT statement_timestamp();

-- +goose Down
ALTER TABLE playback DROP COLUMN started_at;
DROP INDEX playback_listed_idx;
