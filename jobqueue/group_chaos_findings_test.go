package jobqueue_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
)

// Failures TestChaos_QueueGroups can find in the group code, each reduced to the few steps
// that show it, so that a change bringing one back fails here without the chaos test's luck.

// An admin retry of one DEAD parent must not revive the descendants cancelled with it while
// another parent of theirs is DEAD too. Here b and c both die, d (waiting for both, failed by
// its rule) with the first; a retry of c that made d WAITING again, waiting for b, DEAD, would
// leave d waiting for b forever once c completed, and, its Revive hook having run, its media
// PROCESSING forever. Leaving d DEAD is not enough either (c's own Revive would leave the
// media PROCESSING with nothing to run), so the retry retries the group: the retry of c
// retries b too, and d waits for both and becomes PENDING once both completed.
// TestChaos_QueueGroups: "a WAITING job waits for exactly its parents not COMPLETED
// (waiting_on), none DEAD" and "every job ends COMPLETED or DEAD (none stuck)".
func TestGroupChaos_ARetryOfOneDeadParentRevivesADescendantOfAnotherDeadParent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	m, err := b.media.Create(ctx, media.Media{OwnerID: 1, Title: "d", Status: media.StatusProcessing, Visibility: media.VisibilityPrivate})
	if err != nil {
		t.Fatal(err)
	}
	step := jobqueue.Kind{Name: "step", Run: func(context.Context, jobqueue.Job) (jobqueue.Result, error) { return jobqueue.Result{}, nil }}
	last := mediaKind("last", nil)
	last.OnParentDead = jobqueue.FailWhenParentDead
	q := newQueue(t, b.pool, time.Minute, step, last)
	ids := enqueueGroup(t, b, []jobqueue.GroupJob{
		{Kind: "step", Subject: 1, MaxAttempts: 1},
		{Kind: "step", Subject: 2, MaxAttempts: 1},
		{Kind: "last", Subject: m.ID, MaxAttempts: 1, After: []int{0, 1}},
	})
	for _, id := range ids[:2] {
		if err := q.Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.RetryDead(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	startRunner(t, q, jobqueue.RunnerConfig{Kind: "step", Node: "n", PollInterval: 20 * time.Millisecond})
	waitFor(t, "the retried parents to complete", func() bool {
		return b.count(t, `SELECT count(*) FROM jobs WHERE id = ANY($1) AND status = 'COMPLETED'`, ids[:2]) == 2
	})
	d, err := q.Get(ctx, ids[2])
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.media.Get(ctx, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != jobqueue.StatusPending || d.WaitingOn != 0 || got.Status != media.StatusProcessing {
		t.Errorf("d is %s waiting for %d parents and its media %s; want d PENDING, both its parents retried and COMPLETED, and its media PROCESSING",
			d.Status, d.WaitingOn, got.Status)
	}
}

// A DEAD parent that is deleted (retention's DeadAfter, or an admin's Discard) must not count
// as done. A query that counted parents by joining the parent's row would count a deleted
// parent for nothing, whether it COMPLETED or died: the descendant cancelled with it could be
// retried (were RetryDead to refuse only while a parent row is DEAD) and run, though its
// parent never completed (a pruned parent is not always "a COMPLETED parent, long done": DEAD
// ones are pruned too). TestChaos_QueueGroups (retention at 50 ms racing the admin retries): "no job is claimed before each of its parents' completion
// committed", "no job starts a run before each of its parents' completion committed", "a
// COMPLETED job's parents are COMPLETED".
func TestGroupChaos_ADescendantOfADeletedDeadParentCanBeRetried(t *testing.T) {
	t.Parallel()
	for name, remove := range map[string]func(t *testing.T, b *bundle, q *jobqueue.Queue, parent int64){
		"discarded": func(t *testing.T, _ *bundle, q *jobqueue.Queue, parent int64) {
			if err := q.Discard(context.Background(), parent); err != nil {
				t.Fatal(err)
			}
		},
		// The parent's retention passed before its dependant's (it died first).
		"pruned": func(t *testing.T, b *bundle, q *jobqueue.Queue, parent int64) {
			if _, err := b.pool.Exec(context.Background(), `UPDATE jobs SET completed_at = completed_at - interval '1 hour' WHERE id = $1`, parent); err != nil {
				t.Fatal(err)
			}
			p := jobqueue.NewPruner(q, jobqueue.PrunerConfig{DeadAfter: 30 * time.Minute, Logger: quiet})
			if n, err := p.Prune(context.Background()); err != nil || n != 1 {
				t.Fatalf("prune: %d, %v; want the parent alone", n, err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx := context.Background()
			q := newQueue(t, b.pool, time.Minute, jobqueue.Kind{Name: "step", Run: func(context.Context, jobqueue.Job) (jobqueue.Result, error) {
				return jobqueue.Result{}, nil
			}})
			ids := enqueueGroup(t, b, []jobqueue.GroupJob{
				{Kind: "step", Subject: 1, MaxAttempts: 1},
				{Kind: "step", Subject: 1, MaxAttempts: 1, After: []int{0}},
			})
			if err := q.Cancel(ctx, ids[0]); err != nil {
				t.Fatal(err)
			}
			remove(t, b, q, ids[0])
			err := q.RetryDead(ctx, ids[1])
			if apperr.CodeOf(err) != apperr.Conflict {
				row, _ := q.Get(ctx, ids[1])
				t.Errorf("retry of a job whose parent died and was deleted: %v, and the job is %s; want refused: its parent never completed", err, row.Status)
			}
		})
	}
}

// An admin retry that revives a dependant must see a parent's completion (or death) that
// races it, and the completion must see the revival. A revival counting the parents from its
// statement's snapshot, and a parent's completion (or death) looking for WAITING dependants
// from its own, would not see each other when the two overlapped. Here p1
// died (d cancelled with it) and p2 is running; the retry of p1 revives d, counting p2 as not
// done, and before it commits p2 ends:
//   - p2 completes, alone (Queue.Complete) or in a runner's batch (completeBatch): its release
//     finds d DEAD (the revival is not committed) and skips it; d is WAITING for 2 parents
//     with only p1 left. Once p1 completes, d waits for 1, forever, every parent COMPLETED.
//   - p2 dies: its cancel finds d DEAD and skips it; d is WAITING with a DEAD parent, forever.
//
// Locking the parents (FOR SHARE) in the revival would not be enough for the batch, whose
// completion and release were one statement, its snapshot older than any lock it waited for
// (a first fix tried in a scratch copy: the chaos test caught the batch, seed 6). The pause is
// d's Revive hook (its rule FailWhenParentDead), which reviveBelow runs after
// its statement, in the retry's transaction. TestChaos_QueueGroups: "a WAITING job waits for
// exactly its parents not COMPLETED (waiting_on), none DEAD", and jobs stuck WAITING.
func TestGroupChaos_ARevivalRacingTheOtherParentsEndLosesIt(t *testing.T) {
	t.Parallel()
	for _, end := range []string{"completion", "batched completion", "death"} {
		t.Run(end, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx := context.Background()
			inRevive, resume := make(chan struct{}), make(chan struct{})
			var once sync.Once
			p2Running, p2Go := make(chan struct{}), make(chan struct{})
			var ids []int64
			step := jobqueue.Kind{Name: "step", Run: func(ctx context.Context, j jobqueue.Job) (jobqueue.Result, error) {
				if j.ID == ids[1] {
					close(p2Running)
					<-p2Go
				}
				return jobqueue.Result{}, nil
			}}
			last := jobqueue.Kind{Name: "last", Run: step.Run, OnParentDead: jobqueue.FailWhenParentDead,
				Revive: func(context.Context, pgx.Tx, jobqueue.Job) error {
					once.Do(func() { close(inRevive); <-resume })
					return nil
				}}
			q := newQueue(t, b.pool, time.Minute, step, last)
			ids = enqueueGroup(t, b, []jobqueue.GroupJob{
				{Kind: "step", Subject: 1, MaxAttempts: 1},
				{Kind: "step", Subject: 1, MaxAttempts: 1},
				{Kind: "last", Subject: 1, MaxAttempts: 1, After: []int{0, 1}},
			})
			if err := q.Cancel(ctx, ids[0]); err != nil {
				t.Fatal(err)
			}
			// p2's end, started once the revival has run its statement; done reports it
			// committed.
			var endP2 func()
			var done func() bool
			if end == "batched completion" {
				startRunner(t, q, jobqueue.RunnerConfig{Kind: "step", Node: "n", PollInterval: 20 * time.Millisecond})
				receive(t, p2Running, "p2 to run")
				endP2 = func() { close(p2Go) }
				done = func() bool {
					return b.count(t, `SELECT count(*) FROM jobs WHERE id = $1 AND status = 'COMPLETED'`, ids[1]) == 1
				}
			} else {
				p2 := claim(t, q, ids[1])
				ended := make(chan error, 1)
				endP2 = func() {
					go func() {
						if end == "death" {
							ended <- q.Dead(ctx, p2, errors.New("p2 failed"))
						} else {
							ended <- q.Complete(ctx, p2, nil)
						}
					}()
				}
				var endErr error
				finished := false
				done = func() bool {
					select {
					case endErr = <-ended:
						finished = true
					default:
					}
					if finished && endErr != nil {
						t.Fatal(endErr)
					}
					return finished
				}
			}

			retried := make(chan error, 1)
			go func() { retried <- q.RetryDead(ctx, ids[0]) }()
			receive(t, inRevive, "the retry to revive d")
			endP2()
			// p2's end either commits now (it saw nothing to wait for) or waits for a lock the
			// retry holds; either way the retry may go on.
			waitFor(t, "p2's end to commit or to wait for a lock", func() bool {
				return done() || b.count(t, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) > 0
			})
			close(resume)
			if err := receive(t, retried, "the retry"); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "p2's end", done)
			switch end {
			case "completion":
				if err := q.Complete(ctx, claim(t, q, ids[0]), nil); err != nil {
					t.Fatal(err)
				}
			case "batched completion":
				waitFor(t, "the runner to complete p1", func() bool {
					return b.count(t, `SELECT count(*) FROM jobs WHERE id = $1 AND status = 'COMPLETED'`, ids[0]) == 1
				})
			}
			d, err := q.Get(ctx, ids[2])
			if err != nil {
				t.Fatal(err)
			}
			want := jobqueue.StatusPending
			if end == "death" {
				want = jobqueue.StatusDead
			}
			if d.Status != want {
				t.Errorf("after p2's %s raced the revival: d is %s waiting for %d, its parents %v; want d %s", end, d.Status, d.WaitingOn, statuses(t, q, ids[:2]), want)
			}
		})
	}
}

// claim claims job id, PENDING, of kind "step" (the only one due).
func claim(t *testing.T, q *jobqueue.Queue, id int64) jobqueue.Job {
	t.Helper()
	jobs, err := q.Claim(context.Background(), "step", 1, "n")
	if err != nil || len(jobs) != 1 || jobs[0].ID != id {
		t.Fatalf("claim of job %d: %v, %v", id, jobs, err)
	}
	return jobs[0]
}
