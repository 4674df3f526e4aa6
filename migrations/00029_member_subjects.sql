-- +goose Up
-- member_subject_ids hands out the ids of members known by a provider's (issuer, subject). It
-- starts at 2^40 because in the shared-secret mode a token's numeric subject is the member id
-- itself, chosen by whoever mints the token: ids below 2^40 (a trillion) stay theirs, so a
-- cluster that moves to a provider, or runs both modes at once, never hands a provider's
-- member an id a secret-mode token already names. 2^63 - 2^40 ids remain above.
CREATE SEQUENCE member_subject_ids AS bigint START WITH 1099511627776 MINVALUE 1099511627776;

-- member_subjects maps a provider's (issuer, subject) to the internal member id every other
-- table is keyed by, one to one. A row is created on first sight (members.Resolver), with the
-- member's row in the same statement, or by `playhead members link` for a member of the
-- shared-secret mode. The pair is personal data: an erasure deletes the row (package erasure)
-- and keeps only its digest in member_erasures. The bounds are the largest subject and issuer
-- the providers in use emit with room to spare (OIDC caps sub at 255 ASCII characters).
CREATE TABLE member_subjects (
    issuer     text        NOT NULL CHECK (octet_length(issuer) BETWEEN 1 AND 2048),
    subject    text        NOT NULL CHECK (octet_length(subject) BETWEEN 1 AND 255),
    member_id  bigint      NOT NULL UNIQUE REFERENCES members (id),
    created_at timestamptz NOT NULL DEFAULT statement_timestamp(),
    PRIMARY KEY (issuer, subject)
);

-- playhead_subject_digest is the one spelling of the digest an erasure record keeps of the
-- member's (issuer, subject): SHA-256 of the issuer, a NUL byte, the subject (the NUL, which
-- neither holds, keeps ("a", "bc") and ("ab", "c") apart). STABLE, not IMMUTABLE: convert_to is
-- STABLE, and the planner inlines a SQL function only when its body is no more volatile than
-- it is declared (playback.TestSQLFunctions_InlinedByThePlanner).
CREATE FUNCTION playhead_subject_digest(issuer text, subject text) RETURNS bytea
LANGUAGE sql STABLE STRICT PARALLEL SAFE
RETURN sha256(convert_to(issuer, 'UTF8') || '\x00'::bytea || convert_to(subject, 'UTF8'));

-- subject_digest is the erased member's playhead_subject_digest (NULL: the member had no
-- subject, a shared-secret member): a token of that subject issued before erased_at is refused,
-- one issued after it maps to a new member. Several records may share a digest (the person
-- signed up again and was erased again).
ALTER TABLE member_erasures ADD COLUMN subject_digest bytea;
CREATE INDEX member_erasures_subject_idx ON member_erasures (subject_digest, erased_at) WHERE subject_digest IS NOT NULL;

-- +goose Down
DROP INDEX member_erasures_subject_idx;
ALTER TABLE member_erasures DROP COLUMN subject_digest;
DROP FUNCTION playhead_subject_digest(text, text);
DROP TABLE member_subjects;
DROP SEQUENCE member_subject_ids;
