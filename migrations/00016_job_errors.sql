-- +goose Up
-- For the queue console: each job keeps the errors of its last attempts, not only the
-- last one: a list of {"attempt", "at", "error"} objects, the newest last, at most
-- jobqueue.keptErrors of them, appended by every retry, death, rescue and cancel. A constant
-- default: no table rewrite.
ALTER TABLE jobs ADD COLUMN errors jsonb NOT NULL DEFAULT '[]';

-- +goose Down
ALTER TABLE jobs DROP COLUMN errors;
