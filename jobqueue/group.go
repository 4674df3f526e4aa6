package jobqueue

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/notify"
)

// Job dependencies. A group is jobs enqueued together in one transaction
// (EnqueueGroup, or ContinueGroup from inside a job's completion); a job of a group may wait
// for other jobs of it, its parents. It is WAITING, outside both claimable indexes, until
// every parent is COMPLETED; the completion that finishes its last parent makes it PENDING in
// that parent's own finishing transaction, and claims take it from there like any job. So a
// claim reads no WAITING job at all, however many wait (TestClaim_WaitingJobsAreNeverRead),
// and a job without a group pays nothing: each step below runs only for jobs whose Group is
// set, and the batch completion of plain jobs is the statement it always was.
//
// A parent that goes DEAD (its last attempt failed, the rescuer swept it, an administrator
// cancelled it) takes its WAITING descendants with it, in the same transaction, each by its
// kind's OnParentDead rule. An administrator's retry of the parent brings the descendants
// that never ran back to WAITING. Fencing, leases, retries, the rescuer and the pruner are
// the same for every job of a group: a job is claimed, heartbeats and finishes as any other.

// ParentDeadRule is what happens to a WAITING job when a job it waits for (directly or not)
// goes DEAD. The dependant's kind chooses it.
type ParentDeadRule int

// The rules.
const (
	// CancelWhenParentDead makes the job DEAD without running it and without its kind's Fail
	// hook: the parent's own Fail hook said what there is to say (the default).
	CancelWhenParentDead ParentDeadRule = iota
	// FailWhenParentDead makes the job DEAD with its kind's Lock and Fail hooks, Fail's cause
	// wrapping the parent's (ReasonOf gives the parent's reason). Its Lock runs after the
	// parent's job row is locked: when it locks rows another kind's completion locks in the
	// opposite order, PostgreSQL may break a deadlock by failing one of the two transactions,
	// which then retries (the runner settles its completion; a death left undone is the
	// rescuer's once its lease expires). An admin retry of the parent runs its Revive hook.
	FailWhenParentDead
)

// GroupJob is one job of a group to enqueue.
type GroupJob struct {
	// Kind and Subject are the job's kind and the id of the row it is about. Required.
	Kind    string
	Subject int64
	// Args are the job's own parameters, a JSON object (Job.Args). Optional.
	Args json.RawMessage
	// MaxAttempts is how many attempts the job has, from 1.
	MaxAttempts int
	// After are the indexes, in the same call, of the jobs this one waits for: it runs once
	// all of them are COMPLETED. Only earlier jobs may be named, so a group cannot hold a
	// cycle.
	After []int
	// Partition is the job's fairness partition (Spec.Partition). A job that ContinueGroup
	// enqueues with none takes the partition of the job whose completion continues the group.
	Partition string
	// Priority within the kind; 0 means PriorityNormal.
	Priority Priority
}

// enqueueGroupSQL inserts a group in one statement: the ids are drawn from the jobs'
// identity first, so that the edges can name them in the same statement. $8 is the job whose
// completion continues its group (ContinueGroup), or NULL for a new group; that job is
// COMPLETED in this very transaction (the check is the founder CTE returning its row), takes
// the group's id when it had none, and becomes a parent of the jobs that name no other.
// Each job's turn is Insert's (nextTurn), for its own kind, partition and priority, the jobs of
// the call that share all three taking consecutive turns (the rows of one statement do not
// see each other).
var enqueueGroupSQL = `
WITH spec AS (
    SELECT * FROM unnest($1::text[], $2::bigint[], $3::jsonb[], $4::int[], $5::int[], $9::text[], $10::smallint[])
        WITH ORDINALITY AS s(kind, subject_id, args, max_attempts, waiting_on, partition_key, priority, n)
), ids AS MATERIALIZED (
    SELECT n, nextval(pg_get_serial_sequence('jobs', 'id')) AS id FROM spec
), turns AS (
    SELECT s.n, ` + nextTurn("s.kind", "s.partition_key", "s.priority") + `
        + row_number() OVER (PARTITION BY s.kind, s.partition_key, s.priority ORDER BY s.n) - 1 AS fair_turn
    FROM spec s
), founder AS (
    UPDATE jobs SET group_id = coalesce(group_id, id)
    WHERE id = $8 AND status = 'COMPLETED'
    RETURNING id, group_id
), inserted AS (
    INSERT INTO jobs (id, kind, subject_id, args, max_attempts, waiting_on, status, group_id, partition_key, priority, fair_turn)
    OVERRIDING SYSTEM VALUE
    SELECT ids.id, s.kind, s.subject_id, s.args, s.max_attempts, s.waiting_on,
           CASE WHEN s.waiting_on > 0 THEN 'WAITING' ELSE 'PENDING' END,
           coalesce((SELECT group_id FROM founder), (SELECT id FROM ids WHERE n = 1)),
           s.partition_key, s.priority, turns.fair_turn
    FROM spec s JOIN ids USING (n) JOIN turns USING (n)
    WHERE $8::bigint IS NULL OR EXISTS (SELECT 1 FROM founder)
), edges AS (
    INSERT INTO job_dependencies (parent_id, job_id, done)
    SELECT p.id, c.id, false FROM unnest($6::int[], $7::int[]) AS e(child, parent)
    JOIN ids c ON c.n = e.child JOIN ids p ON p.n = e.parent
    WHERE $8::bigint IS NULL OR EXISTS (SELECT 1 FROM founder)
    UNION ALL
    -- The founder is COMPLETED: its edges are done from the start.
    SELECT f.id, ids.id, true FROM founder f, ids JOIN spec s USING (n) WHERE s.waiting_on = 0
)
SELECT ids.id, EXISTS (SELECT 1 FROM founder) FROM ids ORDER BY n`

// EnqueueGroup inserts jobs as a new group inside the caller's transaction, so the group
// exists exactly when the caller's change commits, and wakes the idle runners of the kinds
// that can run at once. It returns the jobs' ids, in order; the group's id is the first's.
func EnqueueGroup(ctx context.Context, tx pgx.Tx, jobs []GroupJob) ([]int64, error) {
	return enqueueGroup(ctx, tx, nil, "", jobs)
}

// ContinueGroup adds jobs to the group of from, inside from's own completion (its
// Result.Commit, where from is already COMPLETED in the transaction): from becomes a parent of
// every job that names no other, and the group's first job when it had none. This is how a
// job that learns what is to be done (a probe, planning the renditions of an encode) hands
// the work on. Called anywhere else, it fails and enqueues nothing. A job given no Partition
// takes from's.
func ContinueGroup(ctx context.Context, tx pgx.Tx, from Job, jobs []GroupJob) ([]int64, error) {
	return enqueueGroup(ctx, tx, &from.ID, from.Partition, jobs)
}

// enqueueGroup enqueues jobs, continuing the group of from when it is not nil; partition is
// the partition of a job that names none.
func enqueueGroup(ctx context.Context, tx pgx.Tx, from *int64, partition string, jobs []GroupJob) ([]int64, error) {
	if len(jobs) == 0 {
		return nil, errors.New("jobqueue: a group needs at least one job")
	}
	n := len(jobs)
	kinds, subjects, args := make([]string, n), make([]int64, n), make([]*string, n)
	attempts, waiting := make([]int32, n), make([]int32, n)
	partitions, priorities := make([]string, n), make([]int16, n)
	var children, parents []int32
	for i, j := range jobs {
		switch {
		case j.Kind == "":
			return nil, fmt.Errorf("jobqueue: job %d of the group has no Kind", i)
		case j.MaxAttempts < 1:
			return nil, fmt.Errorf("jobqueue: job %d of the group (%s) needs MaxAttempts ≥ 1", i, j.Kind)
		case j.Args != nil && !isJSONObject(j.Args):
			return nil, fmt.Errorf("jobqueue: job %d of the group (%s) has Args that are not a JSON object", i, j.Kind)
		case j.Priority != 0 && (j.Priority < PriorityHigh || j.Priority > PriorityLow):
			return nil, fmt.Errorf("jobqueue: job %d of the group (%s) has priority %d, not 1 (high) to 3 (low)", i, j.Kind, j.Priority)
		}
		kinds[i], subjects[i], attempts[i] = j.Kind, j.Subject, int32(j.MaxAttempts)
		partitions[i], priorities[i] = cmp.Or(j.Partition, partition), int16(cmp.Or(j.Priority, PriorityNormal))
		if j.Args != nil {
			s := string(j.Args)
			args[i] = &s
		}
		after := slices.Clone(j.After)
		slices.Sort(after)
		after = slices.Compact(after)
		for _, p := range after {
			if p < 0 || p >= i {
				return nil, fmt.Errorf("jobqueue: job %d of the group (%s) waits for job %d: only an earlier job of the group", i, j.Kind, p)
			}
			children, parents = append(children, int32(i+1)), append(parents, int32(p+1)) // ORDINALITY counts from 1
		}
		waiting[i] = int32(len(after))
	}
	rows, err := tx.Query(ctx, enqueueGroupSQL, kinds, subjects, args, attempts, waiting, children, parents, from, partitions, priorities)
	if err != nil {
		return nil, fmt.Errorf("enqueue group: %w", err)
	}
	ids := make([]int64, 0, n)
	founded := true
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id, &founded); err != nil {
			rows.Close()
			return nil, fmt.Errorf("enqueue group: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("enqueue group: %w", err)
	}
	if from != nil && !founded {
		// Nothing was inserted (the CTEs' WHERE), but the ids were drawn: the caller's
		// transaction must not commit as if the group existed.
		return nil, fmt.Errorf("jobqueue: ContinueGroup: job %d is not COMPLETED in this transaction (call it from its Result.Commit)", *from)
	}
	woken := map[string]bool{}
	for i, j := range jobs {
		if waiting[i] == 0 && !woken[j.Kind] {
			woken[j.Kind] = true
			if err := notify.Send(ctx, tx, Channel, j.Kind); err != nil {
				return nil, err
			}
		}
	}
	return ids, nil
}

// releaseSQL marks the edges of the parents $1 (jobs just COMPLETED) done and makes their
// WAITING dependants count those parents done, PENDING when none is left, waking the idle
// runners of every kind a dependant of which became PENDING. The dependants are locked
// beforehand (lockChildrenSQL).
const releaseSQL = `
WITH freed AS (
    SELECT d.job_id AS id, count(*) AS n FROM job_dependencies d WHERE d.parent_id = ANY($1::bigint[]) AND NOT d.done GROUP BY d.job_id
), marked AS (
    UPDATE job_dependencies d SET done = true WHERE d.parent_id = ANY($1::bigint[]) AND NOT d.done
), released AS (
    UPDATE jobs w
    SET waiting_on = w.waiting_on - freed.n,
        status = CASE WHEN w.waiting_on <= freed.n THEN 'PENDING' ELSE 'WAITING' END,
        available_at = statement_timestamp()
    FROM freed
    WHERE w.id = freed.id AND w.status = 'WAITING'
    RETURNING w.kind, w.status
)
SELECT count(pg_notify('` + Channel + `', kind)) FROM (SELECT DISTINCT kind FROM released WHERE status = 'PENDING') k`

// Every change of a job of a group that reads its dependants' state (a release, a cancel, a
// revival) first locks those dependants' rows, in a statement of its own, and reads them in the
// next, whose snapshot is taken once it holds the locks. Two such changes that share a
// dependant (the completion of one of its parents and the admin retry of another, which
// revives it) are then serialized on its row, and the second sees what the first wrote. In one
// statement the second would read from a snapshot taken before the first committed: a
// completion would skip a dependant being revived (left waiting for a parent that already
// completed), a death a dependant being revived (left WAITING for a DEAD parent).
// (TestGroupChaos_ARevivalRacingTheOtherParentsEndLosesIt)
const lockChildrenSQL = `SELECT j.id FROM jobs j WHERE j.id IN (SELECT job_id FROM job_dependencies WHERE parent_id = ANY($1::bigint[]))
ORDER BY j.id FOR UPDATE`

// lockChildren runs lockChildrenSQL for parents in tx.
func lockChildren(ctx context.Context, tx pgx.Tx, parents []int64) error {
	if _, err := tx.Exec(ctx, lockChildrenSQL, parents); err != nil {
		return fmt.Errorf("lock the dependants of jobs %v: %w", parents, err)
	}
	return nil
}

// releaseDependants runs releaseSQL for parents inside their completion's transaction.
func releaseDependants(ctx context.Context, tx pgx.Tx, parents ...int64) error {
	if err := lockChildren(ctx, tx, parents); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, releaseSQL, parents); err != nil {
		return fmt.Errorf("release the dependants of jobs %v: %w", parents, err)
	}
	return nil
}

// belowCTE lists, as "below", every job that waits for job $1, directly or not.
const belowCTE = `RECURSIVE below(id) AS (
    SELECT job_id FROM job_dependencies WHERE parent_id = $1
    UNION
    SELECT d.job_id FROM job_dependencies d JOIN below b ON d.parent_id = b.id
)`

// lockBelowSQL locks every job below the job $1, in id order (see lockChildrenSQL).
var lockBelowSQL = `WITH ` + belowCTE + ` SELECT j.id FROM jobs j WHERE j.id IN (SELECT id FROM below) ORDER BY j.id FOR UPDATE`

// cancelBelowSQL makes DEAD every WAITING job below the job $1 that just went DEAD, with the
// error $2, and returns them. Only WAITING ones: a job below a job that never completed has
// never run.
var cancelBelowSQL = `WITH ` + belowCTE + `
UPDATE jobs j SET status = 'DEAD', completed_at = statement_timestamp(), last_error = $2, ` + appendError("$2") + `
FROM below WHERE j.id = below.id AND j.status = 'WAITING'
RETURNING ` + jobColumns

// blockedParent is the condition, on an edge d of a job, that the job can never run: its parent
// is DEAD, or its row is gone without having COMPLETED (deleted by retention or an
// administrator once DEAD).
const blockedParent = `NOT d.done AND (p.id IS NULL OR p.status = 'DEAD')`

// reviveChildrenSQL makes WAITING again every child of the jobs $1 (just brought back) that
// never ran (DEAD with no attempt: cancelled with its ancestor) and that no other parent keeps
// from ever running (blockedParent), each waiting for its edges not done, and returns them.
// reviveBelow runs it a generation at a time, so that a grandchild sees its revived parent.
var reviveChildrenSQL = `
WITH kids AS (
    SELECT DISTINCT job_id AS id FROM job_dependencies WHERE parent_id = ANY($1::bigint[])
), revivable AS (
    SELECT j.id FROM jobs j JOIN kids USING (id) WHERE j.status = 'DEAD' AND j.attempt_count = 0
), waits AS (
    SELECT l.id, (SELECT count(*) FROM job_dependencies d WHERE d.job_id = l.id AND NOT d.done) AS n
    FROM revivable l
    WHERE NOT EXISTS (SELECT 1 FROM job_dependencies d LEFT JOIN jobs p ON p.id = d.parent_id
                      WHERE d.job_id = l.id AND ` + blockedParent + `)
)
UPDATE jobs j SET status = CASE WHEN waits.n > 0 THEN 'WAITING' ELSE 'PENDING' END, waiting_on = waits.n,
       available_at = statement_timestamp(), completed_at = NULL
FROM waits WHERE j.id = waits.id AND j.status = 'DEAD'
RETURNING ` + jobColumns

// cancelledError is the error a job cancelled with its ancestor ends with.
type cancelledError struct {
	ancestor int64
	cause    error
}

func (e cancelledError) Error() string {
	return fmt.Sprintf("cancelled: job %d, which it waits for, is DEAD", e.ancestor)
}

func (e cancelledError) Unwrap() error { return e.cause }

// cancelBelow makes DEAD the WAITING descendants of j, which goes DEAD in tx because of
// cause, each by its kind's OnParentDead rule.
func (q *Queue) cancelBelow(ctx context.Context, tx pgx.Tx, j Job, cause error) error {
	dead := cancelledError{ancestor: j.ID, cause: cause}
	if _, err := tx.Exec(ctx, lockBelowSQL, j.ID); err != nil {
		return fmt.Errorf("lock the dependants of job %d: %w", j.ID, err)
	}
	rows, err := tx.Query(ctx, cancelBelowSQL, j.ID, dead.Error())
	if err != nil {
		return fmt.Errorf("cancel the dependants of job %d: %w", j.ID, err)
	}
	below, err := pgx.CollectRows(rows, scanJob)
	if err != nil {
		return fmt.Errorf("cancel the dependants of job %d: %w", j.ID, err)
	}
	return q.eachFailing(ctx, tx, below, func(k Kind, d Job) error {
		if k.Fail == nil {
			return nil
		}
		return k.Fail(ctx, tx, d, dead)
	})
}

// reviveBelow brings back the descendants of j (retried in tx) that were cancelled with it
// and that nothing else keeps from running, a generation at a time.
func (q *Queue) reviveBelow(ctx context.Context, tx pgx.Tx, j Job) error {
	var below []Job
	for frontier := []int64{j.ID}; len(frontier) > 0; {
		if err := lockChildren(ctx, tx, frontier); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, reviveChildrenSQL, frontier)
		if err != nil {
			return fmt.Errorf("revive the dependants of job %d: %w", j.ID, err)
		}
		revived, err := pgx.CollectRows(rows, scanJob)
		if err != nil {
			return fmt.Errorf("revive the dependants of job %d: %w", j.ID, err)
		}
		frontier = frontier[:0]
		for _, d := range revived {
			frontier = append(frontier, d.ID)
		}
		below = append(below, revived...)
	}
	kinds := map[string]bool{}
	for _, d := range below {
		kinds[d.Kind] = true
	}
	for kind := range kinds {
		if err := notify.Send(ctx, tx, Channel, kind); err != nil {
			return err
		}
	}
	return q.eachFailing(ctx, tx, below, func(k Kind, d Job) error {
		if k.Revive == nil {
			return nil
		}
		return k.Revive(ctx, tx, d)
	})
}

// eachFailing runs hook, after the kind's Lock, for each job of jobs whose kind this node
// knows and whose rule is FailWhenParentDead. A kind this node does not know is cancelled
// only: its hooks cannot run here.
func (q *Queue) eachFailing(ctx context.Context, tx pgx.Tx, jobs []Job, hook func(Kind, Job) error) error {
	for _, d := range jobs {
		k, ok := q.kinds.kinds[d.Kind]
		if !ok || k.OnParentDead != FailWhenParentDead {
			continue
		}
		if k.Lock != nil {
			if err := k.Lock(ctx, tx, d); err != nil {
				return err
			}
		}
		if err := hook(k, d); err != nil {
			return err
		}
	}
	return nil
}
