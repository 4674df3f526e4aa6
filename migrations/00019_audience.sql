-- +goose Up
-- What the positions say, rolled up per media by the periodic job kind "audience"
-- (audience.Rollup). The flush marks the media it wrote positions of in audience_dirty (one
-- more statement per batch, in its round trip); each rollup takes the marked media, reads
-- their rows (playback_media_idx) and rewrites their media_audience row, so a period reads
-- only the media with new positions, and a request reads one precomputed row per media.
CREATE TABLE audience_dirty (
    media_id bigint PRIMARY KEY
);

-- media_audience is one media's audience as of computed_at. viewers are the members who played
-- some part of it (a watched bucket), views the members with a playback row (opened, or
-- reported a position); finished those who reached its completion point; watched_buckets the
-- sum of every viewer's watched buckets (watch time = watched_buckets × duration / 100);
-- retention[i] how many viewers watched bucket i (1 % of the video each, from 1).
CREATE TABLE media_audience (
    media_id        bigint PRIMARY KEY REFERENCES media (id) ON DELETE CASCADE,
    views           bigint NOT NULL,
    viewers         bigint NOT NULL,
    finished        bigint NOT NULL,
    watched_buckets bigint NOT NULL,
    retention       bigint[] NOT NULL CHECK (cardinality(retention) = 100),
    computed_at     timestamptz NOT NULL
);

-- +goose Down
DROP TABLE media_audience;
DROP TABLE audience_dirty;
