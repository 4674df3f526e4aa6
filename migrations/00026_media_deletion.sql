-- +goose Up
-- A deleted media is DELETED from the request that deletes it until its deletion job has
-- removed its objects and rows, the row last: every read treats it as missing, and every
-- write of the media pipeline refuses it (a rendition job that finishes late records nothing).
ALTER TABLE media DROP CONSTRAINT media_status_check;
ALTER TABLE media ADD CONSTRAINT media_status_check
    CHECK (status IN ('UPLOADED', 'PROCESSING', 'READY', 'FAILED', 'DELETED'));

-- An imported row whose media was deleted keeps its report (collection, place, video URL) but
-- no longer points at the media: media_deleted_at says when it lost it. The collection loses
-- the lesson, since collection_items reads only rows with a READY media.
ALTER TABLE import_rows ADD COLUMN media_deleted_at timestamptz;
ALTER TABLE import_rows DROP CONSTRAINT import_rows_check;
ALTER TABLE import_rows ADD CONSTRAINT import_rows_check CHECK (
    CASE WHEN media_deleted_at IS NULL
        THEN (media_id IS NULL) <> (reject_reason IS NULL)
        ELSE media_id IS NULL AND reject_reason IS NULL
    END);

-- The deletion job removes the rows that name the media; playback_last_finished is keyed by
-- member and collection, so without this index that delete reads the whole table.
CREATE INDEX playback_last_finished_media_idx ON playback_last_finished (media_id);

-- +goose Down
DROP INDEX playback_last_finished_media_idx;
ALTER TABLE import_rows DROP CONSTRAINT import_rows_check;
UPDATE import_rows SET reject_reason = 'media deleted' WHERE media_deleted_at IS NOT NULL;
ALTER TABLE import_rows DROP COLUMN media_deleted_at;
ALTER TABLE import_rows ADD CONSTRAINT import_rows_check CHECK ((media_id IS NULL) <> (reject_reason IS NULL));
UPDATE media SET status = 'FAILED', failure_reason = 'deleted' WHERE status = 'DELETED';
ALTER TABLE media DROP CONSTRAINT media_status_check;
ALTER TABLE media ADD CONSTRAINT media_status_check CHECK (status IN ('UPLOADED', 'PROCESSING', 'READY', 'FAILED'));
