package jobqueue

import (
	"context"
	"math/rand"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/pgtest"
)

// SKIP LOCKED is only on the SELECT. The INSERT … ON CONFLICT DO NOTHING before it
// waits for any in-progress transaction that has *written* the row (the dirty-snapshot
// uniqueness check waits on an in-progress xmin/xmax that is not lock-only). The scheduler's
// own transaction always ends with an UPDATE of the row, so a node frozen after that UPDATE
// and before COMMIT (or an operator's UPDATE left open) stalled every other node's tick on
// this kind, and since a tick takes the kinds one after the other, every periodic kind. The
// scheduler looks first (SKIP LOCKED) and inserts only a kind it has never seen.
func TestScheduler_ARowAnotherTransactionUpdatedDoesNotStallIt(t *testing.T) {
	pool, _ := pgtest.Pool(t)
	ctx := context.Background()
	k := Kind{Name: "a-updated", Periodic: &Periodic{Schedule: mustEvery(t, time.Second)}}
	s := NewScheduler(schedQueue(t, pool, k), SchedulerConfig{Interval: time.Hour, Logger: schedQuiet})
	if _, err := pool.Exec(ctx, `INSERT INTO job_schedules (kind, schedule, last_run) VALUES ('a-updated', 'every 1s', now())`); err != nil {
		t.Fatal(err)
	}
	holder, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Rollback(ctx) })
	// What the scheduler's own transaction does last, before its COMMIT.
	if _, err := holder.Exec(ctx, `UPDATE job_schedules SET next_run = now() WHERE kind = 'a-updated'`); err != nil {
		t.Fatal(err)
	}
	// A safety net only: an enqueue that waits on the holder fails with the deadline.
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if run, err := s.enqueueDue(tctx, k); err != nil || !run.busy {
		t.Errorf("enqueueDue on a row another open transaction updated: busy=%v err=%v (want busy, without waiting)", run.busy, err)
	}
}

// The arithmetic skipped count for Every against the walk it replaced.
func TestDueRunTime_EverySkippedMatchesTheWalk(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	for i := 0; i < 20000; i++ {
		d := time.Duration(1+r.Intn(7200)) * time.Second
		last := time.Unix(1_700_000_000+r.Int63n(1_000_000), r.Int63n(1e9)).UTC().Truncate(time.Microsecond)
		now := last.Add(time.Duration(r.Int63n(int64(50 * d))))
		s := every(d)
		due, skipped, ok := dueRunTime(s, last, now)
		var walkLatest time.Time
		var n int64
		for t := s.Next(last); !t.After(now); t = s.Next(t) {
			walkLatest = t
			n++
		}
		if ok != (n > 0) {
			t.Fatalf("d=%s last=%s now=%s: ok=%v, walk found %d", d, last, now, ok, n)
		}
		if ok && (!due.Equal(walkLatest) || skipped != n-1) {
			t.Fatalf("d=%s last=%s now=%s: due=%s skipped=%d, walk %s %d", d, last, now, due, skipped, walkLatest, n-1)
		}
	}
}
