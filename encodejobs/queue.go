// Package encodejobs is the media pipeline's durable job queue in PostgreSQL, and the encode
// job that runs on it.
//
// A job is claimed in one short statement (FOR UPDATE SKIP LOCKED, committed at once) that
// gives it a fresh claim token and a lease; no lock or transaction is held while the job runs.
// A running job extends its lease with heartbeats fenced by its token. Every terminal write —
// completed, retried, dead — happens in one transaction that locks members → media → jobs in
// that order, makes the domain writes, and ends with the job UPDATE whose WHERE checks the id,
// the PROCESSING status, the claim token and a live lease. Zero rows there is ErrClaimLost and
// rolls everything back: a worker whose lease expired cannot complete a job another worker has
// claimed since, nor write media status or notifications for it.
package encodejobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/notify"
)

// Status is a job's state.
type Status string

// The job statuses.
const (
	StatusPending    Status = "PENDING"
	StatusProcessing Status = "PROCESSING"
	StatusCompleted  Status = "COMPLETED"
	StatusDead       Status = "DEAD"
)

// ErrClaimLost means the job is no longer ours: the lease expired and another worker may have
// claimed it. Whatever the caller was about to write must not be written.
var ErrClaimLost = errors.New("encodejobs: claim lost")

// Job is a claimed job.
type Job struct {
	ID         int64
	Kind       string
	MediaID    int64
	ClaimToken string
	// Attempt is this claim's attempt number, from 1.
	Attempt     int
	MaxAttempts int
	EnqueuedAt  time.Time
}

// LastAttempt reports whether a failure of this attempt makes the job DEAD.
func (j Job) LastAttempt() bool { return j.Attempt >= j.MaxAttempts }

// Queue runs the queue's SQL.
type Queue struct {
	pool  *pgxpool.Pool
	lease time.Duration
}

// NewQueue returns a Queue whose claims hold a lease of the given length.
func NewQueue(pool *pgxpool.Pool, lease time.Duration) *Queue {
	return &Queue{pool: pool, lease: lease}
}

// Enqueue inserts a PENDING job inside the caller's transaction, so the job exists exactly
// when the caller's change (an uploaded media row) commits, and wakes idle workers on commit.
func Enqueue(ctx context.Context, tx pgx.Tx, kind string, mediaID int64, maxAttempts int) (int64, error) {
	var id int64
	err := tx.QueryRow(ctx, `INSERT INTO jobs (kind, media_id, max_attempts) VALUES ($1, $2, $3) RETURNING id`,
		kind, mediaID, maxAttempts).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("enqueue %s job: %w", kind, err)
	}
	return id, notify.Send(ctx, tx, notify.ChannelJobs, kind)
}

// claimSQL claims up to $3 jobs of the given kinds: PENDING and due, or PROCESSING with an
// expired lease, with attempts left, oldest first. SKIP LOCKED lets concurrent claimers take
// different rows without waiting; the statement commits on its own, so the row locks last
// only as long as the statement.
//
// The two shapes are two index scans that each stop at the limit, merged afterwards. One scan
// with "PENDING OR expired" cannot use either partial index in order, so it read and sorted the
// whole backlog on every claim: 0.4 ms at 500 queued jobs, 2.5 ms at 8 000 (measured, see
// docs/performance.md). The rows a scan locks but the merge does not pick are released when the
// statement commits.
const claimSQL = `
WITH pending AS (
    SELECT id, available_at FROM jobs
    WHERE status = 'PENDING' AND available_at <= statement_timestamp()
      AND kind = ANY($1::text[]) AND attempt_count < max_attempts
    ORDER BY available_at, id
    LIMIT $3
    FOR UPDATE SKIP LOCKED
), expired AS (
    SELECT id, available_at FROM jobs
    WHERE status = 'PROCESSING' AND lease_until <= statement_timestamp()
      AND kind = ANY($1::text[]) AND attempt_count < max_attempts
    ORDER BY lease_until
    LIMIT $3
    FOR UPDATE SKIP LOCKED
), candidate AS (
    SELECT id FROM (SELECT * FROM pending UNION ALL SELECT * FROM expired) c
    ORDER BY available_at, id
    LIMIT $3
)
UPDATE jobs j
SET status = 'PROCESSING',
    attempt_count = j.attempt_count + 1,
    claim_token = gen_random_uuid(),
    claimed_by = $2,
    lease_until = statement_timestamp() + $4::interval
FROM candidate
WHERE j.id = candidate.id
RETURNING j.id, j.kind, j.media_id, j.claim_token::text, j.attempt_count, j.max_attempts, j.enqueued_at`

// Claim claims up to n due jobs of kinds for node.
func (q *Queue) Claim(ctx context.Context, kinds []string, n int, node string) ([]Job, error) {
	rows, err := q.pool.Query(ctx, claimSQL, kinds, node, n, q.lease)
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	jobs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Job, error) {
		var j Job
		err := row.Scan(&j.ID, &j.Kind, &j.MediaID, &j.ClaimToken, &j.Attempt, &j.MaxAttempts, &j.EnqueuedAt)
		return j, err
	})
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
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

// DomainFunc makes a job's domain writes inside the fenced transaction. owner is the media
// owner's member id (already locked, as is the media row).
type DomainFunc func(ctx context.Context, tx pgx.Tx, owner int64) error

// Complete marks the job COMPLETED after domain's writes, in one fenced transaction.
func (q *Queue) Complete(ctx context.Context, j Job, domain DomainFunc) error {
	return q.fenced(ctx, j, domain,
		`UPDATE jobs SET status = 'COMPLETED', completed_at = statement_timestamp(), lease_until = NULL, last_error = NULL WHERE `+fence)
}

// Retry gives the job back as PENDING, due after delay, recording cause.
func (q *Queue) Retry(ctx context.Context, j Job, cause string, delay time.Duration) error {
	return q.fenced(ctx, j, nil,
		`UPDATE jobs SET status = 'PENDING', available_at = statement_timestamp() + $3::interval,
		        claim_token = NULL, claimed_by = NULL, lease_until = NULL, last_error = $4 WHERE `+fence,
		delay, cause)
}

// Dead marks the job DEAD after domain's writes (media FAILED, a notification).
func (q *Queue) Dead(ctx context.Context, j Job, reason string, domain DomainFunc) error {
	return q.fenced(ctx, j, domain,
		`UPDATE jobs SET status = 'DEAD', completed_at = statement_timestamp(), lease_until = NULL, last_error = $3 WHERE `+fence,
		reason)
}

// Release gives a claim back on a graceful stop: PENDING at once, with the attempt returned,
// because a controlled stop is not a failure of the job.
func (q *Queue) Release(ctx context.Context, j Job) error {
	tag, err := q.pool.Exec(ctx, `
		UPDATE jobs SET status = 'PENDING', attempt_count = attempt_count - 1, available_at = statement_timestamp(),
		       claim_token = NULL, claimed_by = NULL, lease_until = NULL
		WHERE attempt_count > 0 AND `+fence, j.ID, j.ClaimToken)
	if err != nil {
		return fmt.Errorf("release job %d: %w", j.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return ErrClaimLost
	}
	// Another node may be idle: tell it now rather than at its next poll.
	return notify.Send(ctx, q.pool, notify.ChannelJobs, j.Kind)
}

// fenced runs domain and then the job update final in one transaction, locking members →
// media → jobs in that order (the same order as every other writer, so no deadlock), and
// rolls back with ErrClaimLost when final updates no row.
func (q *Queue) fenced(ctx context.Context, j Job, domain DomainFunc, final string, args ...any) error {
	err := pgx.BeginFunc(ctx, q.pool, func(tx pgx.Tx) error {
		owner, err := lockMediaOwner(ctx, tx, j.MediaID)
		if err != nil {
			return err
		}
		if domain != nil {
			if err := domain(ctx, tx, owner); err != nil {
				return err
			}
		}
		tag, err := tx.Exec(ctx, final, append([]any{j.ID, j.ClaimToken}, args...)...)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return ErrClaimLost
		}
		return nil
	})
	if err != nil && !errors.Is(err, ErrClaimLost) {
		return fmt.Errorf("finish job %d: %w", j.ID, err)
	}
	return err
}

// lockMediaOwner locks the media's owner row, then the media row, and returns the owner: two
// statements, so the order of the locks is certain.
func lockMediaOwner(ctx context.Context, tx pgx.Tx, mediaID int64) (int64, error) {
	if _, err := tx.Exec(ctx, `SELECT 1 FROM members WHERE id = (SELECT owner_id FROM media WHERE id = $1) FOR UPDATE`, mediaID); err != nil {
		return 0, err
	}
	var owner int64
	if err := tx.QueryRow(ctx, `SELECT owner_id FROM media WHERE id = $1 FOR UPDATE`, mediaID).Scan(&owner); err != nil {
		return 0, fmt.Errorf("media %d: %w", mediaID, err)
	}
	return owner, nil
}

// SweepExpired turns PROCESSING jobs whose lease expired on their last attempt into DEAD,
// with fail's domain writes, in the same lock order as a fenced finish. It returns the jobs
// it swept. A job whose lease expired with attempts left is not swept: the next claim takes it.
func (q *Queue) SweepExpired(ctx context.Context, fail func(kind string) DeadFunc) ([]Job, error) {
	rows, err := q.pool.Query(ctx, `
		SELECT id, kind, media_id, claim_token::text, attempt_count, max_attempts, enqueued_at FROM jobs
		WHERE status = 'PROCESSING' AND lease_until <= statement_timestamp() AND attempt_count >= max_attempts
		ORDER BY lease_until LIMIT 100`)
	if err != nil {
		return nil, fmt.Errorf("find expired jobs: %w", err)
	}
	candidates, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Job, error) {
		var j Job
		err := row.Scan(&j.ID, &j.Kind, &j.MediaID, &j.ClaimToken, &j.Attempt, &j.MaxAttempts, &j.EnqueuedAt)
		return j, err
	})
	if err != nil {
		return nil, fmt.Errorf("find expired jobs: %w", err)
	}
	var swept []Job
	for _, j := range candidates {
		const reason = "lease expired on the last attempt (the worker died or hung)"
		dead := false
		err := pgx.BeginFunc(ctx, q.pool, func(tx pgx.Tx) error {
			owner, err := lockMediaOwner(ctx, tx, j.MediaID)
			if err != nil {
				return err
			}
			tag, err := tx.Exec(ctx, `
				UPDATE jobs SET status = 'DEAD', completed_at = statement_timestamp(), lease_until = NULL, last_error = $3
				WHERE id = $1 AND status = 'PROCESSING' AND claim_token = $2::uuid AND lease_until <= statement_timestamp()`,
				j.ID, j.ClaimToken, reason)
			if err != nil || tag.RowsAffected() == 0 {
				return err // 0 rows: another node swept it first
			}
			dead = true
			if f := fail(j.Kind); f != nil {
				return f(ctx, tx, j, owner, WithReason(errors.New(reason), "processing stopped: the worker running it died or hung"))
			}
			return nil
		})
		if err != nil {
			return swept, fmt.Errorf("sweep job %d: %w", j.ID, err)
		}
		if dead {
			swept = append(swept, j)
		}
	}
	return swept, nil
}

// DeadFunc makes the domain writes of a job that will never succeed (media FAILED, one
// notification), inside the transaction that marks it DEAD. cause is the last attempt's error;
// ReasonOf(cause) is what the media's owner may be told.
type DeadFunc func(ctx context.Context, tx pgx.Tx, j Job, owner int64, cause error) error
