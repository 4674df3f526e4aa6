-- +goose Up
-- The audience's figures beyond the counts are released with noise (audience.Rollup): finished,
-- watched_buckets and retention now hold the noisy figures of the last release, and
-- released_viewers the viewers they were computed over. A rollup writes views and viewers every
-- time, and a new release only when the viewers have grown past released_viewers by a step
-- (the package doc says why). computed_at is when a figure the owner reads last changed.
--
-- The rows written before hold exact figures, which an owner with a few accounts of his own
-- could read one viewer's ranges from: they are deleted, and their media marked, so the next
-- rollup writes them again with noise (until then the route answers as before a first rollup).
ALTER TABLE media_audience ADD COLUMN released_viewers bigint NOT NULL DEFAULT 0 CHECK (released_viewers >= 0);
INSERT INTO audience_dirty (media_id) SELECT media_id FROM media_audience ON CONFLICT DO NOTHING;
DELETE FROM media_audience;

-- +goose Down
-- The rows hold noisy figures the code before this migration would read as exact ones: they
-- are deleted and their media marked, for its rollup to write them again.
INSERT INTO audience_dirty (media_id) SELECT media_id FROM media_audience ON CONFLICT DO NOTHING;
DELETE FROM media_audience;
ALTER TABLE media_audience DROP COLUMN released_viewers;
