-- +goose Up
-- watched_at is when a member's position first reached the media's completion point (see
-- playhead_completion_point). It is set by the flush statement and never cleared: a rewatch
-- moves position_ms back but keeps the mark. collection is the collection the player said the
-- media was opened from (POST /v1/playback/{id}?collection=…); it decides what comes next when
-- a media is placed in several collections. Both are nullable, so adding them rewrites nothing.
ALTER TABLE playback ADD COLUMN watched_at timestamptz;
ALTER TABLE playback ADD COLUMN collection text;

-- finished says the row's current position is at or past the completion point. The flush
-- statement sets it with every position (a rewatch clears it; watched_at stays). The list
-- reads rows in progress and finished rows apart: with finished in the continue-watching
-- index, a member with hundreds of finished lessons reads a page of rows in progress without
-- stepping over them, and the finished ones (which only yield up-next items) in their own run.
-- A constant default adds the column without rewriting the table.
ALTER TABLE playback ADD COLUMN finished boolean NOT NULL DEFAULT false;
DROP INDEX playback_continue_idx;
CREATE INDEX playback_continue_idx ON playback (member_id, finished, event_time DESC, media_id DESC) WHERE NOT hidden;

-- playhead_completion_point is the position (ms) from which a media counts as watched: ratio of
-- the duration or tail_ms before the end, whichever comes first, but never before the middle
-- (a 20 s clip is not "watched" at 0 s because its last 30 s cover all of it). NULL when the
-- duration is unknown: such media are never watched by position. A simple IMMUTABLE SQL
-- function is inlined by the planner, so it costs nothing over writing the expression out.
CREATE FUNCTION playhead_completion_point(duration_ms bigint, ratio double precision, tail_ms bigint)
RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN greatest(least(duration_ms * ratio, duration_ms - tail_ms), duration_ms / 2.0);

-- collection_items is what a collection holds: for each (chapter, position), the newest
-- imported row whose media is READY and public (re-importing a place replaces it once the new
-- media is playable). A filter on collection, chapter or position is pushed below the DISTINCT
-- ON, so reading one collection walks import_rows_placement_idx for that collection only.
CREATE VIEW collection_items AS
SELECT DISTINCT ON (r.collection, r.chapter, r.position)
       r.collection, r.chapter, r.position, r.media_id, r.id AS row_id
FROM import_rows r
JOIN media m ON m.id = r.media_id
WHERE m.status = 'READY' AND m.visibility = 'PUBLIC'
ORDER BY r.collection, r.chapter, r.position, r.id DESC;

-- playback_last_finished is, per member and collection, the member's most recently finished
-- item placed in that collection (by event_time), kept by the flush statement in the same bulk
-- statement as the positions. The continue-watching list reads a member's rows here, one per
-- collection, instead of all its finished playback rows: its cost follows the collections the
-- member finished something in, not the lessons. Rows are written for every collection that
-- places the media; the list keeps a row only while the media still follows that collection
-- and its playback row is the finished one recorded (same event_time).
CREATE TABLE playback_last_finished (
    member_id  bigint      NOT NULL,
    collection text        NOT NULL,
    media_id   bigint      NOT NULL,
    event_time timestamptz NOT NULL,
    PRIMARY KEY (member_id, collection)
);
INSERT INTO playback_last_finished (member_id, collection, media_id, event_time)
SELECT DISTINCT ON (p.member_id, r.collection) p.member_id, r.collection, p.media_id, p.event_time
FROM playback p
JOIN import_rows r ON r.media_id = p.media_id
WHERE p.finished
ORDER BY p.member_id, r.collection, p.event_time DESC, p.media_id DESC;

-- +goose Down
DROP TABLE playback_last_finished;
DROP VIEW collection_items;
DROP FUNCTION playhead_completion_point(bigint, double precision, bigint);
DROP INDEX playback_continue_idx;
CREATE INDEX playback_continue_idx ON playback (member_id, event_time DESC, media_id DESC) WHERE NOT hidden;
ALTER TABLE playback DROP COLUMN finished;
ALTER TABLE playback DROP COLUMN collection;
ALTER TABLE playback DROP COLUMN watched_at;
