-- +goose Up
-- The orphan sweep (storage.Sweeper, encodejobs.OrphanRules) looks uploads up by their key.
CREATE INDEX media_source_key_idx ON media (source_key);

-- +goose Down
DROP INDEX media_source_key_idx;
