package mediadelete_test

import (
	"context"
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/audience"
	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/collection"
	"github.com/playhead/playhead/encodejobs"
	"github.com/playhead/playhead/hls"
	"github.com/playhead/playhead/ingest"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/storage"
)

// TestDeleteJob_WaitsForARunningRenditionWhoseLateFinishWritesNothing: a media is deleted while
// one of its rendition jobs runs (claimed, lease alive). The deletion job waits for it; the
// rendition's completion, when it comes, completes the job but records nothing of the media (no
// rendition row, not playable, no event, still DELETED); then the deletion goes on and removes
// the media. One that fails its last attempt meanwhile neither fails the media nor tells its
// owner, and an administrator cannot retry them. A rendition whose worker is gone (lease expired) does not hold the deletion up: it
// is cancelled, and its completion, if it ever comes, is fenced off.
func TestDeleteJob_WaitsForARunningRenditionWhoseLateFinishWritesNothing(t *testing.T) {
	ctx := context.Background()
	pool, _ := pgtest.Pool(t)
	var id int64
	exec(t, pool, `INSERT INTO members (id) VALUES (3)`)
	if err := pool.QueryRow(ctx, `INSERT INTO media (owner_id, title, status, visibility) VALUES (3, 'clip', 'PROCESSING', 'PUBLIC') RETURNING id`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	rendition := media.JobKind(encodejobs.KindRendition)
	q, err := jobqueue.NewQueue(pool, time.Hour, rendition)
	if err != nil {
		t.Fatal(err)
	}
	short, err := jobqueue.NewQueue(pool, time.Millisecond, rendition)
	if err != nil {
		t.Fatal(err)
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := jobqueue.EnqueueGroup(ctx, tx, []jobqueue.GroupJob{
			{Kind: encodejobs.KindRendition, Subject: id, MaxAttempts: 3},
			{Kind: encodejobs.KindRendition, Subject: id, MaxAttempts: 3},
			{Kind: encodejobs.KindRendition, Subject: id, MaxAttempts: 1}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	live, err := q.Claim(ctx, encodejobs.KindRendition, 1, "worker-a")
	if err != nil || len(live) != 1 {
		t.Fatalf("claim: %v %v", live, err)
	}
	dying, err := q.Claim(ctx, encodejobs.KindRendition, 1, "worker-c")
	if err != nil || len(dying) != 1 {
		t.Fatalf("claim: %v %v", dying, err)
	}
	gone, err := short.Claim(ctx, encodejobs.KindRendition, 1, "worker-b")
	if err != nil || len(gone) != 1 {
		t.Fatalf("claim: %v %v", gone, err)
	}
	waitUntil(t, "worker-b's lease to expire", func() bool {
		return count(t, pool, `SELECT count(*) FROM jobs WHERE id = $1 AND lease_until < now()`, gone[0].ID) == 1
	})

	if err := deleteMedia(ctx, pool, id); err != nil {
		t.Fatal(err)
	}
	st, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	startDeletions(t, pool, st, prometheus.NewRegistry())
	// The deletion has tried and found worker-a's rendition running; worker-b's is cancelled.
	waitUntil(t, "the deletion to wait for the running rendition", func() bool {
		if count(t, pool, `SELECT count(*) FROM jobs WHERE kind = 'media_delete' AND subject_id = $1 AND status = 'COMPLETED'`, id) == 1 {
			t.Fatal("the deletion job completed while a rendition of the media was running")
		}
		return count(t, pool, `SELECT count(*) FROM jobs WHERE kind = 'media_delete' AND subject_id = $1 AND attempt_count >= 1 AND status = 'PENDING'`, id) == 1
	})
	if n := count(t, pool, `SELECT count(*) FROM media WHERE id = $1`, id); n != 1 {
		t.Fatal("the deletion removed the media while one of its renditions was running")
	}
	if n := count(t, pool, `SELECT count(*) FROM jobs WHERE id = $1 AND status = 'DEAD'`, gone[0].ID); n != 1 {
		t.Error("the rendition whose lease expired was not cancelled")
	}
	record := func(j jobqueue.Job) func(ctx context.Context, tx pgx.Tx) error {
		return func(ctx context.Context, tx pgx.Tx) error {
			part := hls.Part{Video: &hls.Variant{URI: "v0/index.m3u8", Codecs: []string{"avc1.42c01e"}, Width: 320, Height: 240}, Peak: big.NewRat(100000, 1), Average: big.NewRat(90000, 1)}
			r := media.RecordedRendition{Name: "v0", Folder: encodejobs.OutputPrefix(id, j.ClaimToken), Part: part, StartUS: 0}
			if err := media.RecordRendition(ctx, tx, id, r, nil); err != nil {
				return err
			}
			if err := media.RecordPictures(ctx, tx, id, encodejobs.OutputPrefix(id, j.ClaimToken)+"thumb.jpg", ""); err != nil {
				return err
			}
			return media.MarkRenditionsReady(ctx, tx, id, nil)
		}
	}
	// A rendition that fails its last attempt after the deletion: its job is DEAD, and the
	// media is neither FAILED nor its owner told.
	if err := q.Dead(ctx, dying[0], errors.New("ffmpeg: exit status 1")); err != nil {
		t.Fatalf("the failing rendition's end: %v", err)
	}
	// An administrator cannot bring a job of the deleted media back.
	if err := q.RetryDead(ctx, gone[0].ID); apperr.CodeOf(err) != apperr.Conflict {
		t.Errorf("an admin retry of the deleted media's cancelled rendition: %v, want a conflict", err)
	}
	if err := short.Complete(ctx, gone[0], record(gone[0])); err != jobqueue.ErrClaimLost {
		t.Errorf("the completion of the cancelled rendition: %v, want ErrClaimLost", err)
	}
	if err := q.Complete(ctx, live[0], record(live[0])); err != nil {
		t.Fatalf("the running rendition's completion: %v", err)
	}
	var status string
	var playable bool
	if err := pool.QueryRow(ctx, `SELECT status, playable_at IS NOT NULL OR hls_key IS NOT NULL OR thumbnail_key IS NOT NULL FROM media WHERE id = $1`, id).
		Scan(&status, &playable); err != nil {
		t.Fatal(err)
	}
	if status != string(media.StatusDeleted) || playable {
		t.Errorf("after the late completion the media is %s, with outputs recorded %v; want DELETED, none", status, playable)
	}
	if n := count(t, pool, `SELECT count(*) FROM media_renditions WHERE media_id = $1`, id); n != 0 {
		t.Errorf("the late completion recorded %d renditions", n)
	}
	if n := count(t, pool, `SELECT count(*) FROM notification_outbox WHERE media_id = $1 AND kind <> 'media_deleted'`, id); n != 0 {
		t.Errorf("the late completion told the owner %d things", n)
	}
	// The deletion goes on at its next attempt, due when the rendition's lease would have
	// ended: the test brings that time forward.
	exec(t, pool, `UPDATE jobs SET available_at = now() WHERE kind = 'media_delete' AND subject_id = $1`, id)
	deletionDone(t, pool, id)
	if n := count(t, pool, `SELECT count(*) FROM media WHERE id = $1`, id) + count(t, pool, `SELECT count(*) FROM jobs WHERE subject_id = $1 AND kind <> 'media_delete'`, id); n != 0 {
		t.Errorf("%d rows of the media or its encode left after its deletion", n)
	}
}

// TestDelete_TheCollectionLosesTheLesson: a collection of three lessons, a member who watched
// the first and is in the middle of the second. Deleting the second takes it out of the
// collection at once, for the member's progress (2 lessons, 1 watched, resume at the third),
// the collections they started and the owner's audience of the collection; after the deletion
// job the import row keeps its report without the media, and the figures are the same. The
// deleted lesson's own audience is not found, even for its owner, and the import's report
// shows its row FAILED, "media deleted".
func TestDelete_TheCollectionLosesTheLesson(t *testing.T) {
	ctx := context.Background()
	pool, _ := pgtest.Pool(t)
	const owner, member = 3, 7
	exec(t, pool, `INSERT INTO members (id) VALUES (3), (7)`)
	var lessons []int64
	for range 3 {
		var id int64
		if err := pool.QueryRow(ctx, `INSERT INTO media (owner_id, title, status, visibility, duration_ms) VALUES (3, 'lesson', 'READY', 'PUBLIC', 600000) RETURNING id`).Scan(&id); err != nil {
			t.Fatal(err)
		}
		lessons = append(lessons, id)
	}
	exec(t, pool, `INSERT INTO imports (created_by, filename, total_rows, accepted, rejected) VALUES (3, 'course.csv', 3, 3, 0)`)
	exec(t, pool, `INSERT INTO import_rows (import_id, row_number, collection, chapter, position, video_url, media_id)
		SELECT (SELECT max(id) FROM imports), n, 'course', 1, n, 'https://example.com/' || n, m
		FROM unnest(ARRAY[1, 2, 3], $1::bigint[]) AS r(n, m)`, lessons)
	exec(t, pool, `INSERT INTO playback (member_id, media_id, position_ms, event_time, updated_at, watched_at, finished)
		VALUES (7, $1, 600000, now() - interval '1 hour', now(), now() - interval '1 hour', true),
		       (7, $2, 300000, now(), now(), NULL, false)`, lessons[0], lessons[1])
	exec(t, pool, `INSERT INTO playback_last_finished (member_id, collection, media_id, event_time)
		SELECT 7, 'course', $1, event_time FROM playback WHERE member_id = 7 AND media_id = $1`, lessons[0])
	courses, figures, reports := collection.NewStore(pool), audience.NewStore(pool), ingest.NewStore(pool, 1)
	var importID int64
	if err := pool.QueryRow(ctx, `SELECT max(id) FROM imports`).Scan(&importID); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		p, err := courses.Progress(ctx, "course", member)
		if err != nil {
			t.Fatal(err)
		}
		if p.Total != 2 || p.Watched != 1 || len(p.Items) != 2 || p.Items[1].MediaID != lessons[2] || p.Resume == nil || p.Resume.MediaID != lessons[2] {
			t.Errorf("%s: the member's progress is %+v, want 2 lessons, 1 watched, resume at the third", when, p)
		}
		started, err := courses.Started(ctx, member)
		if err != nil {
			t.Fatal(err)
		}
		if len(started) != 1 || started[0].Total != 2 || started[0].Watched != 1 || started[0].Resume == nil || started[0].Resume.MediaID != lessons[2] {
			t.Errorf("%s: the started collections are %+v, want course with 2 lessons, 1 watched, resume at the third", when, started)
		}
		c, err := figures.Collection(ctx, "course", auth.Identity{MemberID: owner})
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Lessons) != 2 || c.Lessons[0].MediaID != lessons[0] || c.Lessons[1].MediaID != lessons[2] {
			t.Errorf("%s: the collection's audience lists %+v, want the first and the third lessons", when, c.Lessons)
		}
		imp, err := reports.Get(ctx, importID)
		if err != nil {
			t.Fatal(err)
		}
		if len(imp.Rows) != 3 || imp.Rows[1].State != ingest.StateFailed || imp.Rows[1].Reason != "media deleted" || imp.Rows[2].State != ingest.StateReady {
			t.Errorf("%s: the import's report is %+v, want its second row FAILED, \"media deleted\"", when, imp.Rows)
		}
	}
	if err := deleteMedia(ctx, pool, lessons[1]); err != nil {
		t.Fatal(err)
	}
	check("right after the deletion")
	if _, err := figures.Media(ctx, lessons[1], auth.Identity{MemberID: owner}); apperr.CodeOf(err) != apperr.NotFound {
		t.Errorf("the deleted lesson's own audience for its owner: %v, want not found", err)
	}
	st, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	startDeletions(t, pool, st, prometheus.NewRegistry())
	deletionDone(t, pool, lessons[1])
	check("after the deletion job")
	if n := count(t, pool, `SELECT count(*) FROM import_rows WHERE row_number = 2 AND media_id IS NULL AND media_deleted_at IS NOT NULL AND video_url = 'https://example.com/2'`); n != 1 {
		t.Error("the deleted lesson's import row does not keep its report without the media")
	}
}
