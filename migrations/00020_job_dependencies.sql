-- +goose Up
-- Job dependencies on the queue core. A group is jobs enqueued together
-- (jobqueue.EnqueueGroup), the group's id the id of its first job. A job with parents is
-- WAITING, outside both claimable indexes, so no claim ever reads it: waiting_on counts its
-- parents not yet COMPLETED, and the completion of a parent decrements it in the parent's own
-- finishing transaction, making the job PENDING (claimable, in jobs_pending_kind_idx) when it
-- reaches 0. A parent that goes DEAD takes its WAITING descendants with it (each by its kind's
-- rule: cancelled, or failed with its kind's Fail hook); an admin retry of the parent brings
-- them back to WAITING.
--
-- args is a job's own parameters (the rendition of an encode group's job), as JSON. All three
-- columns have constant defaults (or none): no table rewrite.
ALTER TABLE jobs DROP CONSTRAINT jobs_status_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_status_check
    CHECK (status IN ('WAITING', 'PENDING', 'PROCESSING', 'COMPLETED', 'DEAD'));
ALTER TABLE jobs ADD COLUMN group_id bigint,
                 ADD COLUMN waiting_on integer NOT NULL DEFAULT 0 CHECK (waiting_on >= 0),
                 ADD COLUMN args jsonb;
CREATE INDEX jobs_group_idx ON jobs (group_id) WHERE group_id IS NOT NULL;

-- One row per edge: job_id waits for parent_id; done once the parent COMPLETED (set by the
-- parent's completion), so what a job waits for is its edges not done, whether or not the
-- parent's row still exists (retention deletes COMPLETED jobs after 7 days, DEAD ones after
-- 30). No foreign keys on purpose: their per-row triggers would run on every delete of every
-- job, grouped or not, and the pruner deletes jobs by the thousand; the pruner and the admin
-- discard delete a grouped job's edges (those naming it as the dependant) themselves.
CREATE TABLE job_dependencies (
    parent_id bigint NOT NULL,
    job_id    bigint NOT NULL,
    done      boolean NOT NULL DEFAULT false,
    PRIMARY KEY (parent_id, job_id),
    CHECK (parent_id <> job_id)
);
CREATE INDEX job_dependencies_job_idx ON job_dependencies (job_id);

-- +goose Down
DROP TABLE job_dependencies;
DROP INDEX jobs_group_idx;
ALTER TABLE jobs DROP COLUMN args, DROP COLUMN waiting_on, DROP COLUMN group_id;
ALTER TABLE jobs DROP CONSTRAINT jobs_status_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_status_check CHECK (status IN ('PENDING', 'PROCESSING', 'COMPLETED', 'DEAD'));
