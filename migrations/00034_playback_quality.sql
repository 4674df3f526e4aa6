-- +goose Up
-- media_quality holds the playback-quality counters of the position reports that carry them
-- (package quality): per media, a metric and a bucket, a running sum. Each API node adds its
-- in-memory sums into it every flush period, in one statement (value = value + excluded), and
-- marks the media in audience_dirty; the audience rollup reads a media's few rows into
-- media_audience's quality columns. The playback row stays as narrow as before, so a position
-- update stays HOT whether or not its report carried quality.
--   sessions     bucket 0: sessions that started or failed before their first frame
--   errors       bucket 1–5: fatal errors by code (quality.ErrorCodes, from 1)
--   startup      bucket: time to first frame rounded up to two significant digits (ms), the
--                value a count of sessions
--   rebuffers    bucket 0: rebuffering events
--   rebuffer_ms  bucket 0: time spent rebuffering
--   played_ms    bucket: the rendition's height (0 unknown), the value the time played in it
CREATE TABLE media_quality (
    media_id bigint NOT NULL REFERENCES media (id) ON DELETE CASCADE,
    metric   text   NOT NULL CHECK (metric IN ('sessions', 'errors', 'startup', 'rebuffers', 'rebuffer_ms', 'played_ms')),
    bucket   int    NOT NULL CHECK (bucket >= 0),
    value    bigint NOT NULL CHECK (value >= 0),
    PRIMARY KEY (media_id, metric, bucket)
);

-- The rollup's figures, null until a report carried quality. renditions maps a height (text)
-- to its share of the time played.
ALTER TABLE media_audience
    ADD COLUMN quality_sessions bigint,
    ADD COLUMN startup_p50_ms   int,
    ADD COLUMN startup_p95_ms   int,
    ADD COLUMN rebuffer_ratio   float8,
    ADD COLUMN rebuffers        bigint,
    ADD COLUMN error_rate       float8,
    ADD COLUMN renditions       jsonb;

-- +goose Down
ALTER TABLE media_audience
    DROP COLUMN renditions,
    DROP COLUMN error_rate,
    DROP COLUMN rebuffers,
    DROP COLUMN rebuffer_ratio,
    DROP COLUMN startup_p95_ms,
    DROP COLUMN startup_p50_ms,
    DROP COLUMN quality_sessions;
DROP TABLE media_quality;
