package jobqueue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/notify"
)

// Channel is the LISTEN/NOTIFY channel that carries a job kind whenever a job of that kind
// becomes claimable; idle runners wake at once instead of waiting for their next poll.
const Channel = "jobs_available"

// Queue runs the queue's SQL for the kinds registered with it. Every claim it makes holds a
// lease of one length, the one its heartbeats extend.
type Queue struct {
	pool  *pgxpool.Pool
	lease time.Duration
	kinds registry
}

// NewQueue returns a Queue on pool whose claims hold a lease of the given length, for kinds.
// A node registers every kind it runs and every kind whose jobs it may rescue or retry.
func NewQueue(pool *pgxpool.Pool, lease time.Duration, kinds ...Kind) (*Queue, error) {
	if lease <= 0 {
		return nil, errors.New("jobqueue: the lease must be positive")
	}
	reg, err := newRegistry(kinds)
	if err != nil {
		return nil, err
	}
	return &Queue{pool: pool, lease: lease, kinds: reg}, nil
}

// Lease is the length of every claim's lease.
func (q *Queue) Lease() time.Duration { return q.lease }

// Kinds returns the names of the registered kinds, sorted.
func (q *Queue) Kinds() []string { return append([]string(nil), q.kinds.names...) }

// Enqueue inserts a PENDING job of kind about subject inside the caller's transaction, so the
// job exists exactly when the caller's change (an uploaded media row) commits, and wakes idle
// runners on commit. It returns the job's id. It is Insert of a job of normal priority in
// partition "".
func Enqueue(ctx context.Context, tx pgx.Tx, kind string, subject int64, maxAttempts int) (int64, error) {
	e, err := Insert(ctx, tx, Spec{Kind: kind, Subject: subject, MaxAttempts: maxAttempts})
	return e.ID, err
}

// claimSQL claims up to $3 jobs of kind $1 for node $2, unless the kind is paused
// (job_kind_pauses, checked by the statement itself, so a pause holds for every claim that
// starts after it commits, on every node): PENDING and due ones with attempts left, first in
// claim order (claim_order, id: turns of the partitions, priorities; see Insert), and
// PROCESSING ones whose lease expired at least their lost-lease back-off ago (lease_until +
// least($5 · 2^lost_count, $6) ≤ now) and that have lost fewer than $7 − 1 leases. An expired
// one taken again keeps its attempt count (the lease was lost, not the attempt spent),
// counts the lost lease in lost_count and records it in its errors (expiredReason). SKIP
// LOCKED lets concurrent claimers take different rows without waiting; the statement commits
// on its own, so the row locks last only as long as the statement.
//
// The two shapes are two index scans that each stop at the limit, merged afterwards. One scan
// with "PENDING OR expired" cannot use either partial index in order, so it read and sorted the
// whole backlog on every claim: 0.4 ms at 500 queued jobs, 2.5 ms at 8 000 (measured, see
// docs/benchmarks/runs/2026-11-30-job-queue-against-rivers-reference.md). The rows a scan locks but the merge does not pick are released when the
// statement commits. Both indexes lead with kind (migration 00004): without it, an idle kind's
// poll walked past every queued job of the other kinds (8–11 ms with 100 000 encode jobs queued).
// Due-ness and attempts left are filters on the claim-order scan: its cost grows with the jobs
// in back-off that sort ahead of the first due one, not with the backlog.
//
// %s is the claim's limit: $3, or for a kind with a cluster-wide limit what is left of it
// (limitedClaim).
var claimTemplate = `
WITH pending AS (
    SELECT id, claim_order, false AS reclaimed FROM jobs
    WHERE kind = $1 AND status = 'PENDING' AND available_at <= statement_timestamp()
      AND attempt_count < max_attempts
      AND NOT EXISTS (SELECT 1 FROM job_kind_pauses WHERE kind = $1)
    ORDER BY claim_order, id
    LIMIT %[1]s
    FOR UPDATE SKIP LOCKED
), expired AS (
    SELECT id, claim_order, true AS reclaimed FROM jobs
    WHERE kind = $1 AND status = 'PROCESSING' AND lease_until <= statement_timestamp()
      AND lease_until + least($5::interval * power(2, least(lost_count, 30)), $6::interval) <= statement_timestamp()
      AND lost_count + 1 < $7
      AND NOT EXISTS (SELECT 1 FROM job_kind_pauses WHERE kind = $1)
    ORDER BY lease_until
    LIMIT %[1]s
    FOR UPDATE SKIP LOCKED
), candidate AS (
    SELECT id, reclaimed FROM (SELECT * FROM pending UNION ALL SELECT * FROM expired) c
    ORDER BY claim_order, id
    LIMIT %[1]s
)
UPDATE jobs j
SET status = 'PROCESSING',
    attempt_count = CASE WHEN candidate.reclaimed THEN j.attempt_count ELSE j.attempt_count + 1 END,
    lost_count = CASE WHEN candidate.reclaimed THEN j.lost_count + 1 ELSE j.lost_count END,
    claim_token = gen_random_uuid(),
    claimed_by = $2,
    lease_until = statement_timestamp() + $4::interval,
    last_error = CASE WHEN j.status = 'PROCESSING' THEN '` + expiredReason + `' ELSE j.last_error END,
    errors = CASE WHEN j.status = 'PROCESSING' THEN ` + withError("'"+expiredReason+"'") + ` ELSE j.errors END
FROM candidate
WHERE j.id = candidate.id
RETURNING ` + jobColumns

// claimSQL is the claim of a kind without a cluster-wide limit.
var claimSQL = fmt.Sprintf(claimTemplate, "$3")

// limitedClaimSQL is the claim of a kind with a cluster-wide limit $8: no more than what is
// left of it once the kind's PROCESSING jobs with a live lease are counted. It runs after
// limitLockSQL in the same transaction: claims of the kind are serialized on that lock, and
// the count (a statement of its own under READ COMMITTED) sees every claim committed before.
var limitedClaimSQL = fmt.Sprintf(claimTemplate, `least($3, greatest(0, $8 - (
        SELECT count(*) FROM jobs WHERE kind = $1 AND status = 'PROCESSING' AND lease_until > statement_timestamp())))`)

// limitLockSQL takes the transaction-scoped advisory lock of kind $1's cluster-wide limit.
const limitLockSQL = `SELECT pg_advisory_xact_lock(hashtextextended('jobqueue max running ' || $1, 0))`

// expiredReason is the error an attempt whose lease expired leaves when the job is claimed
// again: its worker said nothing, so this is all the console can show of it.
const expiredReason = "lease expired (the worker died or hung); claimed again, the attempt not counted"

// jobColumns are the columns scanJob reads, in its order.
const jobColumns = `j.id, j.kind, j.subject_id, coalesce(j.claim_token::text, ''), j.attempt_count, j.max_attempts, j.enqueued_at,
	coalesce(j.group_id, 0), j.args, j.partition_key, j.priority, j.lost_count`

func scanJob(row pgx.CollectableRow) (Job, error) {
	var j Job
	err := row.Scan(&j.ID, &j.Kind, &j.Subject, &j.ClaimToken, &j.Attempt, &j.MaxAttempts, &j.EnqueuedAt, &j.Group, &j.Args,
		&j.Partition, &j.Priority, &j.LostLeases)
	return j, err
}

// Claim claims up to n due jobs of kind for node.
//
// The claim commits without waiting for its WAL to reach the disk (synchronous_commit off for
// its transaction alone): its commit was one flush per claim, the largest cost of a claim with
// fsync on. No promise rests on that flush. Whatever follows a claim and counts (a heartbeat,
// a completion, a retry, a death, a release) is a synchronous commit, and a commit's flush
// writes the WAL up to its own record, the claim's included. Only a crash of PostgreSQL
// itself (not of a worker; a backend's crash restarts PostgreSQL too) can erase a claim, and
// only one made within the WAL writer's delay before it (3 × wal_writer_delay, 600 ms by
// default) with no synchronous commit on the server since. Such a claim was never acted on
// durably: the worker's later writes find another token (or none) and fail the fence. Unlike
// an expired lease, two things differ, and both are accepted: the job is PENDING again at
// once, so another worker may start it while the first still runs it until its next
// heartbeat fails (at most lease/3 after the restart; results stay single, by the fence and
// the per-claim output prefixes); and the erased attempt is not counted, so a job that
// crashes PostgreSQL within that delay of its claim is not driven to DEAD by its attempts.
func (q *Queue) Claim(ctx context.Context, kind string, n int, node string) ([]Job, error) {
	k := q.kinds.kinds[kind].withDefaults()
	// The statements are sent in one round trip and run in one implicit transaction, so the
	// setting (local to the transaction) holds for the claim's commit and nothing else, and
	// the limit's lock is held until the claim commits.
	batch := &pgx.Batch{}
	// The claim also runs its generic plan: planned afresh for each call's values (PostgreSQL's
	// choice for it), a claim spent about two thirds of its time in the planner (an idle
	// kind's poll 290 µs against 92 µs with 100 000 jobs of another kind queued,
	// BenchmarkClaim_Backlog), and the generic plan is the same index scans in claim order
	// (TestClaimSQL_CostIndependentOfPartitionsAndBacklog checks both plans).
	batch.Queue(`SELECT set_config('synchronous_commit', 'off', true), set_config('plan_cache_mode', 'force_generic_plan', true)`)
	if k.MaxRunning > 0 {
		// The lock is a statement of its own: the claim's snapshot, taken after it is granted,
		// sees every claim of the kind committed before (see limitedClaimSQL).
		batch.Queue(limitLockSQL, kind)
		batch.Queue(limitedClaimSQL, kind, node, n, q.lease, k.LostLeaseBackoff, LostLeaseBackoffCap, k.MaxLostLeases, k.MaxRunning)
	} else {
		batch.Queue(claimSQL, kind, node, n, q.lease, k.LostLeaseBackoff, LostLeaseBackoffCap, k.MaxLostLeases)
	}
	results := q.pool.SendBatch(ctx, batch)
	defer results.Close()
	if _, err := results.Exec(); err != nil {
		return nil, fmt.Errorf("claim %s jobs: %w", kind, err)
	}
	if k.MaxRunning > 0 {
		if _, err := results.Exec(); err != nil {
			return nil, fmt.Errorf("claim %s jobs: lock its limit: %w", kind, err)
		}
	}
	rows, err := results.Query()
	if err != nil {
		return nil, fmt.Errorf("claim %s jobs: %w", kind, err)
	}
	jobs, err := pgx.CollectRows(rows, scanJob)
	if err != nil {
		return nil, fmt.Errorf("claim %s jobs: %w", kind, err)
	}
	if err := results.Close(); err != nil {
		return nil, fmt.Errorf("claim %s jobs: %w", kind, err)
	}
	return jobs, nil
}

// fence is the WHERE clause every write of a claimed job ends with: this job, still
// PROCESSING, still under our token, and our lease not yet expired.
const fence = `id = $1 AND status = 'PROCESSING' AND claim_token = $2::uuid AND lease_until > statement_timestamp()`

// Heartbeat extends the job's lease. ErrClaimLost means the lease had already expired (or the
// job was taken): the caller must stop working on it.
func (q *Queue) Heartbeat(ctx context.Context, j Job) error {
	tag, err := q.pool.Exec(ctx, `UPDATE jobs SET lease_until = statement_timestamp() + $3::interval WHERE `+fence,
		j.ID, j.ClaimToken, q.lease)
	if err != nil {
		return fmt.Errorf("heartbeat job %d: %w", j.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return ErrClaimLost
	}
	return nil
}

// Complete marks the job COMPLETED, with commit's domain writes, in one fenced transaction.
// commit may be nil.
func (q *Queue) Complete(ctx context.Context, j Job, commit func(ctx context.Context, tx pgx.Tx) error) error {
	return q.fenced(ctx, j, change{to: StatusCompleted}, commit,
		`UPDATE jobs SET status = 'COMPLETED', completed_at = statement_timestamp(), lease_until = NULL, last_error = NULL WHERE `+fence)
}

// Retry gives the job back as PENDING, due after delay, recording cause. It has no domain
// writes, so it takes no domain locks.
func (q *Queue) Retry(ctx context.Context, j Job, cause string, delay time.Duration) error {
	tag, err := q.pool.Exec(ctx, `
		UPDATE jobs SET status = 'PENDING', available_at = statement_timestamp() + $3::interval,
		       claim_token = NULL, claimed_by = NULL, lease_until = NULL, last_error = $4, `+appendError("$4")+`
		WHERE `+fence, j.ID, j.ClaimToken, delay, storableError(cause))
	if err != nil {
		return fmt.Errorf("retry job %d: %w", j.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return ErrClaimLost
	}
	return nil
}

// Dead marks the job DEAD because of cause (its text is the job's last_error), with its kind's
// Fail writes, in one fenced transaction.
func (q *Queue) Dead(ctx context.Context, j Job, cause error) error {
	fail := q.kinds.kinds[j.Kind].Fail
	var domain func(ctx context.Context, tx pgx.Tx) error
	if fail != nil {
		domain = func(ctx context.Context, tx pgx.Tx) error { return fail(ctx, tx, j, cause) }
	}
	return q.fenced(ctx, j, change{to: StatusDead, cause: cause}, domain,
		`UPDATE jobs SET status = 'DEAD', completed_at = statement_timestamp(), lease_until = NULL, last_error = $3, `+appendError("$3")+` WHERE `+fence,
		storableError(cause.Error()))
}

// keptErrors is how many of its attempts' errors a job keeps (the jobs.errors column), and
// keptErrorChars how much of each error's text: an error may carry a tool's whole stderr, and
// ten of those would make every read of the row (the console's list) heavy. last_error keeps
// the whole text of the last one.
const (
	keptErrors     = 10
	keptErrorChars = 2000
)

// keptLastErrorBytes caps last_error: enough for any tool's tail of stderr.
const keptLastErrorBytes = 64 << 10

// storableError is an error's text as PostgreSQL can store it: a job's finish must never fail
// on its error's text, or the job stays PROCESSING until its lease runs out and the error is
// lost. Invalid UTF-8 (a tool's stderr cut at a byte offset) becomes U+FFFD, NUL (which text
// cannot hold) is dropped, and the text is cut at keptLastErrorBytes on a character boundary.
func storableError(s string) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
	if len(s) <= keptLastErrorBytes {
		return s
	}
	cut := keptLastErrorBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// appendError is the SET item that adds the error text param (a statement parameter such as
// "$3", or a quoted literal) to the job's errors, with its attempt number and time, dropping
// the oldest beyond keptErrors.
func appendError(param string) string {
	return "errors = " + withError(param)
}

// withError is appendError's value alone, for a SET item that adds an error only sometimes.
func withError(param string) string {
	return fmt.Sprintf(`(CASE WHEN jsonb_array_length(errors) >= %d THEN errors - 0 ELSE errors END)
		|| jsonb_build_array(jsonb_build_object('attempt', attempt_count, 'at', statement_timestamp(), 'error', left(%s::text, %d)))`,
		keptErrors, param, keptErrorChars)
}

// Release gives a claim back on a graceful stop: PENDING at once, with the attempt returned,
// because a controlled stop is not a failure of the job. A claim that took the job over after
// a lost lease carries on the attempt the lost one counted, and gives that back.
func (q *Queue) Release(ctx context.Context, j Job) error {
	err := pgx.BeginFunc(ctx, q.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `
			UPDATE jobs SET status = 'PENDING', attempt_count = attempt_count - 1, available_at = statement_timestamp(),
			       claim_token = NULL, claimed_by = NULL, lease_until = NULL
			WHERE attempt_count > 0 AND `+fence, j.ID, j.ClaimToken)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return ErrClaimLost
		}
		// Another node may be idle: tell it now rather than at its next poll.
		return notify.Send(ctx, tx, Channel, j.Kind)
	})
	if err != nil && !errors.Is(err, ErrClaimLost) {
		return fmt.Errorf("release job %d: %w", j.ID, err)
	}
	return err
}

// fenced runs final, a fenced update of j, as a transition (see transition), with
// ErrClaimLost when it updates no row.
func (q *Queue) fenced(ctx context.Context, j Job, c change, domain func(ctx context.Context, tx pgx.Tx) error, final string, args ...any) error {
	changed, err := q.transition(ctx, j, c, domain, final, append([]any{j.ID, j.ClaimToken}, args...)...)
	switch {
	case err != nil:
		return fmt.Errorf("finish job %d: %w", j.ID, err)
	case !changed:
		return ErrClaimLost
	}
	return nil
}

// change is what a transition's update does to the job, for the job's dependants: to is its
// new status (COMPLETED, DEAD, or PENDING for an admin retry) and cause, for DEAD, why.
type change struct {
	to    Status
	cause error
}

// transition is every change of a job's status that has a domain side (completion, death,
// the rescuer's sweep, an admin retry), in one transaction: first j's kind's Lock (its domain
// rows, so that every writer locks members → media → jobs in that order and none can
// deadlock), then update on the job row, then, only if update changed a row, domain's writes,
// and last, for a job of a group, what c means for its dependants: released when it
// COMPLETED, cancelled when it went DEAD, brought back when it was retried (group.go).
// It reports whether update changed a row; when it did not, nothing was written.
func (q *Queue) transition(ctx context.Context, j Job, c change, domain func(ctx context.Context, tx pgx.Tx) error, update string, args ...any) (bool, error) {
	changed := false
	err := pgx.BeginFunc(ctx, q.pool, func(tx pgx.Tx) error {
		var err error
		changed, err = q.transitionIn(ctx, tx, j, c, domain, update, args...)
		return err
	})
	return changed && err == nil, err
}

// transitionIn is transition's work inside tx, for a caller that changes several jobs in one
// transaction (the retry of a group).
func (q *Queue) transitionIn(ctx context.Context, tx pgx.Tx, j Job, c change, domain func(ctx context.Context, tx pgx.Tx) error, update string, args ...any) (bool, error) {
	lock := q.kinds.kinds[j.Kind].Lock
	err := func() error {
		if lock != nil {
			if err := lock(ctx, tx, j); err != nil {
				return err
			}
		}
		if c.to == StatusPending && j.Group != 0 {
			// A retry counts the parents its job still waits for: its row is locked in a
			// statement of its own first, so that a parent's completion or death holding it
			// (lockChildrenSQL) has committed before the count reads it (see lockChildrenSQL).
			if _, err := tx.Exec(ctx, `SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE`, j.ID); err != nil {
				return err
			}
		}
		tag, err := tx.Exec(ctx, update, args...)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return errUnchanged
		}
		if domain != nil {
			if err := domain(ctx, tx); err != nil {
				return err
			}
		}
		if j.Group == 0 {
			return nil
		}
		switch c.to {
		case StatusCompleted:
			return releaseDependants(ctx, tx, j.ID)
		case StatusDead:
			return q.cancelBelow(ctx, tx, j, c.cause)
		case StatusPending:
			return q.reviveBelow(ctx, tx, j)
		}
		return nil
	}()
	if errors.Is(err, errUnchanged) {
		return false, nil
	}
	return err == nil, err
}

// errUnchanged is a transition whose update changed no row: nothing else is written.
var errUnchanged = errors.New("jobqueue: no row changed")

// Settlement is what the database holds for a claim whose completion's outcome the client
// could not see.
type Settlement int

// The settlements.
const (
	// SettledUnknown: the job row is gone (retention may have pruned it), so nothing can be
	// concluded; keep whatever the run produced.
	SettledUnknown Settlement = iota
	// SettledCompleted: this claim's completion committed.
	SettledCompleted
	// SettledStillOurs: the completion did not commit and the claim is still live: it can be
	// completed again.
	SettledStillOurs
	// SettledLost: the job is in someone else's hands (or retried, or dead): this claim's
	// completion did not commit and never will.
	SettledLost
)

// Settle reads, with a row lock, what the database holds for j's claim. A COMMIT can succeed
// on the server while the client sees an error (a reset connection, a timeout during a slow
// synchronous-replication commit): after a failed Complete that is not ErrClaimLost, nothing
// may be cleaned up before Settle says the completion did not commit. The lock makes the read
// wait for a transaction of ours still in flight on the server.
func (q *Queue) Settle(ctx context.Context, j Job) (Settlement, error) {
	var status Status
	var ours, live bool
	err := q.pool.QueryRow(ctx, `
		SELECT status, claim_token IS NOT DISTINCT FROM $2::uuid, coalesce(lease_until > statement_timestamp(), false)
		FROM jobs WHERE id = $1 FOR UPDATE`, j.ID, j.ClaimToken).Scan(&status, &ours, &live)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return SettledUnknown, nil
	case err != nil:
		return SettledUnknown, fmt.Errorf("settle job %d: %w", j.ID, err)
	case status == StatusCompleted && ours:
		return SettledCompleted, nil
	case status == StatusProcessing && ours && live:
		return SettledStillOurs, nil
	}
	return SettledLost, nil
}
