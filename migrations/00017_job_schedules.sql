-- +goose Up
-- Periodic jobs: one row per periodic kind, the cluster's memory of its schedule.
-- Every node that enqueues the kind locks this row (FOR UPDATE) to see whether a run time is
-- due and moves last_run forward in the transaction that inserts the job, so N nodes, restarts
-- and kills never enqueue one run time twice. It is a row of its own rather than a unique key
-- on jobs because the pruner deletes finished jobs: a key deleted with its job would let a run
-- time whose job was pruned be enqueued again.
CREATE TABLE job_schedules (
    kind        text PRIMARY KEY,
    -- schedule is how the nodes that enqueue the kind describe it ("every 1h0m0s", a cron
    -- expression), for administrators.
    schedule    text NOT NULL,
    -- last_run is the run time last enqueued, or when the schedule was first seen (nothing
    -- before it is due).
    last_run    timestamptz NOT NULL,
    last_job_id bigint,
    next_run    timestamptz,
    -- skipped counts the run times missed while no node enqueued the kind: only the latest
    -- missed one runs.
    skipped     bigint NOT NULL DEFAULT 0
);

-- +goose Down
DROP TABLE job_schedules;
