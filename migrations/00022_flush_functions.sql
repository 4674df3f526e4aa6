-- +goose Up
-- The flush statement calls these functions once per playback row it writes, so
-- what they cost is paid per position. The bodies are replaced in place: the columns, the
-- index and the stored values stay as they are, for every value gives the same result.
--
-- playhead_list_bucket (migration 00014) computes the stored listed_at. Its first body called
-- extract(epoch FROM timestamptz), which is STABLE (other fields of it depend on the time
-- zone), and PostgreSQL inlines a SQL function only when its body is as immutable as the
-- function says it is: every row ran it through an executor of its own (fmgr_sql), plus a
-- numeric-to-text-to-float conversion for to_timestamp. A perf profile of BenchmarkUpsert put
-- 38 % of the database's CPU there. date_bin is IMMUTABLE and gives the same hour for every
-- time a server's clock gives (compared on random times from 1900 to 2026 under several time
-- zones, and ±infinity). Far outside that they differ: from the year 13382 the old body put
-- the last microsecond of an hour into the next one (numeric rounding), and from 294247
-- date_bin fails where the old body answered.
CREATE OR REPLACE FUNCTION playhead_list_bucket(t timestamptz)
RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN date_bin('1 hour', t, timestamptz '1970-01-01 00:00:00+00');

-- playhead_completion_point (migration 00007) divided by the numeric 2.0, so the middle was a
-- numeric, converted to double precision through its text form for greatest(): 3 % of the
-- database's CPU. A duration is far below 2^53 ms, where half of it is exact in a double, so
-- the point is the same (and the same as media.Completion.Point's in Go).
CREATE OR REPLACE FUNCTION playhead_completion_point(duration_ms bigint, ratio double precision, tail_ms bigint)
RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN greatest(least(duration_ms * ratio, duration_ms - tail_ms), duration_ms / 2.0::double precision);

-- +goose Down
CREATE OR REPLACE FUNCTION playhead_completion_point(duration_ms bigint, ratio double precision, tail_ms bigint)
RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN greatest(least(duration_ms * ratio, duration_ms - tail_ms), duration_ms / 2.0);

CREATE OR REPLACE FUNCTION playhead_list_bucket(t timestamptz)
RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN to_timestamp(floor(extract(epoch FROM t) / 3600) * 3600);
