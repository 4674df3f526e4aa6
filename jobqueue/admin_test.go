package jobqueue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/jobqueue"
)

// A job keeps the errors of its attempts, numbered, the newest last, at most ten: every retry
// adds one, its death adds the last, and an admin retry keeps them (the next attempt is 1
// again).
func TestAdmin_AJobKeepsItsAttemptsErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enqueue(t, "flaky", 1)
	q := newQueue(t, b.pool, time.Minute, mediaKind("flaky", nil))
	ctx := context.Background()
	attempt := func(n int, dead bool) jobqueue.Job {
		t.Helper()
		jobs, err := q.Claim(ctx, "flaky", 1, "node")
		if err != nil || len(jobs) != 1 {
			t.Fatalf("claim for attempt %d: %v, %v", n, jobs, err)
		}
		if dead {
			err = q.Dead(ctx, jobs[0], fmt.Errorf("attempt %d failed for good", n))
		} else {
			err = q.Retry(ctx, jobs[0], fmt.Sprintf("attempt %d failed", n), 0)
		}
		if err != nil {
			t.Fatal(err)
		}
		return jobs[0]
	}
	attempt(1, false)
	attempt(2, false)
	j := attempt(3, true)
	row, err := q.Get(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"attempt 1 failed", "attempt 2 failed", "attempt 3 failed for good"}
	if len(row.Errors) != len(want) {
		t.Fatalf("errors %+v, want %d", row.Errors, len(want))
	}
	for i, e := range row.Errors {
		if e.Attempt != i+1 || e.Error != want[i] || e.At.IsZero() {
			t.Errorf("error %d = %+v, want attempt %d %q with a time", i, e, i+1, want[i])
		}
	}
	if row.Status != jobqueue.StatusDead || row.LastError == nil || *row.LastError != want[2] {
		t.Errorf("job %+v, want DEAD with the last error", row)
	}
	// Twelve more failures: the ten newest stay.
	if err := q.RetryDead(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 12; n++ {
		jobs, err := q.Claim(ctx, "flaky", 1, "node")
		if err != nil || len(jobs) != 1 {
			t.Fatalf("claim %d after the retry: %v, %v", n, jobs, err)
		}
		if err := q.Retry(ctx, jobs[0], fmt.Sprintf("again %d", n), 0); err != nil {
			t.Fatal(err)
		}
		if _, err := b.pool.Exec(ctx, `UPDATE jobs SET attempt_count = 0 WHERE id = $1`, j.ID); err != nil {
			t.Fatal(err) // attempts left for the next claim
		}
	}
	if row, err = q.Get(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if len(row.Errors) != 10 || row.Errors[0].Error != "again 3" || row.Errors[9].Error != "again 12" {
		t.Errorf("after 15 failures: %d errors, from %+v to %+v; want the ten newest, again 3 to again 12",
			len(row.Errors), row.Errors[0], row.Errors[len(row.Errors)-1])
	}
}

// Cancel ends a job still to run (its kind's Fail hook: the media FAILED, the owner told the
// reason) or a running one (its worker's fenced finish then changes nothing); it refuses a job
// that has ended. Discard deletes a DEAD job and refuses any other; both say 404 for no job.
func TestAdmin_CancelAndDiscard(t *testing.T) {
	t.Parallel()
	b := setup(t)
	media := b.enqueue(t, "work", 3)
	q := newQueue(t, b.pool, time.Minute, mediaKind("work", nil))
	ctx := context.Background()
	ids := make([]int64, len(media))
	for i, m := range media {
		if err := b.pool.QueryRow(ctx, `SELECT id FROM jobs WHERE subject_id = $1`, m).Scan(&ids[i]); err != nil {
			t.Fatal(err)
		}
	}
	pending, running, done := ids[0], ids[1], ids[2]
	if _, err := b.pool.Exec(ctx, `UPDATE jobs SET available_at = statement_timestamp() + interval '1 hour' WHERE id = $1`, pending); err != nil {
		t.Fatal(err)
	}
	claimed, err := q.Claim(ctx, "work", 2, "node")
	if err != nil || len(claimed) != 2 {
		t.Fatalf("claim: %v, %v", claimed, err)
	}
	var runningJob jobqueue.Job
	for _, j := range claimed {
		if j.ID == running {
			runningJob = j
		} else if err := q.Complete(ctx, j, nil); err != nil {
			t.Fatal(err)
		}
	}

	for _, id := range []int64{pending, running} {
		if err := q.Cancel(ctx, id); err != nil {
			t.Fatalf("cancel job %d: %v", id, err)
		}
		row, err := q.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if row.Status != jobqueue.StatusDead || len(row.Errors) != 1 || row.Errors[0].Error != jobqueue.CancelReason {
			t.Errorf("cancelled job %d: %+v, want DEAD with the cancel as its error", id, row)
		}
	}
	if err := q.Complete(ctx, runningJob, nil); !errors.Is(err, jobqueue.ErrClaimLost) {
		t.Errorf("the cancelled running job's finish: %v, want ErrClaimLost", err)
	}
	if n := b.count(t, `SELECT count(*) FROM media WHERE id = ANY($1) AND status = 'FAILED'`, media[:2]); n != 2 {
		t.Errorf("%d of the cancelled jobs' media FAILED, want 2 (the kind's Fail hook)", n)
	}
	if n := b.count(t, `SELECT count(*) FROM notification_outbox WHERE media_id = ANY($1) AND payload->>'reason' = $2`, media[:2], jobqueue.CancelReason); n != 2 {
		t.Errorf("%d owners told the cancel's reason, want 2", n)
	}
	if err := q.Cancel(ctx, done); apperr.CodeOf(err) != apperr.Conflict {
		t.Errorf("cancel of a COMPLETED job: %v, want a conflict", err)
	}
	if err := q.Discard(ctx, done); apperr.CodeOf(err) != apperr.Conflict {
		t.Errorf("discard of a COMPLETED job: %v, want a conflict", err)
	}
	if err := q.Discard(ctx, pending); err != nil {
		t.Fatalf("discard of a DEAD job: %v", err)
	}
	if n := b.count(t, `SELECT count(*) FROM jobs WHERE id = $1`, pending); n != 0 {
		t.Error("the discarded job is still there")
	}
	for name, do := range map[string]func(context.Context, int64) error{"cancel": q.Cancel, "discard": q.Discard, "retry": q.RetryDead} {
		if err := do(ctx, pending); apperr.CodeOf(err) != apperr.NotFound {
			t.Errorf("%s of a job that is gone: %v, want not found", name, err)
		}
	}
}

// List filters by kind, status and a page's end; Counts has every known kind and status,
// zeros included.
func TestAdmin_ListAndCounts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enqueue(t, "a", 3)
	b.enqueue(t, "b", 2)
	q := newQueue(t, b.pool, time.Minute, mediaKind("a", nil), mediaKind("b", nil))
	ctx := context.Background()
	if _, err := b.pool.Exec(ctx, `UPDATE jobs SET status = 'DEAD', completed_at = statement_timestamp()
		WHERE id = (SELECT min(id) FROM jobs WHERE kind = 'a')`); err != nil {
		t.Fatal(err)
	}
	all, err := q.List(ctx, jobqueue.Filter{Limit: 100})
	if err != nil || len(all) != 5 {
		t.Fatalf("List all: %d jobs, %v; want 5", len(all), err)
	}
	for _, tc := range []struct {
		f    jobqueue.Filter
		want int
	}{
		{jobqueue.Filter{Kind: "a", Limit: 100}, 3},
		{jobqueue.Filter{Kind: "a", Status: jobqueue.StatusPending, Limit: 100}, 2},
		{jobqueue.Filter{Status: jobqueue.StatusDead, Limit: 100}, 1},
		{jobqueue.Filter{Before: all[1].ID, Limit: 100}, 3},
		{jobqueue.Filter{Limit: 2}, 2},
	} {
		rows, err := q.List(ctx, tc.f)
		if err != nil || len(rows) != tc.want {
			t.Errorf("List(%+v) = %d jobs, %v; want %d", tc.f, len(rows), err, tc.want)
		}
	}
	counts, err := q.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, c := range counts {
		got[c.Kind+" "+string(c.Status)] = c.Jobs
	}
	want := map[string]int64{"a PENDING": 2, "a DEAD": 1, "b PENDING": 2, "a PROCESSING": 0, "a COMPLETED": 0,
		"b PROCESSING": 0, "b COMPLETED": 0, "b DEAD": 0, "a WAITING": 0, "b WAITING": 0}
	if len(counts) != len(want) {
		t.Errorf("Counts has %d entries, want %d: %+v", len(counts), len(want), counts)
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("Counts[%s] = %d, want %d", k, got[k], n)
		}
	}
}

// An attempt whose worker died says nothing, so the claim that takes its expired lease records
// it in the errors; an error's text is kept whole in last_error and shortened in the history.
func TestAdmin_ExpiredAttemptAndLongErrorsAreRecorded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enqueue(t, "silent", 1)
	q := newQueue(t, b.pool, time.Minute, mediaKind("silent", nil))
	ctx := context.Background()
	claim := func() jobqueue.Job {
		t.Helper()
		jobs, err := q.Claim(ctx, "silent", 1, "node")
		if err != nil || len(jobs) != 1 {
			t.Fatalf("claim: %v, %v", jobs, err)
		}
		return jobs[0]
	}
	first := claim()
	if _, err := b.pool.Exec(ctx, `UPDATE jobs SET lease_until = statement_timestamp() - $2::interval WHERE id = $1`, first.ID, jobqueue.LostLeaseBackoffCap+time.Second); err != nil {
		t.Fatal(err) // the worker died: its lease ran out, its back-off too
	}
	second := claim()
	if second.ID != first.ID || second.Attempt != 1 || second.LostLeases != 1 {
		t.Fatalf("second claim %+v, want job %d attempt 1 with a lost lease", second, first.ID)
	}
	long := strings.Repeat("ffmpeg said ", 500) // 6 000 characters
	if err := q.Retry(ctx, second, long, 0); err != nil {
		t.Fatal(err)
	}
	row, err := q.Get(ctx, first.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(row.Errors) != 2 {
		t.Fatalf("errors %+v, want the expired attempt and the retry", row.Errors)
	}
	if e := row.Errors[0]; e.Attempt != 1 || !strings.Contains(e.Error, "lease expired") {
		t.Errorf("first error %+v, want attempt 1's expired lease", e)
	}
	if e := row.Errors[1]; e.Attempt != 1 || len(e.Error) != 2000 || !strings.HasPrefix(long, e.Error) {
		t.Errorf("second error: attempt %d, %d characters; want attempt 1 (the lost lease spent none), the first 2000 of the text", e.Attempt, len(e.Error))
	}
	if row.LastError == nil || *row.LastError != long {
		t.Errorf("last_error is not the whole text")
	}
	// A PENDING job's claim adds nothing.
	third := claim()
	if row, err = q.Get(ctx, third.ID); err != nil || len(row.Errors) != 2 {
		t.Errorf("after a claim of a PENDING job: %d errors, %v; want still 2", len(row.Errors), err)
	}
}
