package encodejobs_test

import (
	"context"
	"testing"

	"github.com/playhead/playhead/encodejobs"
	"github.com/playhead/playhead/media"
)

// canRun counts the jobs of the media's encode that can still run: PENDING, PROCESSING, or
// WAITING on a parent that can still complete (not COMPLETED already, not DEAD).
const canRun = `SELECT count(*) FROM jobs j WHERE j.subject_id = $1 AND j.kind = ANY($2)
	AND (j.status IN ('PENDING', 'PROCESSING') OR j.status = 'WAITING' AND EXISTS (
	     SELECT 1 FROM job_dependencies d JOIN jobs p ON p.id = d.parent_id
	     WHERE d.job_id = j.id AND NOT d.done AND p.status NOT IN ('COMPLETED', 'DEAD')))`

// renditionJob is the id of the rendition job that encodes height alone (a fixture with a
// job per rung).
func (f *groupFixture) renditionJob(t *testing.T, height int) int64 {
	t.Helper()
	var id int64
	if err := f.b.pool.QueryRow(context.Background(), `SELECT id FROM jobs WHERE kind = $1 AND subject_id = $2 AND args->'heights' = jsonb_build_array($3::int)`,
		encodejobs.KindRendition, f.media, height).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

func (f *groupFixture) jobStatus(t *testing.T, id int64) string {
	t.Helper()
	var s string
	if err := f.b.pool.QueryRow(context.Background(), `SELECT status FROM jobs WHERE id = $1`, id).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// The rendition jobs a probe hands on to (ContinueGroup) get their edge from the probe marked
// done, for the probe is COMPLETED in that very transaction and nothing else would ever mark
// the edge done. Left not done, an administrator's retry of a dead rendition (RetryDead counts
// the edges not done) would make it WAITING on the completed probe, for good, while Revive
// made the media PROCESSING: the promised "retry of the dead rendition finishes the group"
// would never happen (TestEncodeGroup_ADeadRenditionFailsTheMediaAndItsRetryFinishesIt covers
// it with an encode). No encode is needed to see it: the probe, then a cancel and a retry.
func TestEncodeGroupReview_ARetriedRenditionIsClaimableNotWaitingOnItsCompletedProbe(t *testing.T) {
	t.Parallel()
	f := newGroupFixture(t, 3)
	ctx := context.Background()
	f.probed(t, 3)
	top := f.renditionJob(t, 480)
	if err := f.queue.Cancel(ctx, top); err != nil {
		t.Fatal(err)
	}
	if err := f.queue.RetryDead(ctx, top); err != nil {
		t.Fatal(err)
	}
	if s := f.jobStatus(t, top); s != "PENDING" {
		t.Errorf("the retried rendition is %s, want PENDING: its only parent, the probe, COMPLETED", s)
	}
	if n := f.b.count(t, `SELECT count(*) FROM job_dependencies d JOIN jobs p ON p.id = d.parent_id WHERE NOT d.done AND p.status = 'COMPLETED' AND p.subject_id = $1`, f.media); n != 0 {
		t.Errorf("%d edges from a COMPLETED parent not done", n)
	}
	if m, _ := f.b.media.Get(ctx, f.media); m.Status == media.StatusProcessing && f.b.count(t, canRun, f.media, encodejobs.Kinds) == 0 {
		t.Errorf("media PROCESSING with no job of its encode that can run")
	}
}

// Two renditions of one group die (an administrator cancels the 480p and the 360p); the media
// is FAILED and the finish cancelled. The administrator retries one of them: Revive makes the
// media PROCESSING again. Were the finish to stay DEAD (its other parent is DEAD), once the
// retried rendition has completed nothing could make the media READY or FAILED: the owner was
// told media.failed, and the media would say PROCESSING (and playable: its 240p was kept) for
// good. Invariant: a media is PROCESSING only while a job of its encode can still run.
func TestEncodeGroupReview_RetryingOneOfTwoDeadRenditionsLeavesTheMediaProcessingForGood(t *testing.T) {
	t.Parallel()
	f := newGroupFixture(t, 3)
	ctx := context.Background()
	f.probed(t, 3)
	top, middle := f.renditionJob(t, 480), f.renditionJob(t, 360)
	for _, id := range []int64{top, middle} {
		if err := f.queue.Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	startRunner(t, f.b, f.kinds[1])
	startRunner(t, f.b, f.kinds[2])
	waitFor(t, "the 240p", func() bool {
		return f.b.count(t, `SELECT count(*) FROM jobs WHERE kind = $1 AND subject_id = $2 AND status = 'COMPLETED'`, encodejobs.KindRendition, f.media) == 1
	})
	if m, _ := f.b.media.Get(ctx, f.media); m.Status != media.StatusFailed {
		t.Fatalf("after two renditions died: %s, want FAILED", m.Status)
	}
	if err := f.queue.RetryDead(ctx, top); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the retried 480p to end, or to wait for good", func() bool {
		return f.b.count(t, canRun, f.media, encodejobs.Kinds) == 0
	})
	m, _ := f.b.media.Get(ctx, f.media)
	if m.Status == media.StatusProcessing {
		t.Errorf("media %s (playable %v) with no job of its encode that can run (480p %s, 360p %s, finish %s): it can never become READY or FAILED; outbox %v",
			m.Status, m.Playable, f.jobStatus(t, top), f.jobStatus(t, middle), f.finishStatus(t), f.outbox(t))
	}
}

func (f *groupFixture) finishStatus(t *testing.T) string {
	t.Helper()
	var s string
	if err := f.b.pool.QueryRow(context.Background(), `SELECT status FROM jobs WHERE kind = $1 AND subject_id = $2`, encodejobs.KindFinish, f.media).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}
