package jobqueue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/internal/faultproxy"
	"github.com/playhead/playhead/jobqueue"
)

// proxiedPool returns a pool of at most maxConns connections that reaches b's database through
// a fault-injecting proxy, and the proxy. Both close when the test ends.
func (b *bundle) proxiedPool(t testing.TB, maxConns int32) (*pgxpool.Pool, *faultproxy.Proxy) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(b.url)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := faultproxy.Start(fmtHostPort(cfg.ConnConfig.Host, cfg.ConnConfig.Port))
	if err != nil {
		t.Fatal(err)
	}
	url, err := proxy.URL(b.url)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err = pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		_ = proxy.Close()
		t.Fatal(err)
	}
	// Cleanups run last-registered first: the proxy closes before the pool, so a query stuck
	// in a partition fails and hands its connection back instead of holding pool.Close.
	t.Cleanup(pool.Close)
	t.Cleanup(func() { _ = proxy.Close() })
	return pool, proxy
}

// leaseUntil reads the job's lease and whether it is still live, by the database's clock.
func (b *bundle) leaseUntil(t testing.TB, jobID int64) (until time.Time, live bool) {
	t.Helper()
	err := b.pool.QueryRow(context.Background(), `SELECT lease_until, lease_until > clock_timestamp() FROM jobs WHERE id = $1`, jobID).Scan(&until, &live)
	if err != nil {
		t.Fatal(err)
	}
	return until, live
}

// runningJob is what a blocking test kind reports.
type runningJob struct {
	started chan jobqueue.Job
	finish  chan struct{} // closing it makes the run succeed
	ended   chan error    // the run's context cause when it was cancelled
	endedAt chan time.Time
}

func newRunningJob() *runningJob {
	return &runningJob{started: make(chan jobqueue.Job, 1), finish: make(chan struct{}),
		ended: make(chan error, 1), endedAt: make(chan time.Time, 1)}
}

func (r *runningJob) run(ctx context.Context, j jobqueue.Job) (jobqueue.Result, error) {
	r.started <- j
	select {
	case <-r.finish:
		return jobqueue.Result{}, nil
	case <-ctx.Done():
		r.endedAt <- time.Now()
		r.ended <- context.Cause(ctx)
		return jobqueue.Result{}, context.Cause(ctx)
	}
}

// The heartbeat keeps a job whose run outlasts its lease; losing the claim mid-run cancels
// the run with ErrClaimLost.
func TestRunner_Heartbeat(t *testing.T) {
	t.Parallel()
	t.Run("KeepsALongJob", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.enqueue(t, "slow", 1)
		kind := mediaKind("slow", func(ctx context.Context, _ jobqueue.Job) (jobqueue.Result, error) {
			select {
			case <-time.After(3 * time.Second): // the work: three leases long
				return jobqueue.Result{}, nil
			case <-ctx.Done():
				return jobqueue.Result{}, context.Cause(ctx)
			}
		})
		q := newQueue(t, b.pool, time.Second, kind)
		startRunner(t, q, jobqueue.RunnerConfig{Kind: "slow", Node: "a", PollInterval: 10 * time.Millisecond})
		// A second node polls all along; it must never get the job.
		startRunner(t, q, jobqueue.RunnerConfig{Kind: "slow", Node: "b", PollInterval: 10 * time.Millisecond})
		waitFor(t, "completion", func() bool { return b.count(t, `SELECT count(*) FROM jobs WHERE status = 'COMPLETED'`) == 1 })
		if n := b.count(t, `SELECT count(*) FROM jobs WHERE attempt_count = 1`); n != 1 {
			t.Fatal("the job was taken from its live worker")
		}
	})
	t.Run("LossCancelsTheRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.enqueue(t, "slow", 1)
		job := newRunningJob()
		// A lease long enough that the heartbeat finding the new token ends the run, not the
		// local deadline (lease − lease/5 without a good heartbeat), which a loaded machine
		// reached with a 300 ms lease whatever the heartbeat checked.
		q := newQueue(t, b.pool, 3*time.Second, mediaKind("slow", job.run))
		startRunner(t, q, jobqueue.RunnerConfig{Kind: "slow", Node: "a", PollInterval: 10 * time.Millisecond})
		receive(t, job.started, "the job to start")
		// Someone else took the job (as after an expired lease): the token changes.
		if _, err := b.pool.Exec(context.Background(), `UPDATE jobs SET claim_token = gen_random_uuid(), claimed_by = 'thief'`); err != nil {
			t.Fatal(err)
		}
		if err := receive(t, job.ended, "the run to be cancelled"); !errors.Is(err, jobqueue.ErrClaimLost) {
			t.Fatalf("run cancelled with %v, want ErrClaimLost", err)
		}
	})
}

// A heartbeat that fails is retried before the next tick: with heartbeats every lease/3 and a
// failed one waiting for the next tick, a database outage longer than a third of the lease
// would make two heartbeats fail in a row and the third land after the lease ran out, and the
// claim would be lost (and a last attempt swept DEAD) although the worker was fine.
// Here the database refuses the runner's connections from just after a heartbeat until seven
// tenths of the lease are gone; the run keeps its claim and completes on its first attempt.
func TestRunner_HeartbeatRidesOutAnOutage(t *testing.T) {
	t.Parallel()
	// Long enough that the window between the outage's end (0.7 of the lease) and the run's
	// local deadline (0.8) is 1.2 s, room for a few retries that each open a connection: with
	// a 6 s lease and the outage to 0.75, 300 ms were too few on a loaded machine (the
	// runner, correctly, gave its claim up at the deadline). The old heartbeat, a tick every
	// lease/3, still fails here: its ticks at 1/3 and 2/3 fall in the outage, the next after
	// the lease.
	const lease = 12 * time.Second
	b := setup(t)
	b.enqueue(t, "long", 1)
	pool, proxy := b.proxiedPool(t, 4)
	job := newRunningJob()
	q := newQueue(t, pool, lease, mediaKind("long", job.run))
	startRunner(t, q, jobqueue.RunnerConfig{Kind: "long", Node: "a", PollInterval: 20 * time.Millisecond})
	j := receive(t, job.started, "the job to start")

	// Start the outage right after a heartbeat landed (the lease moved), so the runner has a
	// whole lease of slack and no more.
	first, _ := b.leaseUntil(t, j.ID)
	waitFor(t, "a heartbeat", func() bool { until, _ := b.leaseUntil(t, j.ID); return until.After(first) })
	proxy.Refuse(true)
	proxy.ResetAll()
	beat, _ := b.leaseUntil(t, j.ID)
	waitFor(t, "seven tenths of the lease to pass", func() bool {
		var left time.Duration
		if err := b.pool.QueryRow(context.Background(), `SELECT $1::timestamptz - clock_timestamp()`, beat).Scan(&left); err != nil {
			t.Fatal(err)
		}
		return left < lease*3/10
	})
	proxy.Refuse(false)

	waitFor(t, "a heartbeat after the outage", func() bool {
		until, _ := b.leaseUntil(t, j.ID)
		select {
		case err := <-job.ended:
			t.Fatalf("the run was cancelled (%v): the claim did not survive the outage", err)
		default:
		}
		return until.After(beat)
	})
	close(job.finish)
	waitFor(t, "completion", func() bool { return b.count(t, `SELECT count(*) FROM jobs WHERE status <> 'PROCESSING'`) == 1 })
	if n := b.count(t, `SELECT count(*) FROM jobs WHERE status = 'COMPLETED' AND attempt_count = 1 AND claim_token = $1::uuid`, j.ClaimToken); n != 1 {
		t.Fatal("the job did not complete under its first claim")
	}
}

// With the database gone for good, no answer would tell the run its claim is gone, and it
// would go on past its lease while another node could take the job. The heartbeat's
// local deadline (last success + lease − margin) cancels the run as lost, before the
// database's lease runs out.
func TestRunner_HeartbeatDeadlineEndsARunCutOff(t *testing.T) {
	t.Parallel()
	const lease = 2 * time.Second
	b := setup(t)
	b.enqueue(t, "long", 1)
	pool, proxy := b.proxiedPool(t, 4)
	job := newRunningJob()
	q := newQueue(t, pool, lease, mediaKind("long", job.run))
	startRunner(t, q, jobqueue.RunnerConfig{Kind: "long", Node: "a", PollInterval: 20 * time.Millisecond})
	j := receive(t, job.started, "the job to start")
	proxy.Partition() // nothing gets through any more, and nothing says so

	if err := receive(t, job.ended, "the cut-off run to be cancelled"); !errors.Is(err, jobqueue.ErrClaimLost) {
		t.Fatalf("the cut-off run ended with %v, want ErrClaimLost", err)
	}
	cancelledAt := receive(t, job.endedAt, "the cancellation time")
	until, _ := b.leaseUntil(t, j.ID)
	if !cancelledAt.Before(until) {
		t.Fatalf("the run was cancelled at %s, after its lease ran out at %s", cancelledAt.Format(time.StampMilli), until.Format(time.StampMilli))
	}
	t.Logf("cancelled %s before the database's lease ran out", until.Sub(cancelledAt).Round(time.Millisecond))
}
