-- +goose Up
-- playhead_progress is the one rule of where a position leaves a member in a media, with
-- media.Completion.State as its Go twin: 2 (finished) at or past the completion point
-- (playhead_completion_point, the maximum) or the start of the credits; else 0 (no resume
-- point: not listed, plays from the start) for media shorter than min_duration_ms or a
-- position below min_ratio of the duration or min_ms, whichever comes first (min_ms alone when
-- the duration is unknown), and never at 0, the position an open writes; else 1 (in progress:
-- listed, resumes there). The flush stores whether it is 2 in playback.finished (the audience
-- rollup and up next read that, through watched_at and playback_last_finished); the
-- continue-watching list and course progress compute it for the rows they read, at the
-- node's thresholds. It is not stored as a column of its own: one more column makes every
-- playback row 8 bytes wider, and fewer position updates find room on their page for a HOT
-- update (TestFlush_PositionUpdatesAreHOT: 93 % instead of 95 %).
-- credits_start_ms is migration 00030's.

CREATE FUNCTION playhead_progress(position_ms bigint, duration_ms bigint, credits_start_ms bigint,
                                  ratio double precision, tail_ms bigint,
                                  min_ratio double precision, min_ms bigint, min_duration_ms bigint)
RETURNS smallint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE
    WHEN duration_ms > 0 AND (position_ms >= playhead_completion_point(duration_ms, ratio, tail_ms)
                              OR credits_start_ms > 0 AND position_ms >= credits_start_ms) THEN 2
    WHEN duration_ms > 0 AND duration_ms < min_duration_ms THEN 0
    WHEN position_ms >= greatest(CASE WHEN duration_ms > 0 THEN least(min_ms::double precision, duration_ms * min_ratio)
                                      ELSE min_ms END, 1) THEN 1
    ELSE 0
END::smallint;

-- marked_at is the event time of the member's last mark by hand (watched or unwatched): a
-- report made before it brings no watched mark (the flush's guard on position covers the
-- rest). NULL, as on rows never marked, it takes no room in the row.
ALTER TABLE playback ADD COLUMN marked_at timestamptz;

-- +goose Down
ALTER TABLE playback DROP COLUMN marked_at;
DROP FUNCTION playhead_progress(bigint, bigint, bigint, double precision, bigint, double precision, bigint, bigint);
