package jobqueue_test

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

	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
)

// Two nodes — each its own pool and runner, four jobs at a time — run 200 no-op jobs:
// every job completes exactly once and none is lost.
func TestRunner_TwoNodesRunEveryJobExactlyOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enqueue(t, "noop", 200)

	var mu sync.Mutex
	runs := map[int64][]string{}
	for _, node := range []string{"node-a", "node-b"} {
		pool, err := pgxpool.New(context.Background(), b.url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		kind := mediaKind("noop", func(_ context.Context, j jobqueue.Job) (jobqueue.Result, error) {
			mu.Lock()
			runs[j.ID] = append(runs[j.ID], node)
			mu.Unlock()
			return jobqueue.Result{}, nil
		})
		q := newQueue(t, pool, time.Minute, kind)
		startRunner(t, q, jobqueue.RunnerConfig{Kind: "noop", Node: node, Concurrency: 4, PollInterval: 20 * time.Millisecond})
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
func TestRunner_AlwaysFailingJobIsDeadAfterThreeAttempts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mediaID := b.enqueue(t, "doomed", 1)[0]
	var attempts atomic.Int32
	kind := mediaKind("doomed", func(context.Context, jobqueue.Job) (jobqueue.Result, error) {
		attempts.Add(1)
		return jobqueue.Result{}, errors.New("encoder exploded")
	})
	startRunner(t, newQueue(t, b.pool, time.Minute, kind), jobqueue.RunnerConfig{Kind: "doomed", Node: "n",
		PollInterval: 10 * time.Millisecond, RetryBase: 50 * time.Millisecond, RetryCap: 200 * time.Millisecond})
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
	// them, here the generic one since nobody worded this error: an internal error's text
	// (paths, SQL) never reaches the uploader.
	if m.Status != media.StatusFailed || m.FailureReason != jobqueue.GenericReason {
		t.Fatalf("media = %s (%q), want FAILED with the generic reason", m.Status, m.FailureReason)
	}
	if n := b.count(t, `SELECT count(*) FROM notification_outbox WHERE media_id = $1 AND kind = $2`, mediaID, media.OutboxFailed); n != 1 {
		t.Fatalf("%d failure notifications, want exactly 1", n)
	}
	if n := b.count(t, `SELECT count(*) FROM jobs WHERE attempt_count = 3 AND last_error = 'encoder exploded'`); n != 1 {
		t.Fatal("the dead job does not record 3 attempts and its last error")
	}
}

func TestRunner_PermanentErrorIsDeadAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enqueue(t, "bad-input", 1)
	var attempts atomic.Int32
	kind := mediaKind("bad-input", func(context.Context, jobqueue.Job) (jobqueue.Result, error) {
		attempts.Add(1)
		return jobqueue.Result{}, jobqueue.Permanent(errors.New("not a video"))
	})
	startRunner(t, newQueue(t, b.pool, time.Minute, kind), jobqueue.RunnerConfig{Kind: "bad-input", Node: "n", PollInterval: 10 * time.Millisecond})
	waitFor(t, "the job to be DEAD", func() bool {
		return b.count(t, `SELECT count(*) FROM jobs WHERE status = 'DEAD'`) == 1
	})
	if attempts.Load() != 1 {
		t.Fatalf("a permanent failure ran %d attempts, want 1", attempts.Load())
	}
}

// A worker whose lease expired and whose job was claimed again cannot heartbeat, complete,
// retry, kill or release it, and writes no media change and no notification trying.
func TestQueue_LostClaimWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mediaID := b.enqueue(t, "encode", 1)[0]
	// The leases expire only when the test says so (expireLeases); the live claim's must last
	// to the test's end however slow the machine is, so it is long.
	q := newQueue(t, b.pool, time.Hour, media.JobKind("encode"))
	ctx := context.Background()
	old, err := q.Claim(ctx, "encode", 1, "zombie")
	if err != nil || len(old) != 1 {
		t.Fatalf("claim: %v %v", old, err)
	}
	b.expireLeases(t) // the zombie goes silent for a whole lease
	fresh, err := q.Claim(ctx, "encode", 1, "rescuer")
	if err != nil || len(fresh) != 1 {
		t.Fatalf("reclaim: %v %v", fresh, err)
	}
	if fresh[0].ClaimToken == old[0].ClaimToken || fresh[0].Attempt != 1 || fresh[0].LostLeases != 1 {
		t.Fatalf("reclaim = %+v, want a new token, attempt 1 still and 1 lost lease", fresh[0])
	}
	zombie := old[0]
	ready := func(ctx context.Context, tx pgx.Tx) error {
		return media.MarkReady(ctx, tx, zombie.Subject, media.Encoded{HLSKey: "hls/zombie/master.m3u8", ThumbnailKey: "hls/zombie/thumb.jpg", DurationMS: 1000}, nil)
	}
	for name, err := range map[string]error{
		"Heartbeat": q.Heartbeat(ctx, zombie),
		"Complete":  q.Complete(ctx, zombie, ready),
		"Retry":     q.Retry(ctx, zombie, "late", time.Second),
		"Dead":      q.Dead(ctx, zombie, errors.New("late")),
		"Release":   q.Release(ctx, zombie),
	} {
		if !errors.Is(err, jobqueue.ErrClaimLost) {
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
	// The live claim still works.
	if err := q.Complete(ctx, fresh[0], nil); err != nil {
		t.Fatalf("the live claim could not complete: %v", err)
	}
}

func TestQueue_ReleaseGivesTheAttemptBack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enqueue(t, "encode", 1)
	q := newQueue(t, b.pool, time.Minute, media.JobKind("encode"))
	ctx := context.Background()
	jobs, err := q.Claim(ctx, "encode", 1, "a")
	if err != nil || len(jobs) != 1 || jobs[0].Attempt != 1 {
		t.Fatalf("claim: %+v %v", jobs, err)
	}
	if err := q.Release(ctx, jobs[0]); err != nil {
		t.Fatal(err)
	}
	again, err := q.Claim(ctx, "encode", 1, "b")
	if err != nil || len(again) != 1 {
		t.Fatalf("claim after release: %+v %v", again, err)
	}
	if again[0].Attempt != 1 {
		t.Fatalf("attempt after a release = %d, want 1 (a graceful stop is not a failure)", again[0].Attempt)
	}
}

// A claim takes only its own kind.
func TestQueue_ClaimTakesOnlyItsKind(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enqueue(t, "encode", 3)
	b.enqueue(t, "ingest", 2)
	q := newQueue(t, b.pool, time.Minute, media.JobKind("encode"), media.JobKind("ingest"))
	jobs, err := q.Claim(context.Background(), "ingest", 10, "n")
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 || jobs[0].Kind != "ingest" || jobs[1].Kind != "ingest" {
		t.Fatalf("claimed %+v, want the 2 ingest jobs", jobs)
	}
}

func TestQueue_AttemptCapIsAConstraint(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enqueue(t, "encode", 1)
	_, err := b.pool.Exec(context.Background(), `UPDATE jobs SET attempt_count = max_attempts + 1`)
	if err == nil || !strings.Contains(err.Error(), "jobs_attempts_within_max") {
		t.Fatalf("attempt_count past max_attempts = %v, want the CHECK constraint to refuse", err)
	}
}

// Stop cancels running jobs and gives their claims back at once, attempt returned.
func TestRunner_StopReleasesRunningJobs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enqueue(t, "slow", 2)
	started := make(chan struct{}, 2)
	kind := mediaKind("slow", func(ctx context.Context, _ jobqueue.Job) (jobqueue.Result, error) {
		started <- struct{}{}
		<-ctx.Done()
		return jobqueue.Result{}, context.Cause(ctx)
	})
	r := startRunner(t, newQueue(t, b.pool, time.Minute, kind), jobqueue.RunnerConfig{Kind: "slow", Node: "a", Concurrency: 2, PollInterval: 10 * time.Millisecond})
	<-started
	<-started
	if err := r.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := b.count(t, `SELECT count(*) FROM jobs WHERE status = 'PENDING' AND attempt_count = 0 AND claim_token IS NULL`); n != 2 {
		t.Fatalf("%d jobs released with their attempt returned, want 2", n)
	}
	if err := r.Stop(context.Background()); err != nil {
		t.Fatalf("a second Stop = %v, want nil (idempotent)", err)
	}
	if err := r.Start(context.Background()); err == nil {
		t.Fatal("Start after Stop succeeded; a stopped runner must not come back")
	}
}

// A runner that was never started stops at once.
func TestRunner_StopWithoutStart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	kind := mediaKind("idle", func(context.Context, jobqueue.Job) (jobqueue.Result, error) { return jobqueue.Result{}, nil })
	r, err := jobqueue.NewRunner(newQueue(t, b.pool, time.Minute, kind), jobqueue.RunnerConfig{Kind: "idle", Node: "n"})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// The configuration errors a runner refuses.
func TestNewRunner_Refusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hooksOnly := media.JobKind("hooks-only")
	q := newQueue(t, b.pool, time.Minute, hooksOnly)
	for name, cfg := range map[string]jobqueue.RunnerConfig{
		"NoNode":      {Kind: "hooks-only"},
		"UnknownKind": {Kind: "other", Node: "n"},
		"NoRun":       {Kind: "hooks-only", Node: "n"},
	} {
		if _, err := jobqueue.NewRunner(q, cfg); err == nil {
			t.Errorf("%s: NewRunner accepted %+v", name, cfg)
		}
	}
	if _, err := jobqueue.NewQueue(b.pool, time.Minute, hooksOnly, hooksOnly); err == nil {
		t.Error("NewQueue accepted one kind registered twice")
	}
}

func TestEnqueue_NotifiesOnCommitOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	woke := make(chan string, 4)
	connected := make(chan struct{}, 1)
	startListener(t, b.url, jobqueue.Channel, func(p string) { woke <- p }, func() { connected <- struct{}{} })
	<-connected
	ctx := context.Background()
	m, err := b.media.Create(ctx, media.Media{OwnerID: 1, Title: "x", Status: media.StatusProcessing, Visibility: media.VisibilityPublic})
	if err != nil {
		t.Fatal(err)
	}
	// A rolled-back enqueue leaves no job and wakes nobody.
	_ = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		if _, err := jobqueue.Enqueue(ctx, tx, "encode", m.ID, 3); err != nil {
			return err
		}
		return errors.New("upload failed after the insert")
	})
	if err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		_, err := jobqueue.Enqueue(ctx, tx, "encode", m.ID, 3)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if kind := <-woke; kind != "encode" {
		t.Fatalf("woke with %q", kind)
	}
	// The rolled-back enqueue's notification would have been delivered before the committed
	// one's (notifications arrive in commit order): a marker sent now arrives next if there
	// was none.
	if _, err := b.pool.Exec(ctx, `SELECT pg_notify($1, 'marker')`, jobqueue.Channel); err != nil {
		t.Fatal(err)
	}
	if next := <-woke; next != "marker" {
		t.Fatalf("a second notification %q before the marker: the rolled-back enqueue notified", next)
	}
	if n := b.count(t, `SELECT count(*) FROM jobs`); n != 1 {
		t.Fatalf("%d jobs, want 1", n)
	}
}
