-- +goose Up
ALTER TABLE media ADD COLUMN failure_reason text;

-- jobs is the durable queue of the media pipeline (encode, and later ingest). A claim is a
-- fresh claim_token plus a lease; every terminal UPDATE checks both, so a worker whose lease
-- expired cannot complete a job another worker has claimed since.
CREATE TABLE jobs (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind          text NOT NULL,
    media_id      bigint NOT NULL REFERENCES media (id),
    status        text NOT NULL DEFAULT 'PENDING' CHECK (status IN ('PENDING', 'PROCESSING', 'COMPLETED', 'DEAD')),
    attempt_count integer NOT NULL DEFAULT 0,
    max_attempts  integer NOT NULL DEFAULT 3 CHECK (max_attempts > 0),
    available_at  timestamptz NOT NULL DEFAULT statement_timestamp(),
    enqueued_at   timestamptz NOT NULL DEFAULT statement_timestamp(),
    claim_token   uuid,
    claimed_by    text,
    lease_until   timestamptz,
    completed_at  timestamptz,
    last_error    text,
    CONSTRAINT jobs_attempts_within_max CHECK (attempt_count >= 0 AND attempt_count <= max_attempts),
    CONSTRAINT jobs_processing_has_claim CHECK (status <> 'PROCESSING' OR (claim_token IS NOT NULL AND lease_until IS NOT NULL))
) WITH (
    -- A queue table churns: every job is inserted, updated several times and deleted by
    -- retention. Vacuum after 1% of rows changed instead of the default 20%, so dead tuples
    -- do not pile up behind the claim query's index scans.
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 200,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 1,
    fillfactor = 70
);

-- The two claimable shapes: due PENDING jobs in order, and PROCESSING jobs whose lease ran out.
CREATE INDEX jobs_pending_idx ON jobs (available_at, id) WHERE status = 'PENDING';
CREATE INDEX jobs_processing_idx ON jobs (lease_until) WHERE status = 'PROCESSING';
-- Retention deletes finished jobs by age.
CREATE INDEX jobs_finished_idx ON jobs (completed_at) WHERE status IN ('COMPLETED', 'DEAD');
CREATE INDEX jobs_media_idx ON jobs (media_id);

-- One row per notification to a member (media ready, media failed), written in the same
-- transaction as the change it announces; a relay delivers them.
CREATE TABLE notification_outbox (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    member_id  bigint NOT NULL,
    media_id   bigint NOT NULL,
    kind       text NOT NULL,
    payload    jsonb NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT statement_timestamp()
);

CREATE INDEX notification_outbox_media_idx ON notification_outbox (media_id);

-- +goose Down
DROP TABLE notification_outbox;
DROP TABLE jobs;
ALTER TABLE media DROP COLUMN failure_reason;
