-- +goose Up
-- The tail of a resumable upload (the bytes past its last whole part) as append-only pieces:
-- each request that does not fill a part inserts only the bytes it brought, in the
-- transaction of its compare-and-set on uploads.upload_offset, so that a writer that lost the
-- race (or its lock) rolls its piece back with it. The request that fills a part reads the
-- pieces once, stores the part, and deletes them in the part's commit. Each byte is written
-- once as a piece, read once and written once as a part, whatever the size of the requests;
-- a tail object rewritten whole by every request (uploads.tail_key) costs a request the whole
-- tail, read and written: 100 PATCHes of 1 byte on a tail of 8 MiB - 200 B move 800 MiB.
--
-- The pieces of an upload hold less than a part (8 MiB) and are at most tus's maxTailPieces
-- rows: more are merged into a few. tail_size is their bytes, tail_pieces their count; a row
-- whose tail_key is set has a tail object of tail_size bytes and no pieces (one an earlier
-- version wrote). Nodes of that version fail a PATCH on an upload with pieces (their tail
-- object has no key) rather than lose its bytes.
CREATE TABLE upload_tail_pieces (
    upload_id    text NOT NULL REFERENCES uploads (id) ON DELETE CASCADE,
    start_offset bigint NOT NULL CHECK (start_offset >= 0),
    bytes        bytea NOT NULL CHECK (octet_length(bytes) > 0),
    PRIMARY KEY (upload_id, start_offset)
);
-- The bytes are video, compressed already: stored out of line without PostgreSQL's attempt to
-- compress them again.
ALTER TABLE upload_tail_pieces ALTER COLUMN bytes SET STORAGE EXTERNAL;

ALTER TABLE uploads ADD COLUMN tail_pieces integer NOT NULL DEFAULT 0 CHECK (tail_pieces >= 0);

-- +goose Down
-- The bytes of unfinished uploads' tails go with the table: those uploads cannot go on.
ALTER TABLE uploads DROP COLUMN tail_pieces;
DROP TABLE upload_tail_pieces;
