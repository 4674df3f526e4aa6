-- +goose Up
-- Issue 33: playhead_list_bucket (migration 00014) computes the stored listed_at of every
-- playback row the flush writes, and its body called extract(epoch FROM timestamptz), which
-- is STABLE (other fields of it depend on the time zone). PostgreSQL inlines a SQL function
-- only when its body is as immutable as the function says it is, so every row written ran the
-- function through its own little executor (fmgr_sql), plus a numeric-to-text-to-float
-- conversion for to_timestamp: a perf profile of BenchmarkUpsert put 38 % of the database's
-- CPU there. date_bin is IMMUTABLE and gives the same hour for every time after 1970 (the
-- body is replaced in place: the column, its index and the stored values stay as they are).
CREATE OR REPLACE FUNCTION playhead_list_bucket(t timestamptz)
RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN date_bin('1 hour', t, timestamptz '1970-01-01 00:00:00+00');

-- +goose Down
CREATE OR REPLACE FUNCTION playhead_list_bucket(t timestamptz)
RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN to_timestamp(floor(extract(epoch FROM t) / 3600) * 3600);
