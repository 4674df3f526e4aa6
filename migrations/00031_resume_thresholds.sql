-- +goose Up
-- playhead_progress is the one rule of where a position leaves a member in a media, with
-- media.Completion.State as its Go twin: 2 (finished) at or past the completion point
-- (playhead_completion_point, the maximum) or the start of the credits; else 0 (no resume
-- point: not listed, plays from the start) for media shorter than min_duration_ms or a
-- position below min_ratio of the duration or min_ms, whichever comes first (min_ms alone when
-- the duration is unknown), and never at 0, the position an open writes; else 1 (in progress:
-- listed, resumes there). The flush stores it in playback.finished and playback.resumable,
-- which the continue-watching list, up next, course progress and the audience rollup read.
-- media.credits_start_ms belongs to migration 00030 (markers); IF NOT EXISTS keeps this file
-- whole on its own, and the Down section leaves the column to 00030.
ALTER TABLE media ADD COLUMN IF NOT EXISTS credits_start_ms bigint;

CREATE FUNCTION playhead_progress(position_ms bigint, duration_ms bigint, credits_start_ms bigint,
                                  ratio double precision, tail_ms bigint,
                                  min_ratio double precision, min_ms bigint, min_duration_ms bigint)
RETURNS smallint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE
    WHEN duration_ms > 0 AND (position_ms >= playhead_completion_point(duration_ms, ratio, tail_ms)
                              OR credits_start_ms > 0 AND position_ms >= credits_start_ms) THEN 2
    WHEN duration_ms > 0 AND duration_ms < min_duration_ms THEN 0
    WHEN position_ms < greatest(CASE WHEN duration_ms > 0 THEN least(min_ms::double precision, duration_ms * min_ratio)
                                     ELSE min_ms END, 1) THEN 0
    ELSE 1
END::smallint;

-- resumable: the row is listed in continue watching and resumes at its position (progress 1).
-- Rows written before it keep being listed (DEFAULT true) until the backfill below, at the
-- default thresholds; each later report recomputes it at the node's settings. marked_at is
-- the event time of the member's last mark by hand (watched or unwatched): a report made
-- before it brings no watched mark (the flush's guard on position covers the rest).
ALTER TABLE playback
    ADD COLUMN resumable boolean NOT NULL DEFAULT true,
    ADD COLUMN marked_at timestamptz;

UPDATE playback p SET resumable = false
FROM media m
WHERE m.id = p.media_id AND NOT p.finished
  AND playhead_progress(p.position_ms, m.duration_ms, m.credits_start_ms, 0.95, 30000, 0.05, 60000, 120000) <> 1;

-- +goose Down
ALTER TABLE playback DROP COLUMN marked_at, DROP COLUMN resumable;
DROP FUNCTION playhead_progress(bigint, bigint, bigint, double precision, bigint, double precision, bigint, bigint);
