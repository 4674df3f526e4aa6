-- +goose Up
-- Members are identified by the JWT subject. Rows are created when a member first owns media
-- (an upload or an admin registration), never on the playback path.
CREATE TABLE members (
    id         bigint PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT statement_timestamp()
);

CREATE TABLE media (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    owner_id      bigint NOT NULL REFERENCES members (id),
    title         text NOT NULL,
    status        text NOT NULL CHECK (status IN ('UPLOADED', 'PROCESSING', 'READY', 'FAILED')),
    visibility    text NOT NULL DEFAULT 'PUBLIC' CHECK (visibility IN ('PUBLIC', 'PRIVATE')),
    duration_ms   bigint CHECK (duration_ms IS NULL OR duration_ms > 0),
    source_key    text,
    hls_key       text,
    thumbnail_key text,
    created_at    timestamptz NOT NULL DEFAULT statement_timestamp(),
    updated_at    timestamptz NOT NULL DEFAULT statement_timestamp()
);

CREATE INDEX media_owner_idx ON media (owner_id);

-- playback is the write-behind target. Every key contains member_id so it can be sharded by
-- member (Citus) later; there is deliberately no foreign key to members, because a bulk flush
-- must never fail as a whole for one member row. media_id is validated before buffering.
CREATE TABLE playback (
    member_id   bigint NOT NULL,
    media_id    bigint NOT NULL REFERENCES media (id),
    position_ms integer NOT NULL CHECK (position_ms >= 0),
    event_time  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    hidden      boolean NOT NULL DEFAULT false,
    PRIMARY KEY (member_id, media_id)
);

-- The continue-watching list: newest first, keyset pagination on (event_time, media_id).
CREATE INDEX playback_continue_idx ON playback (member_id, event_time DESC, media_id DESC) WHERE NOT hidden;

-- +goose Down
DROP TABLE playback;
DROP TABLE media;
DROP TABLE members;
