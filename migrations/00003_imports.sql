-- +goose Up
-- An import is one uploaded spreadsheet; import_rows keeps every data row, accepted or not,
-- so an operator can see what happened to row 137.
CREATE TABLE imports (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    created_by bigint NOT NULL REFERENCES members (id),
    filename   text NOT NULL,
    total_rows integer NOT NULL,
    accepted   integer NOT NULL,
    rejected   integer NOT NULL,
    created_at timestamptz NOT NULL DEFAULT statement_timestamp()
);

CREATE TABLE import_rows (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    import_id     bigint NOT NULL REFERENCES imports (id) ON DELETE CASCADE,
    row_number    integer NOT NULL,
    collection    text NOT NULL,
    chapter       integer,
    position      integer,
    video_url     text NOT NULL,
    media_id      bigint REFERENCES media (id),
    reject_reason text,
    UNIQUE (import_id, row_number),
    CHECK ((media_id IS NULL) <> (reject_reason IS NULL))
);

-- A collection shows, per (chapter, position), the newest imported row whose media is READY:
-- re-importing a placement replaces it once the new media is playable.
CREATE INDEX import_rows_placement_idx ON import_rows (collection, chapter, position, id DESC) WHERE media_id IS NOT NULL;
CREATE INDEX import_rows_media_idx ON import_rows (media_id);

-- +goose Down
DROP TABLE import_rows;
DROP TABLE imports;
