-- +goose Up
-- Resumable uploads (tus 1.0): one row per upload, shared by every API node, so that
-- an upload resumed on another node finds where it stopped. Every byte below upload_offset is
-- stored: in the parts of the storage write parts_id (their list in parts, in order), then in
-- the tail object tail_key (the bytes past the last whole part). Writers move upload_offset
-- forward with a compare-and-set on its old value, under the upload's advisory lock. media_id
-- is set, in the transaction that creates the media and its encode job, when the upload ends.
-- An unfinished upload nobody writes to past expires_at is removed (tus.Expirer).
CREATE TABLE uploads (
    id            text PRIMARY KEY,
    owner_id      bigint NOT NULL REFERENCES members (id),
    upload_length bigint NOT NULL CHECK (upload_length > 0),
    upload_offset bigint NOT NULL DEFAULT 0 CHECK (upload_offset >= 0 AND upload_offset <= upload_length),
    metadata      jsonb NOT NULL,
    title         text NOT NULL,
    visibility    text NOT NULL CHECK (visibility IN ('PUBLIC', 'PRIVATE')),
    source_key    text NOT NULL,
    parts_id      text NOT NULL,
    parts         jsonb NOT NULL DEFAULT '[]',
    next_part     integer NOT NULL DEFAULT 1 CHECK (next_part >= 1),
    tail_key      text,
    tail_size     bigint NOT NULL DEFAULT 0 CHECK (tail_size >= 0),
    media_id      bigint REFERENCES media (id),
    created_at    timestamptz NOT NULL DEFAULT statement_timestamp(),
    updated_at    timestamptz NOT NULL DEFAULT statement_timestamp(),
    expires_at    timestamptz NOT NULL
);

-- A member's unfinished uploads are counted at each creation (PLAYHEAD_UPLOADS_UNFINISHED).
CREATE INDEX uploads_unfinished_owner_idx ON uploads (owner_id) WHERE media_id IS NULL;
-- The expirer reads the oldest expired uploads first.
CREATE INDEX uploads_expires_idx ON uploads (expires_at);

-- +goose Down
DROP TABLE uploads;
