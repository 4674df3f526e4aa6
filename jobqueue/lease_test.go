package jobqueue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
)

// A claim whose lease has run out is fenced even before anyone claims the job again (its
// token is still the job's): no heartbeat extends it, no finish writes, and the job stays
// PROCESSING for the next claim. TestQueue_LostClaimWritesNothing changes the token too, so
// it passed with a heartbeat that did not check the lease.
func TestQueue_ExpiredLeaseFencesEveryWrite(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mediaID := b.enqueue(t, "encode", 1)[0]
	q := newQueue(t, b.pool, time.Minute, media.JobKind("encode"))
	ctx := context.Background()
	jobs, err := q.Claim(ctx, "encode", 1, "late")
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %v %v", jobs, err)
	}
	late := jobs[0]
	b.expireLeases(t)
	ready := func(ctx context.Context, tx pgx.Tx) error {
		return media.MarkReady(ctx, tx, late.Subject, media.Encoded{HLSKey: "hls/late/master.m3u8", ThumbnailKey: "hls/late/thumb.jpg", DurationMS: 1000}, nil)
	}
	for _, w := range []struct {
		name  string
		write func() error
	}{
		{"Heartbeat", func() error { return q.Heartbeat(ctx, late) }},
		{"Complete", func() error { return q.Complete(ctx, late, ready) }},
		{"Retry", func() error { return q.Retry(ctx, late, "late", time.Second) }},
		{"Dead", func() error { return q.Dead(ctx, late, errors.New("late")) }},
		{"Release", func() error { return q.Release(ctx, late) }},
	} {
		if err := w.write(); !errors.Is(err, jobqueue.ErrClaimLost) {
			t.Errorf("%s after the lease ran out = %v, want ErrClaimLost", w.name, err)
		}
	}
	if n := b.count(t, `SELECT count(*) FROM jobs WHERE status = 'PROCESSING' AND lease_until <= statement_timestamp() AND attempt_count = 1`); n != 1 {
		t.Fatal("the expired claim's job is no longer PROCESSING with its lease run out and attempt 1")
	}
	if m, err := b.media.Get(ctx, mediaID); err != nil || m.Status != media.StatusProcessing {
		t.Fatalf("media after the late writes = %+v %v, want untouched PROCESSING", m, err)
	}
	again, err := q.Claim(ctx, "encode", 1, "next")
	if err != nil || len(again) != 1 || again[0].Attempt != 1 || again[0].LostLeases != 1 {
		t.Fatalf("claim after the lease ran out = %+v %v, want the job at attempt 1 still, with 1 lost lease", again, err)
	}
}
