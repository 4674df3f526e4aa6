package jobqueue_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/jobqueue"
)

// envSchedulerURL makes the test binary a scheduler node (runSchedulerNode) on the database
// whose URL it holds, named by envSchedulerNode, instead of running tests (TestMain): the nodes
// of the test below are processes, so that a kill -9 is one.
const (
	envSchedulerURL  = "JOBQUEUE_TEST_SCHEDULER_URL"
	envSchedulerNode = "JOBQUEUE_TEST_SCHEDULER_NODE"
)

// tickKind is the periodic kind of the scheduler nodes: every second, its run writes one row
// of ticks_done per run time in its fenced completion, after a pause in which a kill may land.
func tickKind() (jobqueue.Kind, error) {
	every, err := jobqueue.Every(time.Second)
	return jobqueue.Kind{
		Name:     "tick",
		Periodic: &jobqueue.Periodic{Schedule: every, MaxAttempts: 5},
		Run: func(ctx context.Context, j jobqueue.Job) (jobqueue.Result, error) {
			select {
			case <-time.After(150 * time.Millisecond):
			case <-ctx.Done():
				return jobqueue.Result{}, ctx.Err()
			}
			return jobqueue.Result{Commit: func(ctx context.Context, tx pgx.Tx) error {
				_, err := tx.Exec(ctx, `INSERT INTO ticks_done (run_time, node) VALUES ($1, $2)`, jobqueue.RunTime(j), os.Getenv(envSchedulerNode))
				return err
			}}, nil
		},
	}, err
}

// runSchedulerNode is one node: a scheduler and a runner of tickKind, until SIGTERM (a
// graceful stop) or SIGKILL.
func runSchedulerNode(url string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		return err
	}
	defer pool.Close()
	kind, err := tickKind()
	if err != nil {
		return err
	}
	// A 2 s lease: a killed node's job is claimed again by another within about that.
	q, err := jobqueue.NewQueue(pool, 2*time.Second, kind)
	if err != nil {
		return err
	}
	runner, err := jobqueue.NewRunner(q, jobqueue.RunnerConfig{Kind: kind.Name, Node: os.Getenv(envSchedulerNode), Concurrency: 2,
		PollInterval: 100 * time.Millisecond, Logger: quiet})
	if err != nil {
		return err
	}
	scheduler := jobqueue.NewScheduler(q, jobqueue.SchedulerConfig{Interval: 50 * time.Millisecond, Logger: quiet})
	if err := runner.Start(context.Background()); err != nil {
		return err
	}
	if err := scheduler.Start(context.Background()); err != nil {
		return err
	}
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return errors.Join(scheduler.Stop(stopCtx), runner.Stop(stopCtx))
}

// Three node processes enqueue a one-second schedule for ten run times and more while one is
// stopped and started again, one is killed with SIGKILL (mid-run: its job is claimed again
// after its lease) and started again, then every node is down for more than four run
// times and one comes back. Each run time has exactly one job and one effect; every run time
// between the first and the last is either run or counted as skipped (the outage's, and any a
// starved machine missed), and the outage's missed run times run once, as their latest.
func TestScheduler_NodesKilledAndRestartedRunEachRunTimeOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	if _, err := b.pool.Exec(ctx, `CREATE TABLE ticks_done (run_time timestamptz NOT NULL, node text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	nodes := map[string]*exec.Cmd{}
	start := func(name string) {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envSchedulerNode+"="+name, envSchedulerURL+"="+b.url)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		nodes[name] = cmd
	}
	end := func(name string, sig os.Signal) {
		t.Helper()
		cmd := nodes[name]
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		if sig == syscall.SIGTERM && err != nil {
			t.Fatalf("node %s after SIGTERM: %v", name, err)
		}
		delete(nodes, name)
	}
	t.Cleanup(func() {
		for _, cmd := range nodes {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	runTimes := func() int {
		return b.count(t, `SELECT count(*) FROM jobs WHERE kind = 'tick'`)
	}
	// waitRunTimes waits for n more run times enqueued than now.
	waitRunTimes := func(n int) {
		t.Helper()
		want := runTimes() + n
		waitFor(t, fmt.Sprintf("%d run times enqueued", want), func() bool { return runTimes() >= want })
	}
	for _, name := range []string{"a", "b", "c"} {
		start(name)
	}
	waitRunTimes(3)
	end("a", syscall.SIGTERM)
	waitRunTimes(1)
	start("a")
	waitRunTimes(2)
	// The node running a job is killed mid-run: its job waits for its lease to run out.
	var victim string
	waitFor(t, "a tick job running", func() bool {
		return b.pool.QueryRow(ctx, `SELECT claimed_by FROM jobs WHERE kind = 'tick' AND status = 'PROCESSING' LIMIT 1`).Scan(&victim) == nil
	})
	end(victim, syscall.SIGKILL)
	waitRunTimes(2)
	start(victim)
	other := map[string]string{"a": "b", "b": "c", "c": "a"}[victim]
	end(other, syscall.SIGKILL)
	start(other)
	waitRunTimes(3)
	if n := runTimes(); n < 10 {
		t.Fatalf("%d run times before the outage, want at least 10", n)
	}

	// Every node down for more than four run times, then one back: the latest runs, at least
	// three are skipped.
	for _, name := range []string{"a", "b", "c"} {
		end(name, syscall.SIGTERM)
	}
	var lastBefore time.Time
	var skippedBefore int64
	if err := b.pool.QueryRow(ctx, `SELECT last_run, skipped FROM job_schedules WHERE kind = 'tick'`).Scan(&lastBefore, &skippedBefore); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "4.5 s of the database's clock past the last run time", func() bool {
		return b.count(t, `SELECT count(*) FROM job_schedules WHERE kind = 'tick' AND statement_timestamp() > last_run + interval '4.5 seconds'`) == 1
	})
	start("a")
	waitFor(t, "a run time after the outage", func() bool {
		return b.count(t, `SELECT count(*) FROM jobs WHERE kind = 'tick' AND subject_id > $1`, lastBefore.UnixMilli()) > 0
	})
	waitRunTimes(2)
	end("a", syscall.SIGTERM)

	// The killed nodes' jobs were claimed again; nothing is left to run.
	if n := b.count(t, `SELECT count(*) FROM jobs WHERE kind = 'tick' AND status <> 'COMPLETED'`); n != 0 {
		kind, err := tickKind()
		if err != nil {
			t.Fatal(err)
		}
		q := newQueue(t, b.pool, time.Second, kind)
		startRunner(t, q, jobqueue.RunnerConfig{Kind: "tick", Node: "finisher", PollInterval: 50 * time.Millisecond})
		waitFor(t, "every tick job completed", func() bool {
			return b.count(t, `SELECT count(*) FROM jobs WHERE kind = 'tick' AND status <> 'COMPLETED'`) == 0
		})
	}
	if n := b.count(t, `SELECT count(*) FROM (SELECT subject_id FROM jobs WHERE kind = 'tick' GROUP BY 1 HAVING count(*) > 1) d`); n != 0 {
		t.Errorf("%d run times enqueued more than once", n)
	}
	if n := b.count(t, `SELECT count(*) FROM (SELECT run_time FROM ticks_done GROUP BY 1 HAVING count(*) > 1) d`); n != 0 {
		t.Errorf("%d run times with more than one effect", n)
	}
	if n := b.count(t, `
		SELECT count(*) FROM jobs j FULL JOIN ticks_done d ON (extract(epoch FROM d.run_time) * 1000)::bigint = j.subject_id
		WHERE j.id IS NULL OR d.run_time IS NULL`); n != 0 {
		t.Errorf("%d jobs without their effect or effects without their job", n)
	}
	if n := b.count(t, `SELECT count(*) FROM jobs WHERE kind = 'tick' AND subject_id % 1000 <> 0`); n != 0 {
		t.Errorf("%d run times off the second", n)
	}
	// Every second from the first run time to the last was run or skipped, and nothing else.
	var first, last time.Time
	var jobs, skipped int64
	if err := b.pool.QueryRow(ctx, `
		SELECT min(to_timestamp(subject_id / 1000.0)), max(to_timestamp(subject_id / 1000.0)), count(*), (SELECT skipped FROM job_schedules WHERE kind = 'tick')
		FROM jobs WHERE kind = 'tick'`).Scan(&first, &last, &jobs, &skipped); err != nil {
		t.Fatal(err)
	}
	if seconds := int64(last.Sub(first)/time.Second) + 1; jobs+skipped != seconds {
		t.Errorf("%d run times from %s to %s; %d ran and %d were skipped", seconds, first, last, jobs, skipped)
	}
	// The outage: its latest run time ran, at least 3 before it were skipped.
	var afterOutage time.Time
	if err := b.pool.QueryRow(ctx, `SELECT to_timestamp(min(subject_id) / 1000.0) FROM jobs WHERE kind = 'tick' AND subject_id > $1`,
		lastBefore.UnixMilli()).Scan(&afterOutage); err != nil {
		t.Fatal(err)
	}
	if gap := afterOutage.Sub(lastBefore); gap < 4*time.Second || skipped-skippedBefore < 3 {
		t.Errorf("first run time after the outage %s after the last before it, %d skipped; want ≥ 4 s and ≥ 3", gap, skipped-skippedBefore)
	}
	t.Logf("%d run times ran, %d skipped (%d in the outage), every one once", jobs, skipped, skipped-skippedBefore)
}

// The admin route lists a schedule with its last and next run time once a node has enqueued
// it, and two schedulers on one queue enqueue a run time once.
func TestScheduler_SchedulesListedWithTheirNextRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	kind, err := tickKind()
	if err != nil {
		t.Fatal(err)
	}
	q := newQueue(t, b.pool, time.Minute, kind)
	for range 2 {
		s := jobqueue.NewScheduler(q, jobqueue.SchedulerConfig{Interval: 20 * time.Millisecond, Logger: quiet})
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Stop(ctx) })
	}
	waitFor(t, "two run times enqueued", func() bool { return b.count(t, `SELECT count(*) FROM jobs WHERE kind = 'tick'`) >= 2 })
	rows, err := q.Schedules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Kind != "tick" || rows[0].Schedule != "every 1s" || rows[0].LastJob == nil || rows[0].NextRun == nil {
		t.Fatalf("schedules %+v, want tick, every 1s, with its last job and next run", rows)
	}
	if next := *rows[0].NextRun; !next.Equal(rows[0].LastRun.Add(time.Second)) {
		t.Errorf("next run %s, last %s: want a second after", next, rows[0].LastRun)
	}
	if n := b.count(t, `SELECT count(*) FROM (SELECT subject_id FROM jobs WHERE kind = 'tick' GROUP BY 1 HAVING count(*) > 1) d`); n != 0 {
		t.Errorf("two schedulers enqueued %d run times twice", n)
	}
}
