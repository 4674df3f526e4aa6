-- +goose Up
-- A position update touches no index (a HOT update), so the one PostgreSQL spends
-- its CPU on the row alone. Every flush rewrote event_time, and event_time was a key of
-- playback_continue_idx: each update inserted an entry into that index and into the primary
-- key's, and wrote both to the WAL. The list now finds a member's rows by listed_at, the hour
-- of event_time, which changes once an hour for a player reporting every 5 s, and sorts a
-- bucket's few rows by event_time (an incremental sort). listed_at is a stored generated
-- column, so every writer keeps it right; when a flush leaves it equal, PostgreSQL sees no
-- indexed column changed. fillfactor 80 leaves each page room for the new versions HOT needs
-- on the same page (ADD COLUMN … STORED rewrites the table, with it).
CREATE FUNCTION playhead_list_bucket(t timestamptz)
RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN to_timestamp(floor(extract(epoch FROM t) / 3600) * 3600);

ALTER TABLE playback SET (fillfactor = 80);
ALTER TABLE playback ADD COLUMN listed_at timestamptz NOT NULL GENERATED ALWAYS AS (playhead_list_bucket(event_time)) STORED;
DROP INDEX playback_continue_idx;
CREATE INDEX playback_continue_idx ON playback (member_id, finished, listed_at DESC) WHERE NOT hidden;

-- +goose Down
DROP INDEX playback_continue_idx;
ALTER TABLE playback DROP COLUMN listed_at;
ALTER TABLE playback RESET (fillfactor);
DROP FUNCTION playhead_list_bucket(timestamptz);
CREATE INDEX playback_continue_idx ON playback (member_id, finished, event_time DESC, media_id DESC) WHERE NOT hidden;
