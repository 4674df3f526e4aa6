-- +goose Up
-- A tail piece (migration 00023) is a row holding its bytes only when it is small; a larger one
-- is an object of its own (tus/{id}/tails/{random}/piece) whose row holds its key and size.
-- Every byte of a row goes through the write-ahead log, to replicas and to the archive: with
-- every piece a row, a member sending a part less one byte, then one byte, and again, put
-- almost all of an upload through the log at the rate its requests are allowed (12 PATCHes
-- carrying 48 MiB made 55 MB of WAL in 0.37 s). With the bound a request writes at most
-- 64 KiB of its bytes into rows (tus's maxRowBytes), merges included.
--
-- The object is written before the transaction that inserts its row (the compare-and-set on
-- uploads.upload_offset), removed when that transaction fails, and removed after the commit
-- that deletes its row; what a removal misses is under the upload's folder, which finishing,
-- termination, expiry and the orphan sweep remove. The bound holds for new rows only (NOT
-- VALID): pieces of up to 1 MiB stored before stay readable. Nodes of the earlier version
-- fail a PATCH whose piece passes the bound, and read a tail with an object as moved (409),
-- rather than lose bytes.
ALTER TABLE upload_tail_pieces
    ALTER COLUMN bytes DROP NOT NULL,
    ADD COLUMN object_key text,
    ADD COLUMN object_size bigint,
    ADD CONSTRAINT upload_tail_pieces_bytes_or_object CHECK (
        CASE WHEN bytes IS NULL
            THEN object_key IS NOT NULL AND object_size IS NOT NULL AND object_size > 0
            ELSE object_key IS NULL AND object_size IS NULL
        END),
    ADD CONSTRAINT upload_tail_pieces_object_in_folder CHECK (
        object_key LIKE 'tus/' || upload_id || '/tails/%');
ALTER TABLE upload_tail_pieces
    ADD CONSTRAINT upload_tail_pieces_row_bound CHECK (octet_length(bytes) <= 65536) NOT VALID;

-- +goose Down
-- The earlier version reads no piece objects: the uploads that have one expire now (the
-- expirer removes them with their objects, which their folder holds) and those rows go.
UPDATE uploads SET expires_at = statement_timestamp()
WHERE id IN (SELECT upload_id FROM upload_tail_pieces WHERE object_key IS NOT NULL);
DELETE FROM upload_tail_pieces WHERE object_key IS NOT NULL;
ALTER TABLE upload_tail_pieces
    DROP CONSTRAINT upload_tail_pieces_row_bound,
    DROP CONSTRAINT upload_tail_pieces_object_in_folder,
    DROP CONSTRAINT upload_tail_pieces_bytes_or_object,
    DROP COLUMN object_size,
    DROP COLUMN object_key,
    ALTER COLUMN bytes SET NOT NULL;
