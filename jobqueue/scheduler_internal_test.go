package jobqueue

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/internal/pgtest"
)

// These tests drive the scheduler's transaction (enqueueDue) and its loop directly, so that
// what they look at does not depend on when a tick lands.

var schedQuiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// schedWait waits for cond; the deadline is only a safety net.
func schedWait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func schedCount(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func mustEvery(t *testing.T, d time.Duration) Schedule {
	t.Helper()
	s, err := Every(d)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func schedQueue(t *testing.T, pool *pgxpool.Pool, kinds ...Kind) *Queue {
	t.Helper()
	q, err := NewQueue(pool, time.Minute, kinds...)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// An interval finer than a second is refused: job_schedules keeps last_run in microseconds
// (pgx truncates) and a job names its run time in milliseconds, so a run time with a
// sub-microsecond part would be stored just before itself, and the next look would find that
// same run time due again and enqueue it a second time (Every(time.Hour/7), for one).
func TestEvery_RefusesIntervalsFinerThanASecond(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{time.Hour + time.Nanosecond, time.Hour / 7, 1500 * time.Millisecond, 999 * time.Millisecond, 0, -time.Hour} {
		if _, err := Every(d); err == nil {
			t.Errorf("Every(%s) accepted", d)
		}
	}
	for _, d := range []time.Duration{time.Second, 90 * time.Second, 7 * time.Hour} {
		if _, err := Every(d); err != nil {
			t.Errorf("Every(%s): %v", d, err)
		}
	}
}

// docs/operations/guarantees.md: "Run times missed while every node was down are not made up for:
// the latest runs once when a node is back, the others are counted as skipped". After more than a
// day down, the catch-up jump counts one for everything before the last day.
func TestDueRunTime_OutageOverADayCountsEveryMissedRunTime(t *testing.T) {
	t.Parallel()
	hourly := mustEvery(t, time.Hour)
	last := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	now := time.Date(2026, 12, 3, 10, 20, 0, 0, time.UTC) // ten days later: 240 run times since
	due, skipped, ok := dueRunTime(hourly, last, now)
	if !ok || !due.Equal(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)) {
		t.Fatalf("due %s (%v), want 10:00 on the 3rd", due, ok)
	}
	if want := int64(239); skipped != want {
		t.Errorf("ten days down on an hourly schedule: %d counted as skipped, %d were missed", skipped, want)
	}
}

// A schedule down for days on a one-second interval runs its latest run time, not a stale one
// cut short by the walk's step bound (the catch-up jump is what keeps the walk within it).
func TestDueRunTime_SecondlyScheduleDownForDaysRunsItsLatest(t *testing.T) {
	t.Parallel()
	secondly := mustEvery(t, time.Second)
	now := time.Date(2026, 12, 3, 10, 20, 0, 500_000_000, time.UTC)
	last := now.Add(-72 * time.Hour).Truncate(time.Second)
	due, skipped, ok := dueRunTime(secondly, last, now)
	if !ok || !due.Equal(now.Truncate(time.Second)) {
		t.Errorf("three days down: due %s (%v), want the latest run time %s", due, ok, now.Truncate(time.Second))
	}
	if skipped < 1 {
		t.Errorf("three days down: %d skipped", skipped)
	}
}

// A kind whose schedule goes from every minute to every second in a deploy: no node was down
// and no run time of either schedule was missed, yet the first look under the new schedule
// counts every second since the last minutely run as skipped (and the metric
// playhead_jobs_schedule_skipped_total jumps with it).
func TestScheduler_ScheduleShortenedInADeployCountsNothingSkipped(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Pool(t)
	ctx := context.Background()
	// The old schedule's last run time, this minute's, was enqueued by the old deploy.
	if _, err := pool.Exec(ctx, `INSERT INTO job_schedules (kind, schedule, last_run, next_run)
		VALUES ('rollup', 'every 1m0s', date_trunc('minute', now()), date_trunc('minute', now()) + interval '1 minute')`); err != nil {
		t.Fatal(err)
	}
	schedWait(t, "three seconds of the database's clock past the last run", func() bool {
		return schedCount(t, pool, `SELECT count(*) FROM job_schedules WHERE statement_timestamp() >= last_run + interval '3 seconds'`) == 1
	})
	k := Kind{Name: "rollup", Periodic: &Periodic{Schedule: mustEvery(t, time.Second)}}
	s := NewScheduler(schedQueue(t, pool, k), SchedulerConfig{Logger: schedQuiet})
	run, err := s.enqueueDue(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if run.job == 0 {
		t.Fatal("no run time due")
	}
	if run.skipped != 0 {
		t.Errorf("new schedule every 1s, old every 1m, no node down: %d run times counted as skipped", run.skipped)
	}
}

// A cron expression that never fires ("0 0 30 2 *": February 30th) is accepted: the schedule
// is listed with no next run time (null, not year 1) and nothing is enqueued.
func TestScheduler_NeverFiringCronHasNoNextRun(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Pool(t)
	ctx := context.Background()
	never, err := Cron("0 0 30 2 *")
	if err != nil {
		t.Fatal(err)
	}
	k := Kind{Name: "never", Periodic: &Periodic{Schedule: never}}
	q := schedQueue(t, pool, k)
	s := NewScheduler(q, SchedulerConfig{Logger: schedQuiet})
	for range 2 {
		run, err := s.enqueueDue(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if run.job != 0 || !run.next.IsZero() {
			t.Fatalf("never-firing schedule: %+v", run)
		}
	}
	rows, err := q.Schedules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].NextRun != nil || rows[0].LastJob != nil {
		t.Fatalf("schedules %+v, want one with no next run and no job", rows)
	}
	if n := schedCount(t, pool, `SELECT count(*) FROM job_schedules WHERE next_run IS NULL`); n != 1 {
		t.Errorf("next_run stored for a schedule that has none")
	}
}

// lockWaiters counts the backends of the test's database waiting on a lock.
func lockWaiters(t *testing.T, pool *pgxpool.Pool) int {
	return schedCount(t, pool, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)
}

// One node holds a kind's job_schedules row locked (its transaction open: a node frozen or cut
// off from the network between its SELECT … FOR UPDATE and its COMMIT; nothing bounds it, no
// lock_timeout, no idle_in_transaction_session_timeout). Were the other nodes' schedulers to
// wait on the lock, every other periodic kind would stop being enqueued too, on every node,
// since a tick takes the kinds one after the other. They skip the locked row (SKIP LOCKED):
// the other kind runs, nobody waits, and the locked kind runs once the holder lets go.
func TestScheduler_LockedScheduleRowDoesNotStopTheOtherKinds(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Pool(t)
	ctx := context.Background()
	locked := Kind{Name: "a-locked", Periodic: &Periodic{Schedule: mustEvery(t, time.Second)}}
	free := Kind{Name: "b-free", Periodic: &Periodic{Schedule: mustEvery(t, time.Second)}}
	if _, err := pool.Exec(ctx, `INSERT INTO job_schedules (kind, schedule, last_run) VALUES ('a-locked', 'every 1s', now()), ('b-free', 'every 1s', now())`); err != nil {
		t.Fatal(err)
	}
	holder, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Rollback(ctx) })
	if _, err := holder.Exec(ctx, `SELECT 1 FROM job_schedules WHERE kind = 'a-locked' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	s := NewScheduler(schedQueue(t, pool, locked, free), SchedulerConfig{Interval: 20 * time.Millisecond, Logger: schedQuiet})
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(ctx) })
	schedWait(t, "three run times of the unlocked kind", func() bool {
		return schedCount(t, pool, `SELECT count(*) FROM jobs WHERE kind = 'b-free'`) >= 3
	})
	if n := lockWaiters(t, pool); n != 0 {
		t.Errorf("%d backends waiting on a lock", n)
	}
	if n := schedCount(t, pool, `SELECT count(*) FROM jobs WHERE kind = 'a-locked'`); n != 0 {
		t.Errorf("%d jobs of the locked kind while its row was held", n)
	}
	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	schedWait(t, "a run time of the kind once its row is free", func() bool {
		return schedCount(t, pool, `SELECT count(*) FROM jobs WHERE kind = 'a-locked'`) >= 1
	})
}

// Stop ends a tick whose database accepts the connection and never answers.
func TestScheduler_StopEndsATickOnADatabaseThatDoesNotAnswer(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	var accepted atomic.Int32
	conns := make(chan net.Conn, 100)
	t.Cleanup(func() {
		_ = ln.Close()
		for {
			select {
			case c := <-conns:
				_ = c.Close()
			default:
				return
			}
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			select {
			case conns <- c: // kept open, never answered
			default:
				_ = c.Close()
			}
		}
	}()
	pool, err := pgxpool.New(context.Background(), "postgres://u:p@"+ln.Addr().String()+"/db?sslmode=disable&connect_timeout=0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	k := Kind{Name: "silent", Periodic: &Periodic{Schedule: mustEvery(t, time.Second)}}
	s := NewScheduler(schedQueue(t, pool, k), SchedulerConfig{Interval: 20 * time.Millisecond, Logger: schedQuiet})
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	schedWait(t, "a tick connecting", func() bool { return accepted.Load() > 0 })
	stopCtx, cancel := context.WithTimeout(context.Background(), time.Minute) // a safety net
	defer cancel()
	if err := s.Stop(stopCtx); err != nil {
		t.Fatalf("stop while the database does not answer: %v", err)
	}
}

// warnings counts the scheduler's warnings.
type warnings struct{ n atomic.Int32 }

func (w *warnings) Write(p []byte) (int, error) {
	if strings.Contains(string(p), "periodic enqueue failed") {
		w.n.Add(1)
	}
	return len(p), nil
}

// A tick that fails (the table is gone for a moment) is tried again at the next tick, not a
// recheck later: the node's cache of the next run time is not set by a failure.
func TestScheduler_FailedTickIsRetriedAtTheNextTick(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Pool(t)
	ctx := context.Background()
	k := Kind{Name: "flaky", Periodic: &Periodic{Schedule: mustEvery(t, time.Second)}}
	// Far behind: a run time is due as soon as the table is back.
	if _, err := pool.Exec(ctx, `INSERT INTO job_schedules (kind, schedule, last_run) VALUES ('flaky', 'every 1s', now() - interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ALTER TABLE job_schedules RENAME TO job_schedules_away`); err != nil {
		t.Fatal(err)
	}
	var w warnings
	s := NewScheduler(schedQueue(t, pool, k), SchedulerConfig{Interval: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&w, nil))})
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(ctx) })
	schedWait(t, "a failed tick", func() bool { return w.n.Load() > 0 })
	if _, err := pool.Exec(ctx, `ALTER TABLE job_schedules_away RENAME TO job_schedules`); err != nil {
		t.Fatal(err)
	}
	// The recheck bound (a minute) would be the wait if the failure had set the cache; the
	// safety net is shorter than it.
	deadline := time.Now().Add(recheck / 2)
	for schedCount(t, pool, `SELECT count(*) FROM jobs WHERE kind = 'flaky'`) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no run time enqueued after the table came back")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A weekly schedule weeks behind, looked at mid-week: the catch-up jump (the first run time of
// the last day) is then after now, and the run time due is still the latest one before now,
// never the coming one ahead of its time.
func TestDueRunTime_FarBehindWeeklyScheduleNeverRunsAheadOfNow(t *testing.T) {
	t.Parallel()
	weekly, err := Cron("0 3 * * 0") // Sundays 03:00 UTC
	if err != nil {
		t.Fatal(err)
	}
	last := time.Date(2026, 11, 8, 3, 0, 0, 0, time.UTC) // a Sunday, three weeks before
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC) // a Wednesday
	due, skipped, ok := dueRunTime(weekly, last, now)
	if want := time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC); !ok || !due.Equal(want) || skipped != 2 {
		t.Errorf("due %s (%v), %d skipped; want %s, 2 skipped", due, ok, skipped, want)
	}
}

// Through PgBouncer in transaction mode (PLAYHEAD_TEST_PGBOUNCER=1), two schedulers on
// pools of their own enqueue each run time once.
func TestScheduler_ThroughPgBouncerEnqueuesEachRunTimeOnce(t *testing.T) {
	t.Parallel()
	_, direct := pgtest.Pool(t)
	pooled := pgtest.PooledURL(t, direct)
	if pooled == "" {
		t.Skip("no PgBouncer: set " + pgtest.EnvPgBouncer + "=1")
	}
	ctx := context.Background()
	check, err := pgxpool.New(ctx, direct)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(check.Close)
	for range 2 {
		pool, err := pgxpool.New(ctx, pooled)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		k := Kind{Name: "bounced", Periodic: &Periodic{Schedule: mustEvery(t, time.Second)}}
		s := NewScheduler(schedQueue(t, pool, k), SchedulerConfig{Interval: 20 * time.Millisecond, Logger: schedQuiet})
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Stop(ctx) })
	}
	schedWait(t, "three run times enqueued", func() bool {
		return schedCount(t, check, `SELECT count(*) FROM jobs WHERE kind = 'bounced'`) >= 3
	})
	if n := schedCount(t, check, `SELECT count(*) FROM (SELECT subject_id FROM jobs GROUP BY 1 HAVING count(*) > 1) d`); n != 0 {
		t.Errorf("%d run times enqueued twice through PgBouncer", n)
	}
}
