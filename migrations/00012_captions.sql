-- +goose Up
-- A media item's caption tracks. Each track's files (its segmented WebVTT, media
-- playlist and whole normalised file) are stored under folder, hls/{media}/captions-{token}/,
-- written before the row: a folder no row names is an orphan, removed by the orphan sweep once
-- older than its grace. The master playlist lists the tracks in id order; NAME must differ
-- within the group (RFC 8216 4.3.4.1.1), hence one label per media item.
CREATE TABLE captions (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    media_id   bigint NOT NULL REFERENCES media (id) ON DELETE CASCADE,
    language   text NOT NULL CHECK (language <> '' AND length(language) <= 35),
    label      text NOT NULL CHECK (label <> '' AND char_length(label) <= 100 AND strpos(label, '"') = 0),
    folder     text NOT NULL UNIQUE,
    cues       integer NOT NULL CHECK (cues > 0),
    created_by bigint NOT NULL,
    created_at timestamptz NOT NULL DEFAULT statement_timestamp(),
    CONSTRAINT captions_label_key UNIQUE (media_id, label)
);

-- +goose Down
DROP TABLE captions;
