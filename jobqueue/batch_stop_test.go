package jobqueue_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/jobqueue"
)

// A job that ran and waits for its batch gives its slot back at once, and only its slot: with
// a window far longer than the test, all of a backlog of 20 runs through 2 slots, never more
// than 2 at once, and none is COMPLETED before the window ends. A graceful Stop does not wait
// for the window: it finishes the pending batch in one statement before it returns, every
// job COMPLETED on its first attempt and counted once.
func TestRunner_BatchWaitsOutsideTheSlotsAndStopFlushesIt(t *testing.T) {
	t.Parallel()
	const n, slots = 20, 2
	b := setup(t)
	b.insertJobs(t, "plain", n)
	var mu sync.Mutex
	running, most, ran := 0, 0, 0
	kind := jobqueue.Kind{Name: "plain", Run: func(context.Context, jobqueue.Job) (jobqueue.Result, error) {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		// Long enough for the poller to claim beside it, were a slot wrongly free.
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		running--
		ran++
		mu.Unlock()
		return jobqueue.Result{}, nil
	}}
	q := newQueue(t, b.pool, time.Minute, kind)
	reg := prometheus.NewRegistry()
	r, err := jobqueue.NewRunner(q, jobqueue.RunnerConfig{Kind: "plain", Node: "n", Concurrency: slots,
		PollInterval: 10 * time.Millisecond, CompleteWindow: time.Hour, Logger: quiet, Metrics: jobqueue.NewMetrics(reg, q)})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every run", func() bool { mu.Lock(); defer mu.Unlock(); return ran == n })
	mu.Lock()
	if most > slots {
		t.Errorf("%d runs at once, want at most %d", most, slots)
	}
	mu.Unlock()
	if done := b.count(t, `SELECT count(*) FROM jobs WHERE status = 'COMPLETED'`); done != 0 {
		t.Errorf("%d jobs COMPLETED before the window ended, want 0", done)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if done := b.count(t, `SELECT count(*) FROM jobs WHERE status = 'COMPLETED' AND attempt_count = 1`); done != n {
		t.Errorf("%d jobs COMPLETED on their first attempt after Stop, want %d", done, n)
	}
	if times := b.count(t, `SELECT count(DISTINCT completed_at) FROM jobs`); times != 1 {
		t.Errorf("the jobs have %d completion times, want 1 (one batch)", times)
	}
	if got := outcome(t, reg, "plain", "completed"); got != n {
		t.Errorf("outcome completed counted %v times, want %d", got, n)
	}
}

// A batch whose statement meets a database that stopped answering (a partition: nothing comes
// back) is bounded by the runner's FinishTimeout: each job then gets its outcome (unknown:
// "error", outputs kept), its goroutine ends and its slot is free. Once the database is back,
// the jobs come back too (their leases expire; the same runner claims and completes them, or
// the held statement arrives and completes them): every job ends COMPLETED, none is lost.
func TestRunner_BatchMeetingADeadDatabaseEndsEachJob(t *testing.T) {
	t.Parallel()
	const n = 3
	b := setup(t)
	b.insertJobs(t, "plain", n)
	pool, proxy := b.proxiedPool(t, 4)
	var started, discarded atomic.Int32
	release := make(chan struct{})
	kind := jobqueue.Kind{Name: "plain", Run: func(_ context.Context, j jobqueue.Job) (jobqueue.Result, error) {
		if j.Attempt == 1 {
			started.Add(1)
			<-release
		}
		return jobqueue.Result{Discard: func(context.Context) { discarded.Add(1) }}, nil
	}}
	q := newQueue(t, pool, time.Minute, kind)
	reg := prometheus.NewRegistry()
	startRunner(t, q, jobqueue.RunnerConfig{Kind: "plain", Node: "n", Concurrency: n, PollInterval: 20 * time.Millisecond,
		FinishTimeout: time.Second, Metrics: jobqueue.NewMetrics(reg, newQueue(t, b.pool, time.Minute, kind))})
	waitFor(t, "every first run", func() bool { return started.Load() == n })
	proxy.Partition()
	close(release)
	waitFor(t, "every job's outcome", func() bool { return outcomes(t, reg, "plain") == n })
	if got := outcome(t, reg, "plain", "error"); got != n {
		t.Errorf("outcome error counted %v times, want %d (the batch's outcome unknown)", got, n)
	}
	if discarded.Load() != 0 {
		t.Error("a result was discarded though its completion's outcome was unknown")
	}

	proxy.Heal()
	b.expireLeases(t)
	waitFor(t, "every job COMPLETED", func() bool {
		return b.count(t, `SELECT count(*) FROM jobs WHERE status = 'COMPLETED'`) == n
	})
}

// A node that dies with a batch pending (its runs ended, their completions waiting for the
// window; here the node is cut off from the database for good, as a kill -9 leaves it) never
// leaves its jobs COMPLETED without the batch, nor PROCESSING for ever: their leases expire
// and another node runs and completes each of them again (at least once).
func TestRunner_NodeDeadWithABatchPendingGivesItsJobsBack(t *testing.T) {
	t.Parallel()
	const n = 4
	const lease = time.Second
	b := setup(t)
	ids := b.insertJobs(t, "plain", n)
	var mu sync.Mutex
	runs := map[string]int{}
	kind := func(node string) jobqueue.Kind {
		return jobqueue.Kind{Name: "plain", Run: func(context.Context, jobqueue.Job) (jobqueue.Result, error) {
			mu.Lock()
			runs[node]++
			mu.Unlock()
			return jobqueue.Result{}, nil
		}}
	}
	ranOn := func(node string) int { mu.Lock(); defer mu.Unlock(); return runs[node] }

	pool, proxy := b.proxiedPool(t, 4)
	startRunner(t, newQueue(t, pool, lease, kind("dead")), jobqueue.RunnerConfig{Kind: "plain", Node: "dead",
		Concurrency: n, PollInterval: 20 * time.Millisecond, CompleteWindow: time.Hour, FinishTimeout: time.Second})
	waitFor(t, "every run on the node that dies", func() bool { return ranOn("dead") == n })
	proxy.Partition()
	if done := b.count(t, `SELECT count(*) FROM jobs WHERE status = 'COMPLETED'`); done != 0 {
		t.Fatalf("%d jobs COMPLETED though their batch never left the node", done)
	}

	startRunner(t, newQueue(t, b.pool, lease, kind("alive")), jobqueue.RunnerConfig{Kind: "plain", Node: "alive",
		Concurrency: n, PollInterval: 20 * time.Millisecond})
	waitFor(t, "every job COMPLETED", func() bool {
		return b.count(t, `SELECT count(*) FROM jobs WHERE status = 'COMPLETED'`) == n
	})
	if got := b.count(t, `SELECT count(*) FROM jobs WHERE id = ANY($1) AND claimed_by = 'alive' AND attempt_count = 1 AND lost_count = 1`, ids); got != n {
		t.Errorf("%d jobs completed by the live node on their first attempt after a lost lease, want %d", got, n)
	}
	if got := ranOn("alive"); got != n {
		t.Errorf("the live node ran %d jobs, want %d", got, n)
	}
}
