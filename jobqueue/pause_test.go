package jobqueue_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/jobqueue"
)

// A paused kind is claimed by no node, neither its due jobs nor its expired ones, from the
// moment the pause commits; its running jobs finish, its jobs are still enqueued, other kinds
// run on. Resume wakes the idle runners (a NOTIFY on the jobs channel) and claims go on.
func TestPause_NoNodeClaimsUntilResume(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.insertJobs(t, "encode", 3)
	b.insertJobs(t, "ingest", 1)
	kinds := []jobqueue.Kind{{Name: "encode"}, {Name: "ingest"}}
	one, two := newQueue(t, b.pool, time.Minute, kinds...), newQueue(t, ownPool(t, b.url), time.Minute, kinds...)
	running := claimOne(t, one, "encode")
	expiring := claimOne(t, one, "encode")

	if err := one.Pause(ctx, "encode", "admin 1"); err != nil {
		t.Fatal(err)
	}
	if err := two.Pause(ctx, "encode", "admin 2"); err != nil {
		t.Fatal(err)
	}
	paused, err := two.Paused(ctx)
	if err != nil || len(paused) != 1 || paused[0].Kind != "encode" || paused[0].PausedBy != "admin 1" || paused[0].PausedAt.IsZero() {
		t.Fatalf("paused kinds = %+v (%v), want encode, by its first pauser", paused, err)
	}
	insert(t, b.pool, jobqueue.Spec{Kind: "encode", Subject: 9, MaxAttempts: 3})
	if _, err := b.pool.Exec(ctx, `UPDATE jobs SET lease_until = statement_timestamp() - $2::interval WHERE id = $1`,
		expiring.ID, jobqueue.LostLeaseBackoffCap+time.Millisecond); err != nil {
		t.Fatal(err)
	}
	for name, q := range map[string]*jobqueue.Queue{"one": one, "two": two} {
		if jobs, err := q.Claim(ctx, "encode", 10, name); err != nil || len(jobs) != 0 {
			t.Fatalf("node %s claimed %d jobs of the paused kind (%v), want none", name, len(jobs), err)
		}
	}
	if jobs, err := two.Claim(ctx, "ingest", 10, "two"); err != nil || len(jobs) != 1 {
		t.Fatalf("a claim of another kind took %d jobs (%v), want 1", len(jobs), err)
	}
	if err := one.Heartbeat(ctx, running); err != nil {
		t.Fatalf("a running job of the paused kind could not heartbeat: %v", err)
	}
	if err := one.Complete(ctx, running, nil); err != nil {
		t.Fatalf("a running job of the paused kind could not finish: %v", err)
	}

	listener, err := pgx.Connect(ctx, b.url)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close(context.Background())
	if _, err := listener.Exec(ctx, `LISTEN `+jobqueue.Channel); err != nil {
		t.Fatal(err)
	}
	if err := two.Resume(ctx, "encode"); err != nil {
		t.Fatal(err)
	}
	// A safety net only: the notification comes at the resume's commit.
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	n, err := listener.WaitForNotification(waitCtx)
	if err != nil || n.Payload != "encode" {
		t.Fatalf("notification after the resume = %+v (%v), want one for encode", n, err)
	}
	if paused, err := one.Paused(ctx); err != nil || len(paused) != 0 {
		t.Fatalf("paused kinds after the resume = %+v (%v), want none", paused, err)
	}
	// The two pending jobs, and the expired one.
	if jobs, err := one.Claim(ctx, "encode", 10, "one"); err != nil || len(jobs) != 3 {
		t.Fatalf("a claim after the resume took %d jobs (%v), want 3", len(jobs), err)
	}
	if err := one.Resume(ctx, "encode"); err != nil {
		t.Fatalf("resuming a kind that is not paused: %v", err)
	}
}
