-- +goose Up
-- finished_at is the event time of the finish a finished row is in: set when the row goes from
-- not finished to finished (a report at or past the completion point or in the credits, a mark
-- watched), kept while it stays finished, NULL while it is not. The flush and the marks tell a
-- finish of their own by it (RETURNING gives only the new row): the row they wrote has
-- finished_at equal to their own report's event time exactly when they made the finish. NULL
-- on every row in progress, it takes no room there: only finished rows are 8 bytes wider.
ALTER TABLE playback ADD COLUMN finished_at timestamptz;
UPDATE playback SET finished_at = coalesce(watched_at, event_time) WHERE finished;

-- playback_completions holds the finishes the flush and the marks made, written in the
-- transaction of the finish, until package completion moves them into notification_outbox
-- (playback_completed) under the member's row lock, which the flush does not take. The key
-- (member, media, finish) makes a finish one row whatever writes it again. Every key holds
-- member_id: the table is written by the flush with playback, so it shards like it (Citus).
CREATE TABLE playback_completions (
    id          bigint GENERATED ALWAYS AS IDENTITY,
    member_id   bigint      NOT NULL,
    media_id    bigint      NOT NULL,
    finished_at timestamptz NOT NULL,
    position_ms bigint      NOT NULL,
    duration_ms bigint,
    how         text        NOT NULL CHECK (how IN ('position', 'credits', 'marked')),
    PRIMARY KEY (member_id, id),
    UNIQUE (member_id, media_id, finished_at)
);

-- collection_completions is each collection.completed announced: a collection is complete for
-- a member when every item is finished, and that completion is the latest finish among them
-- (completed_at), so one key however many of its finishes are moved, and a new key once an
-- item is finished again after being unfinished.
CREATE TABLE collection_completions (
    member_id    bigint      NOT NULL,
    collection   text        NOT NULL,
    completed_at timestamptz NOT NULL,
    PRIMARY KEY (member_id, collection, completed_at)
);

-- +goose Down
DROP TABLE collection_completions;
DROP TABLE playback_completions;
ALTER TABLE playback DROP COLUMN finished_at;
