package jobqueue_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
)

// batchRun is what the kinds of the batch tests saw of one job.
type batchRun struct {
	mu        sync.Mutex
	discarded map[int64]bool
	committed map[int64]bool
}

func newBatchRun() *batchRun {
	return &batchRun{discarded: map[int64]bool{}, committed: map[int64]bool{}}
}

func (b *batchRun) mark(m map[int64]bool, id int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	m[id] = true
}

// stealInTheMiddle returns a Run that holds every job until all have started, lets the lease of
// the job with the middle id expire and has another node claim it, and then lets them all
// return together (so that their completions fall in one batch): that job's completion must
// find its claim lost. The result's Commit, when commit is given, makes the job's domain
// writes.
func stealInTheMiddle(t *testing.T, b *bundle, thief *jobqueue.Queue, ids []int64, seen *batchRun,
	commit func(j jobqueue.Job) func(ctx context.Context, tx pgx.Tx) error) (func(ctx context.Context, j jobqueue.Job) (jobqueue.Result, error), <-chan string) {
	var started sync.WaitGroup
	started.Add(len(ids))
	allStarted := make(chan struct{})
	go func() { started.Wait(); close(allStarted) }()
	token := make(chan string, 1)
	middle := ids[len(ids)/2]
	// No job ends before the theft: a slot freed earlier would let this node's own poller
	// claim the expired job first.
	stolen := make(chan struct{})
	return func(ctx context.Context, j jobqueue.Job) (jobqueue.Result, error) {
		started.Done()
		<-allStarted
		if j.ID != middle {
			<-stolen
		} else {
			defer close(stolen)
			if _, err := b.pool.Exec(ctx, `UPDATE jobs SET lease_until = statement_timestamp() - $2::interval WHERE id = $1`, j.ID, jobqueue.LostLeaseBackoffCap+time.Millisecond); err != nil {
				t.Error(err)
			}
			stolen, err := thief.Claim(ctx, j.Kind, 1, "thief")
			if err != nil || len(stolen) != 1 || stolen[0].ID != j.ID {
				t.Errorf("the thief claimed %v (%v), want job %d", stolen, err, j.ID)
			} else {
				token <- stolen[0].ClaimToken
			}
		}
		res := jobqueue.Result{
			Discard:   func(context.Context) { seen.mark(seen.discarded, j.ID) },
			Committed: func(context.Context) error { seen.mark(seen.committed, j.ID); return nil },
		}
		if commit != nil {
			res.Commit = commit(j)
		}
		return res, nil
	}, token
}

// A kind without domain writes is completed in batches. When one job of a batch lost its
// claim (its lease expired and another node claimed it while it ran), the batch's fenced
// statement skips its row: that job is reported lost and its result discarded, the row stays
// the thief's, and every other job of the batch completes, in the same statement.
func TestRunner_BatchLostClaimInTheMiddle(t *testing.T) {
	t.Parallel()
	const n = 5
	b := setup(t)
	ids := b.insertJobs(t, "plain", n)
	seen := newBatchRun()
	run, thief := stealInTheMiddle(t, b, newQueue(t, b.pool, time.Minute, jobqueue.Kind{Name: "plain"}), ids, seen, nil)
	q := newQueue(t, b.pool, time.Minute, jobqueue.Kind{Name: "plain", Run: run})
	reg := prometheus.NewRegistry()
	// A window far longer than the jobs take to end together: their completions are one batch.
	startRunner(t, q, jobqueue.RunnerConfig{Kind: "plain", Node: "n", Concurrency: n, CompleteWindow: time.Second,
		Metrics: jobqueue.NewMetrics(reg, q)})
	token := receive(t, thief, "the thief's claim")
	waitFor(t, "every job's outcome", func() bool { return outcomes(t, reg, "plain") == n })

	if got := outcome(t, reg, "plain", "completed"); got != n-1 {
		t.Errorf("%v jobs completed, want %d", got, n-1)
	}
	if got := outcome(t, reg, "plain", "claim_lost"); got != 1 {
		t.Errorf("%v claims lost, want 1", got)
	}
	middle := ids[n/2]
	var status, owner string
	if err := b.pool.QueryRow(context.Background(), `SELECT status, claim_token::text FROM jobs WHERE id = $1`, middle).Scan(&status, &owner); err != nil {
		t.Fatal(err)
	}
	if status != string(jobqueue.StatusProcessing) || owner != token {
		t.Errorf("the stolen job is %s under %s, want PROCESSING under the thief's %s", status, owner, token)
	}
	if n := b.count(t, `SELECT count(DISTINCT completed_at) FROM jobs WHERE status = 'COMPLETED'`); n != 1 {
		t.Errorf("the completed jobs have %d completion times, want 1 (one statement)", n)
	}
	if n := b.count(t, `SELECT count(*) FROM jobs WHERE status = 'COMPLETED' AND id <> $1`, middle); n != len(ids)-1 {
		t.Errorf("%d other jobs COMPLETED, want %d", n, len(ids)-1)
	}
	seen.mu.Lock()
	defer seen.mu.Unlock()
	for _, id := range ids {
		if lost := id == middle; seen.discarded[id] != lost || seen.committed[id] == lost {
			t.Errorf("job %d (lost: %v): discarded %v, committed %v", id, lost, seen.discarded[id], seen.committed[id])
		}
	}
}

// A kind with domain writes (a Lock hook and a Commit: here the media kinds' members → media →
// jobs locks and MarkReady) is never batched: each job finishes in its own fenced transaction,
// so a lost claim rolls back its own domain writes and nothing else. Jobs ending together,
// one of them stolen: its media stays PROCESSING with no outbox row, the others are READY
// with one each.
func TestRunner_HookKindFinishesAloneWhenOthersEndTogether(t *testing.T) {
	t.Parallel()
	const n = 5
	b := setup(t)
	mediaIDs := b.enqueue(t, "render", n)
	ids := make([]int64, 0, n)
	for _, m := range mediaIDs {
		var id int64
		if err := b.pool.QueryRow(context.Background(), `SELECT id FROM jobs WHERE subject_id = $1`, m).Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	seen := newBatchRun()
	run, thief := stealInTheMiddle(t, b, newQueue(t, b.pool, time.Minute, mediaKind("render", nil)), ids, seen, func(j jobqueue.Job) func(ctx context.Context, tx pgx.Tx) error {
		return func(ctx context.Context, tx pgx.Tx) error {
			return media.MarkReady(ctx, tx, j.Subject, media.Encoded{HLSKey: "hls/master.m3u8", ThumbnailKey: "thumb.jpg", DurationMS: 1000}, nil)
		}
	})
	q := newQueue(t, b.pool, time.Minute, mediaKind("render", run))
	reg := prometheus.NewRegistry()
	startRunner(t, q, jobqueue.RunnerConfig{Kind: "render", Node: "n", Concurrency: n, CompleteWindow: time.Second,
		Metrics: jobqueue.NewMetrics(reg, q)})
	receive(t, thief, "the thief's claim")
	waitFor(t, "every job's outcome", func() bool { return outcomes(t, reg, "render") == n })

	if got := outcome(t, reg, "render", "completed"); got != n-1 {
		t.Errorf("%v jobs completed, want %d", got, n-1)
	}
	stolen := mediaIDs[n/2]
	for _, m := range mediaIDs {
		got, err := b.media.Get(context.Background(), m)
		if err != nil {
			t.Fatal(err)
		}
		want, outbox := media.StatusReady, 1
		if m == stolen {
			want, outbox = media.StatusProcessing, 0
		}
		if got.Status != want {
			t.Errorf("media %d is %s, want %s", m, got.Status, want)
		}
		if n := b.count(t, `SELECT count(*) FROM notification_outbox WHERE media_id = $1 AND kind = $2`, m, media.OutboxReady); n != outbox {
			t.Errorf("media %d has %d ready notifications, want %d", m, n, outbox)
		}
	}
	seen.mu.Lock()
	defer seen.mu.Unlock()
	if !seen.discarded[ids[n/2]] {
		t.Error("the stolen job's result was not discarded")
	}
}

// insertJobs inserts n PENDING jobs of kind, about nothing in particular, and returns their
// ids in order.
func (b *bundle) insertJobs(t testing.TB, kind string, n int) []int64 {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `
		INSERT INTO jobs (kind, subject_id, max_attempts) SELECT $1, g, 3 FROM generate_series(1, $2::int) AS g
		RETURNING id`, kind, n)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	return ids
}

// A batch whose answer never arrives (the proxy lets the batch's statement through and resets
// the connection before the answer comes back) leaves every job's outcome unknown: each job
// settles it before anything is cleaned up, as a completion on its own does
// (TestRunner_AmbiguousCommit). The statement committed, so the job is completed and its result kept, not discarded.
func TestRunner_BatchWhoseAnswerIsLostIsSettled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.insertJobs(t, "plain", 1)[0]
	pool, proxy := b.proxiedPool(t, 2)
	seen := newBatchRun()
	var cut <-chan struct{}
	armed := make(chan struct{})
	kind := jobqueue.Kind{Name: "plain", Run: func(_ context.Context, j jobqueue.Job) (jobqueue.Result, error) {
		// The batch statement is the first message after the run that carries the claim
		// token (pgx sends the uuid[] of strings in text form).
		cut = proxy.CutAfter([]byte(j.ClaimToken))
		close(armed)
		return jobqueue.Result{
			Discard:   func(context.Context) { seen.mark(seen.discarded, j.ID) },
			Committed: func(context.Context) error { seen.mark(seen.committed, j.ID); return nil },
		}, nil
	}}
	q := newQueue(t, pool, time.Minute, kind)
	reg := prometheus.NewRegistry()
	startRunner(t, q, jobqueue.RunnerConfig{Kind: "plain", Node: "n", PollInterval: 10 * time.Millisecond,
		Metrics: jobqueue.NewMetrics(reg, newQueue(t, b.pool, time.Minute, kind))})
	receive(t, armed, "the run")
	receive(t, cut, "the cut after the batch's statement")
	waitFor(t, "the job's outcome", func() bool { return outcomes(t, reg, "plain") > 0 })

	if got := outcome(t, reg, "plain", "completed"); got != 1 {
		t.Errorf("outcome completed counted %v times, want 1", got)
	}
	if n := b.count(t, `SELECT count(*) FROM jobs WHERE id = $1 AND status = 'COMPLETED' AND attempt_count = 1`, id); n != 1 {
		t.Error("the job is not COMPLETED on its first attempt")
	}
	seen.mu.Lock()
	defer seen.mu.Unlock()
	if seen.discarded[id] || !seen.committed[id] {
		t.Errorf("discarded %v, committed %v: want the result kept", seen.discarded[id], seen.committed[id])
	}
}
