-- +goose Up
-- A media's intro and credits, each a [start, end) span in milliseconds from the start, set by
-- its owner or an admin. Either span is absent (both columns NULL) or whole; a span ends after
-- it starts and, when the duration is known, within it. Completion reads credits_start_ms: a
-- member in the credits has finished the media.
ALTER TABLE media
    ADD COLUMN intro_start_ms   bigint,
    ADD COLUMN intro_end_ms     bigint,
    ADD COLUMN credits_start_ms bigint,
    ADD COLUMN credits_end_ms   bigint,
    ADD CONSTRAINT media_intro_check CHECK (
        (intro_start_ms IS NULL) = (intro_end_ms IS NULL)
        AND intro_start_ms >= 0 AND intro_start_ms < intro_end_ms
        AND (duration_ms IS NULL OR intro_end_ms <= duration_ms)),
    ADD CONSTRAINT media_credits_check CHECK (
        (credits_start_ms IS NULL) = (credits_end_ms IS NULL)
        AND credits_start_ms >= 0 AND credits_start_ms < credits_end_ms
        AND (duration_ms IS NULL OR credits_end_ms <= duration_ms));

-- media_chapters holds a media's chapters: each starts at start_ms and runs to the next one's
-- start (the last to the end). A title is one line of display text: no control characters and
-- no line or paragraph separator, since it is shown in players and written in the chapters
-- JSON a master playlist points at.
CREATE TABLE media_chapters (
    media_id bigint NOT NULL REFERENCES media (id) ON DELETE CASCADE,
    start_ms bigint NOT NULL CHECK (start_ms >= 0),
    title    text   NOT NULL CHECK (title <> '' AND char_length(title) <= 200
                                    AND title !~ '[[:cntrl:]\u2028\u2029]'),
    PRIMARY KEY (media_id, start_ms)
);

-- +goose Down
DROP TABLE media_chapters;
ALTER TABLE media
    DROP CONSTRAINT media_credits_check,
    DROP CONSTRAINT media_intro_check,
    DROP COLUMN credits_end_ms,
    DROP COLUMN credits_start_ms,
    DROP COLUMN intro_end_ms,
    DROP COLUMN intro_start_ms;
