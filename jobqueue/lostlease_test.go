package jobqueue_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/jobqueue"
)

// A lease lost (the worker killed, hung, cut off) spends none of the job's attempts: the job
// is claimed again on its one and only attempt, each time only after its lost-lease back-off
// (the kind's LostLeaseBackoff, doubling with each lost lease), and the rescuer, not a claim,
// ends it once it lost MaxLostLeases leases: DEAD, with a reason that says its worker died or
// hung on each of its runs.
func TestLostLease_SpendsNoAttemptAndEndsAfterMaxLostLeases(t *testing.T) {
	t.Parallel()
	const maxLost = 3
	b := setup(t)
	ctx := context.Background()
	kind := jobqueue.Kind{Name: "fragile", MaxLostLeases: maxLost, LostLeaseBackoff: time.Minute}
	q := newQueue(t, b.pool, time.Minute, kind)
	rescuer := jobqueue.NewRescuer(q, jobqueue.RescuerConfig{Logger: quiet})
	id := insert(t, b.pool, jobqueue.Spec{Kind: "fragile", Subject: 1, MaxAttempts: 1}).ID
	// expiredFor makes the job's lease have run out d ago.
	expiredFor := func(d time.Duration) {
		t.Helper()
		if _, err := b.pool.Exec(ctx, `UPDATE jobs SET lease_until = statement_timestamp() - $2::interval WHERE id = $1`, id, d); err != nil {
			t.Fatal(err)
		}
	}
	nothingClaimed := func(when string) {
		t.Helper()
		if jobs, err := q.Claim(ctx, "fragile", 1, "node"); err != nil || len(jobs) != 0 {
			t.Fatalf("%s: claimed %+v (%v), want nothing", when, jobs, err)
		}
	}
	nothingSwept := func(when string) {
		t.Helper()
		if swept, err := rescuer.Sweep(ctx); err != nil || len(swept) != 0 {
			t.Fatalf("%s: the rescuer swept %+v (%v), want nothing", when, swept, err)
		}
	}

	j := claimOne(t, q, "fragile")
	if j.Attempt != 1 || !j.LastAttempt() || j.LostLeases != 0 {
		t.Fatalf("first claim %+v, want attempt 1 of 1, no lost lease", j)
	}
	// Lost lease n (from 1) waits LostLeaseBackoff · 2^(n−1) before the job is claimed again.
	for lost, backoff := 1, time.Minute; lost < maxLost; lost, backoff = lost+1, 2*backoff {
		expiredFor(backoff - time.Second)
		nothingClaimed("within the back-off")
		nothingSwept("with leases left to lose")
		expiredFor(backoff + time.Millisecond)
		again := claimOne(t, q, "fragile")
		if again.ClaimToken == j.ClaimToken || again.Attempt != 1 || again.LostLeases != lost {
			t.Fatalf("claim after lost lease %d: %+v, want a new token, attempt 1 still, %d lost leases", lost, again, lost)
		}
		j = again
	}
	// The last lease is lost: no claim takes the job again, however long after, and the
	// rescuer makes it DEAD.
	expiredFor(jobqueue.LostLeaseBackoffCap + time.Hour)
	nothingClaimed("after the last lease was lost")
	swept, err := rescuer.Sweep(ctx)
	if err != nil || len(swept) != 1 || swept[0].ID != id {
		t.Fatalf("the rescuer swept %+v (%v), want job %d", swept, err, id)
	}
	row, err := q.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if row.Status != jobqueue.StatusDead || row.AttemptCount != 1 || row.LastError == nil ||
		!strings.Contains(*row.LastError, "died or hung on each of the job's 3 runs") {
		t.Fatalf("job after the sweep: %s, %d attempts, last error %v; want DEAD, 1 attempt, its worker dead on each of its 3 runs",
			row.Status, row.AttemptCount, row.LastError)
	}
	// An administrator's retry gives it fresh attempts and fresh leases to lose.
	if err := q.RetryDead(ctx, id); err != nil {
		t.Fatal(err)
	}
	if j := claimOne(t, q, "fragile"); j.Attempt != 1 || j.LostLeases != 0 {
		t.Fatalf("claim after an admin retry: %+v, want attempt 1, no lost lease", j)
	}
}

// The lost-lease back-off is capped at LostLeaseBackoffCap, however many leases were lost.
func TestLostLease_BackoffIsCapped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	q := newQueue(t, b.pool, time.Minute, jobqueue.Kind{Name: "fragile", MaxLostLeases: 100})
	id := insert(t, b.pool, jobqueue.Spec{Kind: "fragile", Subject: 1, MaxAttempts: 1}).ID
	claimOne(t, q, "fragile")
	// 40 leases lost: uncapped, the back-off would be 2^40 s.
	if _, err := b.pool.Exec(ctx, `UPDATE jobs SET lost_count = 40, lease_until = statement_timestamp() - $2::interval WHERE id = $1`,
		id, jobqueue.LostLeaseBackoffCap+time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if j := claimOne(t, q, "fragile"); j.LostLeases != 41 {
		t.Fatalf("claimed %+v, want the job with 41 lost leases", j)
	}
}

// A claim that took a job over after a lost lease carries on the attempt the lost claim
// counted, so a graceful stop's Release gives that attempt back: the job is PENDING at attempt
// 0, as if it had never run, and its next claim is attempt 1 again.
func TestLostLease_ReleaseAfterATakeoverGivesTheAttemptBack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	q := newQueue(t, b.pool, time.Minute, jobqueue.Kind{Name: "fragile"})
	insert(t, b.pool, jobqueue.Spec{Kind: "fragile", Subject: 1, MaxAttempts: 3})
	claimOne(t, q, "fragile")
	b.expireLeases(t)
	takeover := claimOne(t, q, "fragile")
	if err := q.Release(ctx, takeover); err != nil {
		t.Fatal(err)
	}
	if again := claimOne(t, q, "fragile"); again.Attempt != 1 || again.LostLeases != 1 {
		t.Fatalf("claim after the release: %+v, want attempt 1 again, 1 lost lease", again)
	}
}

// A job of a group that lost its last lease goes DEAD by the rescuer like any other job of a
// group: the jobs that wait for it are cancelled with it, in the sweep's transaction, not left
// WAITING for a parent that will never complete.
func TestLostLease_RescuerCancelsTheDependantsOfAGroupJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	q := newQueue(t, b.pool, time.Minute, jobqueue.Kind{Name: "fragile", MaxLostLeases: 1}, jobqueue.Kind{Name: "after"})
	var ids []int64
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		var err error
		ids, err = jobqueue.EnqueueGroup(ctx, tx, []jobqueue.GroupJob{
			{Kind: "fragile", Subject: 1, MaxAttempts: 3},
			{Kind: "after", Subject: 1, MaxAttempts: 3, After: []int{0}},
		})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	claimOne(t, q, "fragile")
	b.expireLeases(t)
	swept, err := jobqueue.NewRescuer(q, jobqueue.RescuerConfig{Logger: quiet}).Sweep(ctx)
	if err != nil || len(swept) != 1 || swept[0].ID != ids[0] {
		t.Fatalf("the rescuer swept %+v (%v), want job %d", swept, err, ids[0])
	}
	if n := b.count(t, `SELECT count(*) FROM jobs WHERE id = ANY($1) AND status = 'DEAD'`, ids); n != 2 {
		t.Fatalf("%d of the group's 2 jobs DEAD after the sweep, want both: the dependant cancelled with its parent", n)
	}
}

// A job that lost its lease keeps its turn: once its back-off has passed, the next claim takes
// it before the backlog enqueued after it, not after the whole backlog.
func TestLostLease_ClaimedAgainInItsTurn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	q := newQueue(t, b.pool, time.Minute, jobqueue.Kind{Name: "fragile"})
	lost := insert(t, b.pool, jobqueue.Spec{Kind: "fragile", Subject: 1, MaxAttempts: 3})
	claimOne(t, q, "fragile")
	for i := range 5 {
		insert(t, b.pool, jobqueue.Spec{Kind: "fragile", Subject: int64(10 + i), MaxAttempts: 3})
	}
	if _, err := b.pool.Exec(ctx, `UPDATE jobs SET lease_until = statement_timestamp() - $2::interval WHERE id = $1`,
		lost.ID, jobqueue.LostLeaseBackoffCap+time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if j := claimOne(t, q, "fragile"); j.ID != lost.ID || j.LostLeases != 1 {
		t.Fatalf("claimed %+v, want job %d again, ahead of the jobs enqueued after it", j, lost.ID)
	}
}
