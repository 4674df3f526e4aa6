package jobqueue_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
)

func TestPruner_KeepsRecentAndUnfinished(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enqueue(t, "encode", 6)
	ctx := context.Background()
	// Two old COMPLETED, one recent COMPLETED, one old DEAD, one very old DEAD, one PENDING.
	_, err := b.pool.Exec(ctx, `
		UPDATE jobs SET status = v.status, completed_at = statement_timestamp() - v.age::interval
		FROM (VALUES (1, 'COMPLETED', '8 days'), (2, 'COMPLETED', '9 days'), (3, 'COMPLETED', '1 day'),
		             (4, 'DEAD', '10 days'), (5, 'DEAD', '31 days')) AS v(n, status, age)
		WHERE jobs.id = (SELECT min(id) FROM jobs) + v.n - 1`)
	if err != nil {
		t.Fatal(err)
	}
	p := jobqueue.NewPruner(newQueue(t, b.pool, time.Minute), jobqueue.PrunerConfig{
		CompletedAfter: 7 * 24 * time.Hour, DeadAfter: 30 * 24 * time.Hour, Batch: 1, Logger: quiet})
	n, err := p.Prune(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Fatalf("pruned %d, want 3 (two old COMPLETED, one old DEAD; batch size 1)", n)
	}
	if left := b.count(t, `SELECT count(*) FROM jobs`); left != 3 {
		t.Fatalf("%d jobs left, want 3", left)
	}
}

// The prune's DELETE re-checks its status and age conditions on the row it locks: kept only
// inside "id IN (subquery)", under READ COMMITTED a row that an admin retry changed while the
// DELETE waited for its lock would be re-checked against the id alone, and the job — PENDING
// again, its media PROCESSING — deleted. Here the admin retry holds the job's row lock (it
// has made the job PENDING but not committed) while the prune runs; the prune must wait for
// it and then leave the job alone.
func TestPruner_SparesAJobRetriedWhileItWaits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	mediaID := b.enqueue(t, "encode", 1)[0]
	q := newQueue(t, b.pool, time.Minute, media.JobKind("encode"))
	if _, err := b.pool.Exec(ctx, `UPDATE jobs SET status = 'DEAD', completed_at = statement_timestamp() - interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
	var jobID int64
	if err := b.pool.QueryRow(ctx, `SELECT id FROM jobs`).Scan(&jobID); err != nil {
		t.Fatal(err)
	}

	// The admin retry's transaction, paused after its job update.
	retry, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = retry.Rollback(ctx) }()
	if _, err := retry.Exec(ctx, `SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE`, jobID); err != nil {
		t.Fatal(err)
	}
	var retryPID int
	if err := retry.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&retryPID); err != nil {
		t.Fatal(err)
	}

	pruned := make(chan int64, 1)
	pruneErr := make(chan error, 1)
	go func() {
		p := jobqueue.NewPruner(q, jobqueue.PrunerConfig{CompletedAfter: time.Minute, DeadAfter: time.Minute, Logger: quiet})
		n, err := p.Prune(ctx)
		pruned <- n
		pruneErr <- err
	}()
	pgtest.WaitBlocked(t, b.pool, retryPID)
	// The retry, as RetryDead does it, then commits.
	if err := retryDeadIn(ctx, retry, jobID, mediaID); err != nil {
		t.Fatal(err)
	}
	if err := retry.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := <-pruned, <-pruneErr; err != nil || n != 0 {
		t.Fatalf("prune = %d, %v; want 0 rows deleted", n, err)
	}
	if n := b.count(t, `SELECT count(*) FROM jobs WHERE id = $1 AND status = 'PENDING'`, jobID); n != 1 {
		t.Fatal("the retried job was deleted by the prune that waited for it")
	}
}

// retryDeadIn makes the writes of an admin retry in tx.
func retryDeadIn(ctx context.Context, tx pgx.Tx, jobID, mediaID int64) error {
	if _, err := tx.Exec(ctx, `
		UPDATE jobs SET status = 'PENDING', attempt_count = 0, available_at = statement_timestamp(),
		       completed_at = NULL, claim_token = NULL, claimed_by = NULL, lease_until = NULL
		WHERE id = $1 AND status = 'DEAD'`, jobID); err != nil {
		return err
	}
	return media.SetStatus(ctx, tx, mediaID, media.StatusProcessing)
}
