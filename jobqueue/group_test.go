package jobqueue_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/jobqueue"
)

// diamond is the group a → (b, c) → d, with b's Args, as EnqueueGroup takes it.
func diamond(kind string, subject int64) []jobqueue.GroupJob {
	return []jobqueue.GroupJob{
		{Kind: kind, Subject: subject, MaxAttempts: 3},
		{Kind: kind, Subject: subject, MaxAttempts: 3, After: []int{0}, Args: json.RawMessage(`{"rung":1}`)},
		{Kind: kind, Subject: subject, MaxAttempts: 3, After: []int{0}},
		{Kind: kind, Subject: subject, MaxAttempts: 3, After: []int{1, 2, 1}}, // a repeated parent counts once
	}
}

func enqueueGroup(t *testing.T, b *bundle, jobs []jobqueue.GroupJob) []int64 {
	t.Helper()
	var ids []int64
	err := pgx.BeginFunc(context.Background(), b.pool, func(tx pgx.Tx) error {
		var err error
		ids, err = jobqueue.EnqueueGroup(context.Background(), tx, jobs)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// statuses reads the status of each job, in order.
func statuses(t *testing.T, q *jobqueue.Queue, ids []int64) []jobqueue.Status {
	t.Helper()
	out := make([]jobqueue.Status, len(ids))
	for i, id := range ids {
		row, err := q.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = row.Status
	}
	return out
}

// A group runs in its dependencies' order on real runners, both ways a completion goes: a kind
// with domain hooks (one transaction per job) and one without (the batch completion). Every
// job starts only after each of its parents' completion committed, d after both b and c;
// the Args reach the job; the admin view shows the group, parents and dependants.
func TestGroup_JobsRunAfterTheirParents(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		media bool
	}{{"batched completion", false}, {"completion with domain writes", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			subject := b.enqueue(t, "unused", 1)[0]
			var mu sync.Mutex
			started := map[int64]time.Time{}
			args := map[int64]string{}
			run := func(ctx context.Context, j jobqueue.Job) (jobqueue.Result, error) {
				mu.Lock()
				started[j.ID] = time.Now()
				args[j.ID] = string(j.Args)
				mu.Unlock()
				return jobqueue.Result{}, nil
			}
			kind := jobqueue.Kind{Name: "step", Run: run}
			if tc.media {
				kind = mediaKind("step", run)
			}
			q := newQueue(t, b.pool, time.Minute, kind)
			ids := enqueueGroup(t, b, diamond("step", subject))
			if got := statuses(t, q, ids); !slices.Equal(got, []jobqueue.Status{"PENDING", "WAITING", "WAITING", "WAITING"}) {
				t.Fatalf("statuses after enqueue %v, want a PENDING and three WAITING", got)
			}
			startRunner(t, q, jobqueue.RunnerConfig{Kind: "step", Node: "n", Concurrency: 4, PollInterval: 20 * time.Millisecond})
			waitFor(t, "the group to complete", func() bool {
				return b.count(t, `SELECT count(*) FROM jobs WHERE id = ANY($1) AND status = 'COMPLETED'`, ids) == 4
			})
			completed := map[int64]time.Time{}
			rows, err := b.pool.Query(context.Background(), `SELECT id, completed_at FROM jobs WHERE id = ANY($1)`, ids)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var id int64
				var at time.Time
				if err := rows.Scan(&id, &at); err != nil {
					t.Fatal(err)
				}
				completed[id] = at
			}
			mu.Lock()
			defer mu.Unlock()
			for child, parents := range map[int64][]int64{ids[1]: {ids[0]}, ids[2]: {ids[0]}, ids[3]: {ids[1], ids[2]}} {
				for _, p := range parents {
					if !started[child].After(completed[p]) {
						t.Errorf("job %d started at %s, before its parent %d completed at %s", child, started[child].Format(time.StampMicro), p, completed[p].Format(time.StampMicro))
					}
				}
			}
			if args[ids[1]] != `{"rung": 1}` || args[ids[0]] != "" {
				t.Errorf("args %q and %q, want b's {\"rung\": 1} and none for a", args[ids[1]], args[ids[0]])
			}
			row, err := q.Get(context.Background(), ids[3])
			if err != nil {
				t.Fatal(err)
			}
			if row.GroupID == nil || *row.GroupID != ids[0] || !slices.Equal(row.Parents, []int64{ids[1], ids[2]}) || len(row.Dependants) != 0 {
				t.Errorf("d's row: group %v parents %v dependants %v, want group %d, parents %v, none", row.GroupID, row.Parents, row.Dependants, ids[0], ids[1:3])
			}
			list, err := q.List(context.Background(), jobqueue.Filter{Group: ids[0], Limit: 10})
			if err != nil || len(list) != 4 {
				t.Fatalf("the group's list: %d rows, %v; want 4", len(list), err)
			}
			if top := list[len(list)-1]; top.ID != ids[0] || !slices.Equal(top.Dependants, ids[1:3]) {
				t.Errorf("a's row: id %d dependants %v, want %d with dependants %v", top.ID, top.Dependants, ids[0], ids[1:3])
			}
		})
	}
}

// A parent that goes DEAD takes its WAITING descendants with it by their kind's rule: c
// (CancelWhenParentDead) is DEAD without its Fail hook, d (FailWhenParentDead, waiting on c
// only through b) DEAD with its Fail hook, told the parent's reason. No descendant ever runs.
// An admin retry of a descendant retries its group: the parent, the one that died, runs again
// and the descendants wait again (d's Revive hook runs), and the group then completes.
func TestGroup_ADeadParentCancelsOrFailsItsDescendantsAndARetryRevivesThem(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	var mu sync.Mutex
	ran := map[string]int{}
	failed, revived := map[int64]string{}, map[int64]int{}
	parentFails := true
	run := func(name string) func(ctx context.Context, j jobqueue.Job) (jobqueue.Result, error) {
		return func(ctx context.Context, j jobqueue.Job) (jobqueue.Result, error) {
			mu.Lock()
			defer mu.Unlock()
			ran[name]++
			if name == "parent" && parentFails {
				return jobqueue.Result{}, jobqueue.Permanent(jobqueue.WithReason(errors.New("probe: not a video"), "not a video"))
			}
			return jobqueue.Result{}, nil
		}
	}
	hooks := func(name string, rule jobqueue.ParentDeadRule) jobqueue.Kind {
		return jobqueue.Kind{Name: name, Run: run(name), OnParentDead: rule,
			Fail: func(ctx context.Context, tx pgx.Tx, j jobqueue.Job, cause error) error {
				mu.Lock()
				defer mu.Unlock()
				failed[j.ID] = jobqueue.ReasonOf(cause)
				return nil
			},
			Revive: func(ctx context.Context, tx pgx.Tx, j jobqueue.Job) error {
				mu.Lock()
				defer mu.Unlock()
				revived[j.ID]++
				return nil
			}}
	}
	q := newQueue(t, b.pool, time.Minute, hooks("parent", jobqueue.CancelWhenParentDead),
		hooks("cancelled", jobqueue.CancelWhenParentDead), hooks("failed", jobqueue.FailWhenParentDead))
	ids := enqueueGroup(t, b, []jobqueue.GroupJob{
		{Kind: "parent", Subject: 1, MaxAttempts: 1},
		{Kind: "cancelled", Subject: 2, MaxAttempts: 1, After: []int{0}},
		{Kind: "failed", Subject: 3, MaxAttempts: 1, After: []int{1}},
	})
	for _, k := range []string{"parent", "cancelled", "failed"} {
		startRunner(t, q, jobqueue.RunnerConfig{Kind: k, Node: "n", PollInterval: 20 * time.Millisecond})
	}
	waitFor(t, "the group to die", func() bool {
		return b.count(t, `SELECT count(*) FROM jobs WHERE id = ANY($1) AND status = 'DEAD'`, ids) == 3
	})
	for _, id := range ids[1:] {
		row, err := q.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if row.LastError == nil || !strings.Contains(*row.LastError, "which it waits for, is DEAD") || row.AttemptCount != 0 {
			t.Errorf("job %d: last error %v after %d attempts, want cancelled with its ancestor, never run", id, row.LastError, row.AttemptCount)
		}
	}
	mu.Lock()
	if ran["cancelled"] != 0 || ran["failed"] != 0 {
		t.Errorf("descendants of a DEAD job ran: %v", ran)
	}
	if _, ok := failed[ids[1]]; ok || failed[ids[2]] != "not a video" || failed[ids[0]] != "not a video" {
		t.Errorf("Fail hooks %v, want the parent's and d's (with the parent's reason), not c's", failed)
	}
	parentFails = false
	mu.Unlock()

	if err := q.RetryDead(ctx, ids[2]); err != nil {
		t.Fatal(err)
	}
	if got := statuses(t, q, ids); got[0] == jobqueue.StatusDead || got[1] == jobqueue.StatusDead || got[2] == jobqueue.StatusDead {
		t.Fatalf("after the retry of d: %v, want the whole group live again", got)
	}
	if err := q.RetryDead(ctx, ids[2]); apperr.CodeOf(err) != apperr.Conflict {
		t.Errorf("a second retry of d, no longer DEAD: %v, want a conflict", err)
	}
	waitFor(t, "the retried group to complete", func() bool {
		return b.count(t, `SELECT count(*) FROM jobs WHERE id = ANY($1) AND status = 'COMPLETED'`, ids) == 3
	})
	mu.Lock()
	defer mu.Unlock()
	if revived[ids[0]] != 1 || revived[ids[2]] != 1 || revived[ids[1]] != 0 {
		t.Errorf("Revive hooks %v, want the parent's and d's once each, not c's", revived)
	}
}

// An administrator's cancel of a WAITING job ends it and what waits for it; its retry makes
// it WAIT again (its parent is not done), and the group completes once the parent does.
func TestGroup_CancelAndRetryOfAWaitingJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	q := newQueue(t, b.pool, time.Minute, jobqueue.Kind{Name: "step", Run: func(context.Context, jobqueue.Job) (jobqueue.Result, error) {
		return jobqueue.Result{}, nil
	}})
	ids := enqueueGroup(t, b, diamond("step", 1))
	if err := q.Cancel(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	if got := statuses(t, q, ids); !slices.Equal(got, []jobqueue.Status{"PENDING", "DEAD", "WAITING", "DEAD"}) {
		t.Fatalf("after cancelling b: %v, want b and d DEAD", got)
	}
	if err := q.RetryDead(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	if got := statuses(t, q, ids); !slices.Equal(got, []jobqueue.Status{"PENDING", "WAITING", "WAITING", "WAITING"}) {
		t.Fatalf("after retrying b: %v, want b and d WAITING again", got)
	}
	startRunner(t, q, jobqueue.RunnerConfig{Kind: "step", Node: "n", Concurrency: 2, PollInterval: 20 * time.Millisecond})
	waitFor(t, "the group to complete", func() bool {
		return b.count(t, `SELECT count(*) FROM jobs WHERE id = ANY($1) AND status = 'COMPLETED'`, ids) == 4
	})
}

// A job hands its work on from its completion (ContinueGroup): the new jobs join its group,
// wait for it (an edge the admin view shows) and run; its completion's rollback enqueues
// nothing. Called outside a completion, ContinueGroup fails.
func TestGroup_ContinueGroupFromACompletion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	var continued []int64
	plan := jobqueue.Kind{Name: "plan", Run: func(ctx context.Context, j jobqueue.Job) (jobqueue.Result, error) {
		return jobqueue.Result{Commit: func(ctx context.Context, tx pgx.Tx) error {
			ids, err := jobqueue.ContinueGroup(ctx, tx, j, []jobqueue.GroupJob{
				{Kind: "work", Subject: j.Subject, MaxAttempts: 1},
				{Kind: "work", Subject: j.Subject, MaxAttempts: 1},
				{Kind: "finish", Subject: j.Subject, MaxAttempts: 1, After: []int{0, 1}},
			})
			continued = ids
			return err
		}}, nil
	}}
	done := func(context.Context, jobqueue.Job) (jobqueue.Result, error) { return jobqueue.Result{}, nil }
	q := newQueue(t, b.pool, time.Minute, plan, jobqueue.Kind{Name: "work", Run: done}, jobqueue.Kind{Name: "finish", Run: done})
	var first int64
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		var err error
		first, err = jobqueue.Enqueue(ctx, tx, "plan", 7, 1)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"plan", "work", "finish"} {
		startRunner(t, q, jobqueue.RunnerConfig{Kind: k, Node: "n", PollInterval: 20 * time.Millisecond})
	}
	waitFor(t, "the continued group to complete", func() bool {
		return b.count(t, `SELECT count(*) FROM jobs WHERE group_id = $1 AND status = 'COMPLETED'`, first) == 4
	})
	work, err := q.Get(ctx, continued[0])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(work.Parents, []int64{first}) || work.GroupID == nil || *work.GroupID != first {
		t.Errorf("a continued job: parents %v group %v, want the planning job %d as both", work.Parents, work.GroupID, first)
	}

	// Outside a completion: refused, and the transaction has nothing to commit.
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		_, err := jobqueue.ContinueGroup(ctx, tx, jobqueue.Job{ID: continued[2] + 1000}, diamond("work", 1))
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "not COMPLETED in this transaction") {
		t.Fatalf("ContinueGroup outside a completion: %v, want refused", err)
	}
	if n := b.count(t, `SELECT count(*) FROM jobs`); n != 4 {
		t.Errorf("%d jobs after the refused ContinueGroup, want the 4 of the group", n)
	}
}

// A group that names a later job, itself, or nothing valid is refused before anything is
// written.
func TestGroup_InvalidGroupsAreRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for name, jobs := range map[string][]jobqueue.GroupJob{
		"empty":         nil,
		"a later job":   {{Kind: "k", MaxAttempts: 1, After: []int{1}}, {Kind: "k", MaxAttempts: 1}},
		"itself":        {{Kind: "k", MaxAttempts: 1, After: []int{0}}},
		"negative":      {{Kind: "k", MaxAttempts: 1}, {Kind: "k", MaxAttempts: 1, After: []int{-1}}},
		"no kind":       {{MaxAttempts: 1}},
		"no attempts":   {{Kind: "k"}},
		"args not JSON": {{Kind: "k", MaxAttempts: 1, Args: json.RawMessage(`{"rung":`)}},
		"args an array": {{Kind: "k", MaxAttempts: 1, Args: json.RawMessage(`[1]`)}},
	} {
		err := pgx.BeginFunc(context.Background(), b.pool, func(tx pgx.Tx) error {
			_, err := jobqueue.EnqueueGroup(context.Background(), tx, jobs)
			return err
		})
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if n := b.count(t, `SELECT count(*) FROM jobs`); n != 0 {
		t.Errorf("%d jobs written by refused groups", n)
	}
}

// Retention deletes a finished job of a group with its edges, and an admin discard does too;
// nothing of a group is left once its jobs are gone.
func TestGroup_PruneAndDiscardTakeTheEdges(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	q := newQueue(t, b.pool, time.Minute, jobqueue.Kind{Name: "step", Run: func(context.Context, jobqueue.Job) (jobqueue.Result, error) {
		return jobqueue.Result{}, nil
	}})
	done := enqueueGroup(t, b, diamond("step", 1))
	dead := enqueueGroup(t, b, diamond("step", 2))
	startRunner(t, q, jobqueue.RunnerConfig{Kind: "step", Node: "n", Concurrency: 4, PollInterval: 20 * time.Millisecond})
	if err := q.Cancel(ctx, dead[0]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first group to complete", func() bool {
		return b.count(t, `SELECT count(*) FROM jobs WHERE id = ANY($1) AND status = 'COMPLETED'`, done) == 4
	})
	if n := b.count(t, `SELECT count(*) FROM job_dependencies`); n != 8 {
		t.Fatalf("%d edges, want the 4 of each group", n)
	}
	for _, id := range dead {
		if err := q.Discard(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if n := b.count(t, `SELECT count(*) FROM job_dependencies WHERE job_id = ANY($1) OR parent_id = ANY($1)`, dead); n != 0 {
		t.Errorf("%d edges of the discarded group left", n)
	}
	p := jobqueue.NewPruner(q, jobqueue.PrunerConfig{CompletedAfter: time.Nanosecond, Logger: quiet})
	if n, err := p.Prune(ctx); err != nil || n != 4 {
		t.Fatalf("prune: %d, %v; want the 4 completed jobs", n, err)
	}
	if n := b.count(t, `SELECT count(*) FROM job_dependencies`); n != 0 {
		t.Errorf("%d edges left after their jobs were pruned", n)
	}
}
