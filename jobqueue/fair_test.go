package jobqueue_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/jobqueue"
)

// insert enqueues spec in a transaction of its own.
func insert(t testing.TB, pool *pgxpool.Pool, spec jobqueue.Spec) jobqueue.Enqueued {
	t.Helper()
	var e jobqueue.Enqueued
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		var err error
		e, err = jobqueue.Insert(context.Background(), tx, spec)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// ownPool is a pool of its own on url, as another node has, closed when the test ends.
func ownPool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// claimOne claims one job of kind, failing when there is none.
func claimOne(t testing.TB, q *jobqueue.Queue, kind string) jobqueue.Job {
	t.Helper()
	jobs, err := q.Claim(context.Background(), kind, 1, "node")
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim of %s: %+v %v, want one job", kind, jobs, err)
	}
	return jobs[0]
}

// One partition's backlog delays another partition's new job by at most one job of each busy
// partition: a member's upload after another member's 50-job import is claimed second (the
// head of the import, then it), and a third member's right after it. With every job in one
// partition
// (fairness off: the kinds pass "" for every job) the same upload waits behind the whole
// import.
func TestFairness_PartitionsTakeTurns(t *testing.T) {
	t.Parallel()
	const backlog = 50
	for _, fair := range []bool{true, false} {
		t.Run(fmt.Sprintf("fair=%v", fair), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			q := newQueue(t, b.pool, time.Minute, jobqueue.Kind{Name: "encode"})
			partition := func(p string) string {
				if fair {
					return p
				}
				return ""
			}
			for i := range backlog {
				insert(t, b.pool, jobqueue.Spec{Kind: "encode", Subject: int64(i), MaxAttempts: 3, Partition: partition("importer")})
			}
			upload := insert(t, b.pool, jobqueue.Spec{Kind: "encode", Subject: 1000, MaxAttempts: 3, Partition: partition("member")})
			other := insert(t, b.pool, jobqueue.Spec{Kind: "encode", Subject: 2000, MaxAttempts: 3, Partition: partition("other")})
			position := map[int64]int{}
			for n := 1; n <= backlog+2; n++ {
				j := claimOne(t, q, "encode")
				position[j.ID] = n
				if err := q.Complete(context.Background(), j, nil); err != nil {
					t.Fatal(err)
				}
			}
			if fair {
				if position[upload.ID] != 2 || position[other.ID] != 3 {
					t.Fatalf("the upload was claimed %dth and the other member's job %dth, want 2nd and 3rd (after the import's head)",
						position[upload.ID], position[other.ID])
				}
				return
			}
			if position[upload.ID] != backlog+1 || position[other.ID] != backlog+2 {
				t.Fatalf("in one partition the upload was claimed %dth and the other %dth, want %d and %d (first in, first out)",
					position[upload.ID], position[other.ID], backlog+1, backlog+2)
			}
		})
	}
}

// Two busy partitions alternate, and a partition's own jobs keep their order: the claims of
// two backlogs enqueued one after the other interleave.
func TestFairness_BusyPartitionsAlternate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue(t, b.pool, time.Minute, jobqueue.Kind{Name: "encode"})
	for i := range 10 {
		insert(t, b.pool, jobqueue.Spec{Kind: "encode", Subject: int64(i), MaxAttempts: 3, Partition: "a"})
	}
	for i := range 10 {
		insert(t, b.pool, jobqueue.Spec{Kind: "encode", Subject: int64(100 + i), MaxAttempts: 3, Partition: "b"})
	}
	var order string
	var subjects []int64
	for range 20 {
		j := claimOne(t, q, "encode")
		order += j.Partition
		subjects = append(subjects, j.Subject)
	}
	if order != "abababababababababab" {
		t.Fatalf("partitions claimed in the order %s, want them alternating", order)
	}
	for i := 2; i < len(subjects); i++ {
		if subjects[i] <= subjects[i-2] {
			t.Fatalf("a partition's jobs were claimed out of their order: %v", subjects)
		}
	}
}

// A job of a higher priority is claimed before older jobs of a lower one, on an idle queue and
// ahead of a backlog of normal jobs.
func TestPriority_HigherFirst(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue(t, b.pool, time.Minute, jobqueue.Kind{Name: "encode"})
	low := insert(t, b.pool, jobqueue.Spec{Kind: "encode", Subject: 1, MaxAttempts: 3, Priority: jobqueue.PriorityLow})
	for i := range 5 {
		insert(t, b.pool, jobqueue.Spec{Kind: "encode", Subject: int64(10 + i), MaxAttempts: 3})
	}
	high := insert(t, b.pool, jobqueue.Spec{Kind: "encode", Subject: 2, MaxAttempts: 3, Priority: jobqueue.PriorityHigh})
	var got []int64
	for range 7 {
		got = append(got, claimOne(t, q, "encode").ID)
	}
	if got[0] != high.ID || got[6] != low.ID {
		t.Fatalf("claimed %v, want the high job (%d) first and the low one (%d) last", got, high.ID, low.ID)
	}
}

// THE no-starvation rule: a job of priority p yields to at most (p − 1) × PriorityStep turns
// of newer work of a higher priority, then runs. Here high jobs arrive one at a time, each
// while the one before runs, and are claimed ahead of a low job, one claim at a time: the low
// job is claimed after at most 2 × PriorityStep of them. (With the head of the claim order
// alone as the virtual time, every high job would take the turn after the low job's and it
// would never run.)
func TestPriority_LowIsNotStarved(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue(t, b.pool, time.Minute, jobqueue.Kind{Name: "rollup"})
	ctx := context.Background()
	low := insert(t, b.pool, jobqueue.Spec{Kind: "rollup", Subject: 1, MaxAttempts: 3, Priority: jobqueue.PriorityLow})
	insert(t, b.pool, jobqueue.Spec{Kind: "rollup", Subject: 2, MaxAttempts: 3, Priority: jobqueue.PriorityHigh})
	running := claimOne(t, q, "rollup")
	if running.ID == low.ID {
		t.Fatal("the low job was claimed before the high one")
	}
	// A generous safety net, far beyond the bound: the loop ends when the low job runs.
	const bound = 2 * jobqueue.PriorityStep
	passed := 1
	for ; passed < 10*bound; passed++ {
		insert(t, b.pool, jobqueue.Spec{Kind: "rollup", Subject: int64(100 + passed), MaxAttempts: 3, Priority: jobqueue.PriorityHigh})
		if err := q.Complete(ctx, running, nil); err != nil {
			t.Fatal(err)
		}
		if running = claimOne(t, q, "rollup"); running.ID == low.ID {
			break
		}
	}
	if running.ID != low.ID || passed > bound {
		t.Fatalf("%d high jobs passed the low job (claimed: %v), want at most %d", passed, running.ID == low.ID, bound)
	}
	t.Logf("the low job ran after %d high jobs", passed)
}

// The jobs a group enqueues take their turns for their own kind and partition: ContinueGroup
// gives a job without a partition its parent's, and the group's jobs of one partition take
// consecutive turns behind the partition's backlog.
func TestFairness_GroupsInheritThePartition(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	continued := make(chan []int64, 1)
	parent := jobqueue.Kind{Name: "probe", Run: func(ctx context.Context, j jobqueue.Job) (jobqueue.Result, error) {
		return jobqueue.Result{Commit: func(ctx context.Context, tx pgx.Tx) error {
			ids, err := jobqueue.ContinueGroup(ctx, tx, j, []jobqueue.GroupJob{
				{Kind: "rendition", Subject: j.Subject, MaxAttempts: 3, Priority: jobqueue.PriorityHigh},
				{Kind: "rendition", Subject: j.Subject, MaxAttempts: 3},
				{Kind: "rendition", Subject: j.Subject, MaxAttempts: 3, Partition: "elsewhere"},
			})
			continued <- ids
			return err
		}}, nil
	}}
	q := newQueue(t, b.pool, time.Minute, parent, jobqueue.Kind{Name: "rendition"})
	insert(t, b.pool, jobqueue.Spec{Kind: "probe", Subject: 7, MaxAttempts: 3, Partition: "member"})
	startRunner(t, q, jobqueue.RunnerConfig{Kind: "probe", Node: "n", Concurrency: 1})
	ids := receive(t, continued, "the probe's group")
	waitFor(t, "the probe's completion", func() bool {
		return b.count(t, `SELECT count(*) FROM jobs WHERE kind = 'probe' AND status = 'COMPLETED'`) == 1
	})
	var partitions []string
	var priorities []int16
	if err := b.pool.QueryRow(ctx, `SELECT array_agg(partition_key ORDER BY id), array_agg(priority ORDER BY id) FROM jobs WHERE id = ANY($1)`, ids).
		Scan(&partitions, &priorities); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(partitions) != "[member member elsewhere]" || fmt.Sprint(priorities) != "[1 2 2]" {
		t.Fatalf("the group's jobs have partitions %v and priorities %v, want [member member elsewhere] and [1 2 2]", partitions, priorities)
	}
	first := claimOne(t, q, "rendition")
	if first.ID != ids[0] || first.Priority != jobqueue.PriorityHigh {
		t.Fatalf("first rendition claimed: %+v, want the high one, %d", first, ids[0])
	}
}

// A partition that starts a backlog late starts it at the kind's virtual time (the head of
// the claim order), not at turn 1: after 10 of a 20-job backlog ran, a new partition's 5 jobs
// alternate with the rest of it instead of all passing it.
func TestFairness_ALateBacklogStartsAtTheVirtualTime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	q := newQueue(t, b.pool, time.Minute, jobqueue.Kind{Name: "encode"})
	for i := range 20 {
		insert(t, b.pool, jobqueue.Spec{Kind: "encode", Subject: int64(i), MaxAttempts: 3, Partition: "a"})
	}
	for range 10 {
		if err := q.Complete(ctx, claimOne(t, q, "encode"), nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		insert(t, b.pool, jobqueue.Spec{Kind: "encode", Subject: int64(100 + i), MaxAttempts: 3, Partition: "b"})
	}
	var order string
	for range 10 {
		order += claimOne(t, q, "encode").Partition
	}
	if order != "ababababab" {
		t.Fatalf("partitions claimed in the order %s, want the late backlog alternating with the rest of the first", order)
	}
}

// The jobs of one group call in one partition take consecutive turns, as a backlog enqueued
// one job at a time does: another partition's job enqueued after them is claimed second, not
// after all of them.
func TestFairness_AGroupTakesConsecutiveTurns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	q := newQueue(t, b.pool, time.Minute, jobqueue.Kind{Name: "rendition"})
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		_, err := jobqueue.EnqueueGroup(ctx, tx, []jobqueue.GroupJob{
			{Kind: "rendition", Subject: 1, MaxAttempts: 3, Partition: "a"},
			{Kind: "rendition", Subject: 2, MaxAttempts: 3, Partition: "a"},
			{Kind: "rendition", Subject: 3, MaxAttempts: 3, Partition: "a"},
		})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	insert(t, b.pool, jobqueue.Spec{Kind: "rendition", Subject: 4, MaxAttempts: 3, Partition: "b"})
	var order string
	for range 4 {
		order += claimOne(t, q, "rendition").Partition
	}
	if order != "abaa" {
		t.Fatalf("partitions claimed in the order %s, want abaa: the group's jobs on consecutive turns", order)
	}
}

// A job waiting out a retry's back-off keeps its old turn and so may be the head of the claim
// order while the kind's due jobs are far past it. The virtual time is not held back by it: a
// new partition's backlog enqueued while nothing of the kind runs starts at the first due job's
// turn and alternates with the busy partition, instead of passing all of it.
func TestFairness_AJobInBackoffDoesNotHoldBackTheVirtualTime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	q := newQueue(t, b.pool, time.Minute, jobqueue.Kind{Name: "encode"})
	for i := range 20 {
		insert(t, b.pool, jobqueue.Spec{Kind: "encode", Subject: int64(i), MaxAttempts: 3, Partition: "a"})
	}
	if err := q.Retry(ctx, claimOne(t, q, "encode"), "failed", time.Hour); err != nil {
		t.Fatal(err)
	}
	for range 9 {
		if err := q.Complete(ctx, claimOne(t, q, "encode"), nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		insert(t, b.pool, jobqueue.Spec{Kind: "encode", Subject: int64(100 + i), MaxAttempts: 3, Partition: "b"})
	}
	var order string
	for range 10 {
		order += claimOne(t, q, "encode").Partition
	}
	if order != "ababababab" {
		t.Fatalf("partitions claimed in the order %s, want the new backlog alternating with the busy one", order)
	}
}
