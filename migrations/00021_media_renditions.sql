-- +goose Up
-- Watch while it encodes. An encode group's rendition jobs each record the rendition
-- they wrote (hls.Part: its master playlist entry, URIs relative to hls/{media}/), and the
-- media's master playlist is assembled from these rows when it is served, so it gains
-- renditions as they finish. playable_at is when the first rendition that can play was
-- recorded: the media is playable from then on, while its status is still PROCESSING, and
-- READY, as before, once every rendition, the thumbnail and the storyboard are done.
ALTER TABLE media ADD COLUMN playable_at timestamptz;

-- folder is the storage prefix of the rendition's files (hls/{media}/{claim}/): the orphan
-- sweep keeps what a row names. name is the rendition's directory (v0 the highest, audio).
CREATE TABLE media_renditions (
    media_id   bigint NOT NULL REFERENCES media (id) ON DELETE CASCADE,
    name       text NOT NULL,
    folder     text NOT NULL,
    part       jsonb NOT NULL,
    start_us   bigint NOT NULL DEFAULT -1,
    created_at timestamptz NOT NULL DEFAULT statement_timestamp(),
    PRIMARY KEY (media_id, name)
);

-- +goose Down
DROP TABLE media_renditions;
ALTER TABLE media DROP COLUMN playable_at;
