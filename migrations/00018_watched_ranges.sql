-- +goose Up
-- The parts of a video each member actually played, kept with the playback row as a
-- bitmap of 100 buckets (1 % of the video each), merged with OR. It is written by the flush
-- from two consecutive reports: the row's last one (position_ms, event_time, watched_bucket)
-- and the new one. Two reports at most `within` apart, moving forward at no more than twice
-- real time (plus a second), mark every bucket between them as watched; any other pair (a
-- seek, a pause longer than that) marks only the bucket the new report landed in, and a
-- report older than the row's marks nothing. The window is twice the players' 5 s report
-- interval plus the flush interval (15 s by default), because the buffer keeps only the last
-- of the reports one flush gathers.
-- No column here is indexed, so a position update stays a HOT update (migration 00014).
ALTER TABLE playback ADD COLUMN watched bit(100);
-- watched_bucket is the bucket of the last report (position_ms), NULL when it was not recorded
-- (ranges off, duration unknown).
ALTER TABLE playback ADD COLUMN watched_bucket smallint CHECK (watched_bucket BETWEEN 0 AND 99);

-- The rollups read a media's rows (audience.Rollup); the index changes only when a row is
-- inserted, never on a position update.
CREATE INDEX playback_media_idx ON playback (media_id);

-- playhead_watch_range is the buckets from_bucket to to_bucket (0 is the first, the leftmost bit).
CREATE FUNCTION playhead_watch_range(from_bucket int, to_bucket int)
RETURNS bit(100)
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN ((~B'0'::bit(100)) << (99 - (to_bucket - from_bucket))) >> from_bucket;

-- playhead_watched is bits with the new report's part marked (see above); within is how far
-- apart two reports may be and still be consecutive (the flush passes twice the report
-- interval plus its own interval: playback.Store.WatchedWithin).
CREATE FUNCTION playhead_watched(bits bit(100), old_bucket smallint, old_pos int, old_at timestamptz,
                                 new_bucket smallint, new_pos int, new_at timestamptz, within interval)
RETURNS bit(100)
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE
    WHEN new_bucket IS NULL THEN bits
    WHEN old_bucket IS NOT NULL AND new_bucket >= old_bucket AND new_at > old_at
         AND new_at - old_at <= within
         AND new_pos >= old_pos AND new_pos - old_pos <= 2000 * extract(epoch FROM new_at - old_at) + 1000
        THEN coalesce(bits, B'0'::bit(100)) | playhead_watch_range(old_bucket, new_bucket)
    ELSE coalesce(bits, B'0'::bit(100)) | playhead_watch_range(new_bucket, new_bucket)
END;

-- +goose Down
DROP FUNCTION playhead_watched(bit(100), smallint, int, timestamptz, smallint, int, timestamptz, interval);
DROP FUNCTION playhead_watch_range(int, int);
DROP INDEX playback_media_idx;
ALTER TABLE playback DROP COLUMN watched_bucket;
ALTER TABLE playback DROP COLUMN watched;
