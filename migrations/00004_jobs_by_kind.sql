-- +goose Up
-- The queue core (jobqueue/) knows jobs, not media: a job names the row it is about by an id
-- its kind reads (a media id for encode and ingest, an outbox row for webhook delivery), so the
-- column is generic and has no foreign key into one kind's table.
ALTER TABLE jobs RENAME COLUMN media_id TO subject_id;
ALTER TABLE jobs DROP CONSTRAINT jobs_media_id_fkey;
ALTER INDEX jobs_media_idx RENAME TO jobs_subject_idx;

-- Each runner claims one kind, so both claimable shapes are indexed by kind first: an idle
-- kind's poll no longer walks past every queued job of the others (with 100 000 encode jobs
-- queued, each ingest poll was a scan of 8–11 ms; see docs/benchmarks/runs/2026-11-30-claim-indexed-by-kind.md). The rescuer's
-- sweep of expired last attempts uses the processing index too (few rows are PROCESSING).
DROP INDEX jobs_pending_idx;
DROP INDEX jobs_processing_idx;
CREATE INDEX jobs_pending_kind_idx ON jobs (kind, available_at, id) WHERE status = 'PENDING';
CREATE INDEX jobs_processing_kind_idx ON jobs (kind, lease_until) WHERE status = 'PROCESSING';

-- +goose Down
DROP INDEX jobs_processing_kind_idx;
DROP INDEX jobs_pending_kind_idx;
CREATE INDEX jobs_processing_idx ON jobs (lease_until) WHERE status = 'PROCESSING';
CREATE INDEX jobs_pending_idx ON jobs (available_at, id) WHERE status = 'PENDING';
ALTER INDEX jobs_subject_idx RENAME TO jobs_media_idx;
ALTER TABLE jobs ADD CONSTRAINT jobs_media_id_fkey FOREIGN KEY (subject_id) REFERENCES media (id);
ALTER TABLE jobs RENAME COLUMN subject_id TO media_id;
