-- +goose Up
-- GET /v1/media?owner=me lists a member's uploads newest first, paged by (created_at, id): one
-- index range read per page. It replaces media_owner_idx, whose key is its prefix (the
-- foreign key's checks and any lookup by owner use this one as well).
CREATE INDEX media_owner_created_idx ON media (owner_id, created_at DESC, id DESC);
DROP INDEX media_owner_idx;

-- +goose Down
CREATE INDEX media_owner_idx ON media (owner_id);
DROP INDEX media_owner_created_idx;
