package jobqueue_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/playhead/playhead/dbpool"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/jobqueue"
)

// A kind's MaxRunning holds across nodes: twelve claims of five jobs each, from four pools
// (four nodes), all started together, take three jobs between them. A completion frees one
// slot, and so does a lease that expired (a lost node's slot comes back), and no more.
//
// With PLAYHEAD_TEST_PGBOUNCER=1 the pools go through PgBouncer in transaction mode, as a
// node's pool may: the limit's lock and the claim must then still be one transaction on one
// server session.
func TestClaim_MaxRunningAcrossPools(t *testing.T) {
	t.Parallel()
	const limit, pools, claimers = 3, 4, 3
	b := setup(t)
	ctx := context.Background()
	b.insertJobs(t, "hook", 50)
	b.insertJobs(t, "other", 10)
	kinds := []jobqueue.Kind{{Name: "hook", MaxRunning: limit}, {Name: "other"}}
	var queues []*jobqueue.Queue
	for range pools {
		pooled := pgtest.PooledURL(t, b.url)
		if pooled == "" {
			queues = append(queues, newQueue(t, ownPool(t, b.url), time.Minute, kinds...))
			continue
		}
		pool, err := dbpool.Open(ctx, pooled, 0, nil, dbpool.ThroughTransactionPooler())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		queues = append(queues, newQueue(t, pool, time.Minute, kinds...))
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	var claimed atomic.Int32
	var mu sync.Mutex
	var jobs []jobqueue.Job
	for _, q := range queues {
		for range claimers {
			wg.Go(func() {
				<-start
				got, err := q.Claim(ctx, "hook", 5, "node")
				if err != nil {
					t.Error(err)
				}
				claimed.Add(int32(len(got)))
				mu.Lock()
				jobs = append(jobs, got...)
				mu.Unlock()
			})
		}
	}
	close(start)
	wg.Wait()
	if claimed.Load() != limit {
		t.Fatalf("%d concurrent claims took %d jobs, want the limit, %d", pools*claimers, claimed.Load(), limit)
	}
	// Another kind is not held by this one's limit.
	if other, err := queues[0].Claim(ctx, "other", 5, "node"); err != nil || len(other) != 5 {
		t.Fatalf("claim of another kind: %d jobs (%v), want 5", len(other), err)
	}
	if more, err := queues[1].Claim(ctx, "hook", 5, "node"); err != nil || len(more) != 0 {
		t.Fatalf("a claim at the limit took %d jobs (%v), want none", len(more), err)
	}
	if err := queues[0].Complete(ctx, jobs[0], nil); err != nil {
		t.Fatal(err)
	}
	if more, err := queues[2].Claim(ctx, "hook", 5, "node"); err != nil || len(more) != 1 {
		t.Fatalf("after a completion a claim took %d jobs (%v), want 1", len(more), err)
	}
	// A node is lost: its lease runs out, and its slot comes back.
	if _, err := b.pool.Exec(ctx, `UPDATE jobs SET lease_until = statement_timestamp() - $2::interval WHERE id = $1`,
		jobs[1].ID, jobqueue.LostLeaseBackoffCap+time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if more, err := queues[3].Claim(ctx, "hook", 5, "node"); err != nil || len(more) != 1 {
		t.Fatalf("after a lease expired a claim took %d jobs (%v), want 1", len(more), err)
	}
	if n := b.count(t, `SELECT count(*) FROM jobs WHERE kind = 'hook' AND status = 'PROCESSING' AND lease_until > statement_timestamp()`); n != limit {
		t.Fatalf("%d jobs running under a live lease, want %d", n, limit)
	}
}

// Runners on several nodes never run more jobs of a limited kind at once than its limit, as
// the runs themselves count them.
func TestRunner_MaxRunningAcrossNodes(t *testing.T) {
	t.Parallel()
	const limit, nodes, jobs = 2, 3, 30
	b := setup(t)
	b.insertJobs(t, "hook", jobs)
	var running, most, done atomic.Int32
	run := func(ctx context.Context, _ jobqueue.Job) (jobqueue.Result, error) {
		now := running.Add(1)
		for {
			m := most.Load()
			if now <= m || most.CompareAndSwap(m, now) {
				break
			}
		}
		// Long enough for every node's poller to try to claim meanwhile.
		time.Sleep(20 * time.Millisecond)
		running.Add(-1)
		done.Add(1)
		return jobqueue.Result{}, nil
	}
	for range nodes {
		q := newQueue(t, ownPool(t, b.url), time.Minute, jobqueue.Kind{Name: "hook", Run: run, MaxRunning: limit})
		startRunner(t, q, jobqueue.RunnerConfig{Kind: "hook", Node: "n", Concurrency: 4, PollInterval: 5 * time.Millisecond})
	}
	waitFor(t, "every job to run", func() bool { return done.Load() == jobs })
	if most.Load() > limit {
		t.Fatalf("%d jobs ran at once, want at most %d", most.Load(), limit)
	}
	if most.Load() < limit {
		t.Fatalf("at most %d jobs ran at once: the limit of %d was never reached, so the test proved nothing", most.Load(), limit)
	}
}
