package encodejobs_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/encodejobs"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/notify"
)

// Two nodes — each its own pool and worker, four jobs at a time — run 200 no-op jobs:
// every job completes exactly once and none is lost.
func TestWorker_TwoNodesRunEveryJobExactlyOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, time.Minute)
	b.enqueue(t, "noop", 200)

	var mu sync.Mutex
	runs := map[int64][]string{}
	for _, node := range []string{"node-a", "node-b"} {
		pool, err := pgxpool.New(context.Background(), b.url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		kind := encodejobs.Kind{Name: "noop", Run: func(_ context.Context, j encodejobs.Job) (encodejobs.Result, error) {
			mu.Lock()
			runs[j.ID] = append(runs[j.ID], node)
			mu.Unlock()
			return encodejobs.Result{}, nil
		}}
		startWorker(t, encodejobs.NewQueue(pool, time.Minute), encodejobs.WorkerConfig{Node: node, Concurrency: 4, PollInterval: 20 * time.Millisecond}, kind)
	}
	waitFor(t, "200 completed jobs", func() bool {
		return b.count(t, `SELECT count(*) FROM jobs WHERE status = 'COMPLETED'`) == 200
	})
	mu.Lock()
	defer mu.Unlock()
	perNode := map[string]int{}
	for id, nodes := range runs {
		if len(nodes) != 1 {
			t.Errorf("job %d ran %d times: %v", id, len(nodes), nodes)
		}
		perNode[nodes[0]]++
	}
	if len(runs) != 200 {
		t.Fatalf("%d distinct jobs ran, want 200", len(runs))
	}
	if n := b.count(t, `SELECT count(*) FROM jobs WHERE attempt_count <> 1`); n != 0 {
		t.Fatalf("%d jobs took more than one attempt", n)
	}
	t.Logf("jobs per node: %v", perNode)
}

// A job that always fails is retried with backoff and, after its third attempt, is DEAD with
// its media FAILED and exactly one notification.
func TestWorker_AlwaysFailingJobIsDeadAfterThreeAttempts(t *testing.T) {
	t.Parallel()
	b := setup(t, time.Minute)
	mediaID := b.enqueue(t, "doomed", 1)[0]
	var attempts atomic.Int32
	var gaps []time.Duration
	var last time.Time
	kind := encodejobs.Kind{Name: "doomed", Fail: encodejobs.FailMedia,
		Run: func(context.Context, encodejobs.Job) (encodejobs.Result, error) {
			now := time.Now()
			if !last.IsZero() {
				gaps = append(gaps, now.Sub(last))
			}
			last = now
			attempts.Add(1)
			return encodejobs.Result{}, errors.New("encoder exploded")
		}}
	startWorker(t, b.queue, encodejobs.WorkerConfig{Node: "n", PollInterval: 10 * time.Millisecond,
		RetryBase: 50 * time.Millisecond, RetryCap: 200 * time.Millisecond}, kind)
	waitFor(t, "the job to be DEAD", func() bool {
		return b.count(t, `SELECT count(*) FROM jobs WHERE status = 'DEAD'`) == 1
	})
	if got := attempts.Load(); got != 3 {
		t.Fatalf("ran %d attempts, want 3", got)
	}
	m, err := b.media.Get(context.Background(), mediaID)
	if err != nil {
		t.Fatal(err)
	}
	// The error's text is for administrators (last_error); the owner gets a reason meant for
	// them, here the generic one since nobody worded this error (finding 8 of issue 11).
	if m.Status != media.StatusFailed || m.FailureReason != encodejobs.GenericReason {
		t.Fatalf("media = %s (%q), want FAILED with the generic reason", m.Status, m.FailureReason)
	}
	if n := b.count(t, `SELECT count(*) FROM notification_outbox WHERE media_id = $1 AND kind = $2`, mediaID, notify.OutboxMediaFailed); n != 1 {
		t.Fatalf("%d failure notifications, want exactly 1", n)
	}
	if n := b.count(t, `SELECT count(*) FROM jobs WHERE attempt_count = 3 AND last_error = 'encoder exploded'`); n != 1 {
		t.Fatal("the dead job does not record 3 attempts and its last error")
	}
	t.Logf("gaps between attempts (full jitter, ceilings 50ms then 100ms, plus polling): %v", gaps)
}

func TestWorker_PermanentErrorIsDeadAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, time.Minute)
	b.enqueue(t, "bad-input", 1)
	var attempts atomic.Int32
	kind := encodejobs.Kind{Name: "bad-input", Fail: encodejobs.FailMedia,
		Run: func(context.Context, encodejobs.Job) (encodejobs.Result, error) {
			attempts.Add(1)
			return encodejobs.Result{}, encodejobs.Permanent(errors.New("not a video"))
		}}
	startWorker(t, b.queue, encodejobs.WorkerConfig{Node: "n", PollInterval: 10 * time.Millisecond}, kind)
	waitFor(t, "the job to be DEAD", func() bool {
		return b.count(t, `SELECT count(*) FROM jobs WHERE status = 'DEAD'`) == 1
	})
	if attempts.Load() != 1 {
		t.Fatalf("a permanent failure ran %d attempts, want 1", attempts.Load())
	}
}

// A worker whose lease expired and whose job was claimed again cannot heartbeat, complete,
// retry or kill it, and writes no media change and no notification trying.
func TestQueue_LostClaimWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, 300*time.Millisecond)
	mediaID := b.enqueue(t, "encode", 1)[0]
	ctx := context.Background()
	old, err := b.queue.Claim(ctx, []string{"encode"}, 1, "zombie")
	if err != nil || len(old) != 1 {
		t.Fatalf("claim: %v %v", old, err)
	}
	time.Sleep(400 * time.Millisecond) // the zombie's lease runs out
	fresh, err := b.queue.Claim(ctx, []string{"encode"}, 1, "rescuer")
	if err != nil || len(fresh) != 1 {
		t.Fatalf("reclaim: %v %v", fresh, err)
	}
	if fresh[0].ClaimToken == old[0].ClaimToken || fresh[0].Attempt != 2 {
		t.Fatalf("reclaim = %+v, want a new token and attempt 2", fresh[0])
	}
	zombie := old[0]
	ready := func(ctx context.Context, tx pgx.Tx, owner int64) error {
		if err := media.MarkReady(ctx, tx, zombie.MediaID, "hls/zombie/master.m3u8", "hls/zombie/thumb.jpg", 1000); err != nil {
			return err
		}
		return notify.Outbox(ctx, tx, owner, zombie.MediaID, notify.OutboxMediaReady, nil)
	}
	for name, err := range map[string]error{
		"Heartbeat": b.queue.Heartbeat(ctx, zombie),
		"Complete":  b.queue.Complete(ctx, zombie, ready),
		"Retry":     b.queue.Retry(ctx, zombie, "late", time.Second),
		"Dead": b.queue.Dead(ctx, zombie, "late", func(ctx context.Context, tx pgx.Tx, owner int64) error {
			return encodejobs.FailMedia(ctx, tx, zombie, owner, errors.New("late"))
		}),
		"Release": b.queue.Release(ctx, zombie),
	} {
		if !errors.Is(err, encodejobs.ErrClaimLost) {
			t.Errorf("%s with a lost claim = %v, want ErrClaimLost", name, err)
		}
	}
	m, err := b.media.Get(ctx, mediaID)
	if err != nil {
		t.Fatal(err)
	}
	if m.Status != media.StatusProcessing || m.HLSKey != "" {
		t.Fatalf("media after the zombie's attempts = %s %q, want untouched PROCESSING", m.Status, m.HLSKey)
	}
	if n := b.count(t, `SELECT count(*) FROM notification_outbox`); n != 0 {
		t.Fatalf("the zombie wrote %d notifications", n)
	}
	// The rescuer's claim still works.
	if err := b.queue.Complete(ctx, fresh[0], nil); err != nil {
		t.Fatalf("the live claim could not complete: %v", err)
	}
}

func TestQueue_ReleaseGivesTheAttemptBack(t *testing.T) {
	t.Parallel()
	b := setup(t, time.Minute)
	b.enqueue(t, "encode", 1)
	ctx := context.Background()
	jobs, err := b.queue.Claim(ctx, []string{"encode"}, 1, "a")
	if err != nil || len(jobs) != 1 || jobs[0].Attempt != 1 {
		t.Fatalf("claim: %+v %v", jobs, err)
	}
	if err := b.queue.Release(ctx, jobs[0]); err != nil {
		t.Fatal(err)
	}
	again, err := b.queue.Claim(ctx, []string{"encode"}, 1, "b")
	if err != nil || len(again) != 1 {
		t.Fatalf("claim after release: %+v %v", again, err)
	}
	if again[0].Attempt != 1 {
		t.Fatalf("attempt after a release = %d, want 1 (a graceful stop is not a failure)", again[0].Attempt)
	}
}

// A job whose lease expires on its last attempt is swept to DEAD with its media FAILED and one
// notification, by however many nodes sweep at once.
func TestQueue_SweepExpiredLastAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t, 100*time.Millisecond)
	mediaID := b.enqueue(t, "encode", 1)[0]
	ctx := context.Background()
	if _, err := b.pool.Exec(ctx, `UPDATE jobs SET attempt_count = 2`); err != nil {
		t.Fatal(err)
	}
	if jobs, err := b.queue.Claim(ctx, []string{"encode"}, 1, "doomed"); err != nil || len(jobs) != 1 || !jobs[0].LastAttempt() {
		t.Fatalf("claim: %+v %v", jobs, err)
	}
	time.Sleep(200 * time.Millisecond)
	if jobs, _ := b.queue.Claim(ctx, []string{"encode"}, 1, "other"); len(jobs) != 0 {
		t.Fatalf("a job with no attempts left was claimed again: %+v", jobs)
	}
	var wg sync.WaitGroup
	var swept atomic.Int32
	for range 4 {
		wg.Go(func() {
			jobs, err := b.queue.SweepExpired(ctx, func(string) encodejobs.DeadFunc { return encodejobs.FailMedia })
			if err != nil {
				t.Error(err)
			}
			swept.Add(int32(len(jobs)))
		})
	}
	wg.Wait()
	if swept.Load() != 1 {
		t.Fatalf("swept %d times, want exactly once", swept.Load())
	}
	m, _ := b.media.Get(ctx, mediaID)
	if m.Status != media.StatusFailed {
		t.Fatalf("media = %s, want FAILED", m.Status)
	}
	if n := b.count(t, `SELECT count(*) FROM notification_outbox WHERE media_id = $1`, mediaID); n != 1 {
		t.Fatalf("%d notifications, want 1", n)
	}
}

func TestQueue_AttemptCapIsAConstraint(t *testing.T) {
	t.Parallel()
	b := setup(t, time.Minute)
	b.enqueue(t, "encode", 1)
	_, err := b.pool.Exec(context.Background(), `UPDATE jobs SET attempt_count = max_attempts + 1`)
	if err == nil || !strings.Contains(err.Error(), "jobs_attempts_within_max") {
		t.Fatalf("attempt_count past max_attempts = %v, want the CHECK constraint to refuse", err)
	}
}

// The heartbeat keeps a job whose run outlasts its lease; losing the claim mid-run cancels
// the run with ErrClaimLost.
func TestWorker_Heartbeat(t *testing.T) {
	t.Parallel()
	t.Run("KeepsALongJob", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 300*time.Millisecond)
		b.enqueue(t, "slow", 1)
		kind := encodejobs.Kind{Name: "slow", Run: func(ctx context.Context, _ encodejobs.Job) (encodejobs.Result, error) {
			select {
			case <-time.After(1200 * time.Millisecond): // four leases long
				return encodejobs.Result{}, nil
			case <-ctx.Done():
				return encodejobs.Result{}, context.Cause(ctx)
			}
		}}
		startWorker(t, b.queue, encodejobs.WorkerConfig{Node: "a", Lease: 300 * time.Millisecond, PollInterval: 10 * time.Millisecond}, kind)
		// A second node polls all along; it must never get the job.
		startWorker(t, b.queue, encodejobs.WorkerConfig{Node: "b", Lease: 300 * time.Millisecond, PollInterval: 10 * time.Millisecond}, kind)
		waitFor(t, "completion", func() bool { return b.count(t, `SELECT count(*) FROM jobs WHERE status = 'COMPLETED'`) == 1 })
		if n := b.count(t, `SELECT count(*) FROM jobs WHERE attempt_count = 1`); n != 1 {
			t.Fatal("the job was taken from its live worker")
		}
	})
	t.Run("LossCancelsTheRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 300*time.Millisecond)
		b.enqueue(t, "slow", 1)
		cause := make(chan error, 1)
		kind := encodejobs.Kind{Name: "slow", Run: func(ctx context.Context, _ encodejobs.Job) (encodejobs.Result, error) {
			<-ctx.Done()
			cause <- context.Cause(ctx)
			return encodejobs.Result{}, context.Cause(ctx)
		}}
		startWorker(t, b.queue, encodejobs.WorkerConfig{Node: "a", Lease: 300 * time.Millisecond, PollInterval: 10 * time.Millisecond}, kind)
		waitFor(t, "the claim", func() bool { return b.count(t, `SELECT count(*) FROM jobs WHERE status = 'PROCESSING'`) == 1 })
		// Someone else took the job (as after an expired lease): the token changes.
		if _, err := b.pool.Exec(context.Background(), `UPDATE jobs SET claim_token = gen_random_uuid(), claimed_by = 'thief'`); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-cause:
			if !errors.Is(err, encodejobs.ErrClaimLost) {
				t.Fatalf("run cancelled with %v, want ErrClaimLost", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the run was not cancelled after its claim was lost")
		}
	})
}

// Stop cancels running jobs and gives their claims back at once, attempt returned.
func TestWorker_StopReleasesRunningJobs(t *testing.T) {
	t.Parallel()
	b := setup(t, time.Minute)
	b.enqueue(t, "slow", 2)
	started := make(chan struct{}, 2)
	kind := encodejobs.Kind{Name: "slow", Run: func(ctx context.Context, _ encodejobs.Job) (encodejobs.Result, error) {
		started <- struct{}{}
		<-ctx.Done()
		return encodejobs.Result{}, context.Cause(ctx)
	}}
	w := startWorker(t, b.queue, encodejobs.WorkerConfig{Node: "a", Concurrency: 2, PollInterval: 10 * time.Millisecond}, kind)
	<-started
	<-started
	if err := w.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := b.count(t, `SELECT count(*) FROM jobs WHERE status = 'PENDING' AND attempt_count = 0 AND claim_token IS NULL`); n != 2 {
		t.Fatalf("%d jobs released with their attempt returned, want 2", n)
	}
}

func TestQueue_PruneKeepsRecentAndUnfinished(t *testing.T) {
	t.Parallel()
	b := setup(t, time.Minute)
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
	n, err := b.queue.Prune(ctx, 7*24*time.Hour, 30*24*time.Hour, 1)
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

func TestEnqueue_NotifiesOnCommitOnly(t *testing.T) {
	t.Parallel()
	b := setup(t, time.Minute)
	woke := make(chan string, 4)
	connected := make(chan struct{}, 1)
	l := notify.NewListener(b.url, quiet)
	l.Handle(notify.ChannelJobs, func(p string) { woke <- p }, func() { connected <- struct{}{} })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = l.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	<-connected
	m, err := b.media.Create(ctx, media.Media{OwnerID: 1, Title: "x", Status: media.StatusProcessing, Visibility: media.VisibilityPublic})
	if err != nil {
		t.Fatal(err)
	}
	// A rolled-back enqueue leaves no job and wakes nobody.
	_ = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		if _, err := encodejobs.Enqueue(ctx, tx, "encode", m.ID, 3); err != nil {
			return err
		}
		return errors.New("upload failed after the insert")
	})
	if err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		_, err := encodejobs.Enqueue(ctx, tx, "encode", m.ID, 3)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case kind := <-woke:
		if kind != "encode" {
			t.Fatalf("woke with %q", kind)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no notification after the committed enqueue")
	}
	select {
	case extra := <-woke:
		t.Fatalf("a second notification %q: the rolled-back enqueue notified", extra)
	case <-time.After(200 * time.Millisecond):
	}
	if n := b.count(t, `SELECT count(*) FROM jobs`); n != 1 {
		t.Fatalf("%d jobs, want 1", n)
	}
}
