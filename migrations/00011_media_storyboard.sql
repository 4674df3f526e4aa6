-- +goose Up
-- An encode also writes a storyboard (sprite JPEGs and the WebVTT that maps times to
-- their tiles), and records where its video starts in the segments' timestamps, to which
-- captions' X-TIMESTAMP-MAP ties cue time 0. Both NULL for media encoded before (MPEG-TS
-- outputs without a storyboard).
ALTER TABLE media ADD COLUMN storyboard_key text, ADD COLUMN hls_start_us bigint;

-- +goose Down
ALTER TABLE media DROP COLUMN storyboard_key, DROP COLUMN hls_start_us;
