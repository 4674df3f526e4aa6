-- +goose Up
-- A queue that is fair and under control (jobqueue/enqueue.go, jobqueue/queue.go).
--
-- partition_key is the job's fairness partition, chosen by its enqueuer ('' is a partition like
-- any other); fair_turn its turn within its kind, computed at enqueue so that the partitions
-- take turns (start-time fair queuing); priority (1 high, 2 normal, 3 low) a penalty of
-- jobqueue.PriorityStep (100) turns per level; claim_order the claim's sort key, kept by
-- PostgreSQL. lost_count counts the leases the job lost (its worker killed, hung, cut off):
-- these do not spend its attempts. unique_key, when set, makes the job unique among the
-- unfinished jobs of its kind.
--
-- claim_order is a stored generated column, so adding it rewrites the table once.
ALTER TABLE jobs
    ADD COLUMN partition_key text     NOT NULL DEFAULT '',
    ADD COLUMN priority      smallint NOT NULL DEFAULT 2 CHECK (priority BETWEEN 1 AND 3),
    ADD COLUMN fair_turn     bigint   NOT NULL DEFAULT 0 CHECK (fair_turn >= 0),
    ADD COLUMN claim_order   bigint   GENERATED ALWAYS AS (fair_turn + (priority - 1) * 100) STORED,
    ADD COLUMN lost_count    integer  NOT NULL DEFAULT 0 CHECK (lost_count >= 0),
    ADD COLUMN unique_key    text;

-- The claim reads PENDING jobs of its kind in claim order: one index scan, no sort, stopping
-- at its limit. Enqueue finds the head of that order with the same index, and the last turn
-- of its partition at its priority with the second one.
DROP INDEX jobs_pending_kind_idx;
CREATE INDEX jobs_pending_kind_idx ON jobs (kind, claim_order, id) WHERE status = 'PENDING';
CREATE INDEX jobs_partition_turn_idx ON jobs (kind, partition_key, priority, fair_turn) WHERE status IN ('PENDING', 'WAITING');
-- At most one unfinished job of a kind holds a unique key: enqueue's ON CONFLICT target.
CREATE UNIQUE INDEX jobs_unique_key_idx ON jobs (kind, unique_key)
    WHERE unique_key IS NOT NULL AND status IN ('WAITING', 'PENDING', 'PROCESSING');

-- A row is a kind paused on every node: the claim statement itself checks it.
CREATE TABLE job_kind_pauses (
    kind      text PRIMARY KEY,
    paused_at timestamptz NOT NULL DEFAULT now(),
    paused_by text NOT NULL
);

-- +goose Down
DROP TABLE job_kind_pauses;
DROP INDEX jobs_unique_key_idx;
DROP INDEX jobs_partition_turn_idx;
DROP INDEX jobs_pending_kind_idx;
CREATE INDEX jobs_pending_kind_idx ON jobs (kind, available_at, id) WHERE status = 'PENDING';
ALTER TABLE jobs
    DROP COLUMN unique_key,
    DROP COLUMN lost_count,
    DROP COLUMN claim_order,
    DROP COLUMN fair_turn,
    DROP COLUMN priority,
    DROP COLUMN partition_key;
