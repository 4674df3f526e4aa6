package completion_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/buffer"
	"github.com/playhead/playhead/completion"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/playback"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// lessonMS is every test media's duration: 10 minutes.
const lessonMS = 600_000

type bundle struct {
	pool  *pgxpool.Pool
	store *playback.Store
	mover *completion.Mover
	// base is the tests' clock: an hour ago, so that marks and reports are never in the future.
	base time.Time
}

func setup(t *testing.T, batch int) *bundle {
	t.Helper()
	pool, _ := pgtest.Pool(t)
	if _, err := pool.Exec(context.Background(), `INSERT INTO members (id) VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	return &bundle{pool: pool, store: playback.NewStore(pool, media.DefaultCompletion),
		mover: completion.NewMover(pool, completion.Config{Batch: batch}), base: time.Now().UTC().Truncate(time.Microsecond).Add(-time.Hour)}
}

// lesson creates a READY public media of member 1, placed in collection when it is not "".
func (b *bundle) lesson(t *testing.T, collection string, order int) int64 {
	t.Helper()
	var id int64
	if err := b.pool.QueryRow(context.Background(), `INSERT INTO media (owner_id, title, status, visibility, duration_ms, hls_key)
		VALUES (1, 'lesson', 'READY', 'PUBLIC', $1, 'hls/x/master.m3u8') RETURNING id`, lessonMS).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if collection != "" {
		if _, err := b.pool.Exec(context.Background(), `
			WITH imp AS (INSERT INTO imports (created_by, filename, total_rows, accepted, rejected) VALUES (1, 'sheet.csv', 1, 1, 0) RETURNING id)
			INSERT INTO import_rows (import_id, row_number, collection, chapter, position, video_url, media_id)
			SELECT imp.id, 2, $1, 1, $2, 'https://example.com/v.mp4', $3 FROM imp`, collection, order, id); err != nil {
			t.Fatal(err)
		}
	}
	return id
}

// report flushes member's position in media at the tests' clock plus at.
func (b *bundle) report(t *testing.T, member, mediaID int64, positionMS int32, at time.Duration) time.Time {
	t.Helper()
	when := b.base.Add(at)
	err := b.store.Flush(context.Background(), []buffer.Entry[playback.Key, playback.Position]{
		{Key: playback.Key{Member: member, Media: mediaID}, Value: playback.Position{PositionMS: positionMS, EventTime: when}}})
	if err != nil {
		t.Fatal(err)
	}
	return when
}

func (b *bundle) mark(t *testing.T, member int64, medias []int64, watched bool, at time.Duration) time.Time {
	t.Helper()
	when := b.base.Add(at)
	if err := b.store.Mark(context.Background(), member, medias, watched, when); err != nil {
		t.Fatal(err)
	}
	return when
}

// move runs the mover until it finds nothing and returns how many completions it moved.
func (b *bundle) move(t *testing.T) int {
	t.Helper()
	total := 0
	for {
		n, err := b.mover.MoveOnce(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return total
		}
		total += n
	}
}

// outbox returns member's outbox rows after id, oldest first.
func (b *bundle) outbox(t *testing.T, member, after int64) []media.OutboxRow {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT id, kind, media_id, member_id, created_at, payload
		FROM notification_outbox WHERE member_id = $1 AND id > $2 ORDER BY id`, member, after)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (media.OutboxRow, error) {
		var r media.OutboxRow
		return r, row.Scan(&r.ID, &r.Kind, &r.MediaID, &r.MemberID, &r.CreatedAt, &r.Payload)
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMover_AnnouncesFinishesAndCourses: each finish becomes one playback.completed with what
// the flush or the mark recorded; the finish of a course's last unfinished item adds one
// collection.completed, moved in one batch or apart; finishing an item again after
// unmarking it completes the course again; a mark of items already finished announces
// nothing.
func TestMover_AnnouncesFinishesAndCourses(t *testing.T) {
	t.Parallel()
	b := setup(t, 1) // one completion per transaction: a course's two finishes are moved apart
	const member = 7
	a, c, solo := b.lesson(t, "course", 1), b.lesson(t, "course", 2), b.lesson(t, "", 0)

	b.report(t, member, a, 100_000, 0)
	finishedA := b.report(t, member, a, 590_000, time.Minute)
	if n := b.move(t); n != 1 {
		t.Fatalf("moved %d completions, want 1", n)
	}
	got := b.outbox(t, member, 0)
	if len(got) != 1 || got[0].Kind != media.OutboxPlaybackCompleted {
		t.Fatalf("outbox %+v, want one playback_completed", got)
	}
	want := media.PlaybackCompleted{EventID: got[0].ID, MemberID: member, MediaID: a, Collections: []string{"course"},
		FinishedAt: finishedA, PositionMS: 590_000, DurationMS: lessonMS, How: media.FinishedByPosition}
	if d := got[0].PlaybackCompleted(); !d.FinishedAt.Equal(want.FinishedAt) || d.EventID != want.EventID || d.MemberID != want.MemberID ||
		d.MediaID != want.MediaID || !slices.Equal(d.Collections, want.Collections) || d.PositionMS != want.PositionMS ||
		d.DurationMS != want.DurationMS || d.How != want.How {
		t.Errorf("data %+v, want %+v", d, want)
	}
	last := got[0].ID

	// The course's other item and a media of no course, then a second report past the point.
	b.report(t, member, solo, 590_000, 2*time.Minute)
	finishedC := b.mark(t, member, []int64{c}, true, 3*time.Minute)
	b.report(t, member, a, 595_000, 4*time.Minute)
	if n := b.move(t); n != 2 {
		t.Fatalf("moved %d completions, want 2", n)
	}
	got = b.outbox(t, member, last)
	kinds := []string{}
	for _, r := range got {
		kinds = append(kinds, r.Kind)
	}
	if !slices.Equal(kinds, []string{media.OutboxPlaybackCompleted, media.OutboxPlaybackCompleted, media.OutboxCollectionCompleted}) {
		t.Fatalf("outbox kinds %v", kinds)
	}
	if d := got[1].PlaybackCompleted(); d.MediaID != c || d.How != media.FinishedByMark || d.PositionMS != lessonMS {
		t.Errorf("the mark's data %+v", d)
	}
	if d := got[2].CollectionCompleted(); d.CollectionID != "course" || d.Items != 2 || d.MediaID != c || !d.CompletedAt.Equal(finishedC) ||
		d.MemberID != member || d.EventID != got[2].ID {
		t.Errorf("collection data %+v, want course, 2 items, completed by %d at %v", d, c, finishedC)
	}
	last = got[2].ID

	// The whole course marked watched: both items are finished already.
	b.mark(t, member, []int64{a, c}, true, 5*time.Minute)
	if n := b.move(t); n != 0 || len(b.outbox(t, member, last)) != 0 {
		t.Fatalf("a mark of finished items moved %d", n)
	}

	// Unmarked and watched to the end again: a new finish and a new completion of the course.
	b.mark(t, member, []int64{a}, false, 6*time.Minute)
	again := b.report(t, member, a, 590_000, 7*time.Minute)
	b.move(t)
	got = b.outbox(t, member, last)
	if len(got) != 2 || got[0].Kind != media.OutboxPlaybackCompleted || got[1].Kind != media.OutboxCollectionCompleted ||
		!got[1].CollectionCompleted().CompletedAt.Equal(again) {
		t.Fatalf("after a rewatch: outbox %+v", got)
	}
	last = got[1].ID

	// Both items of another course finished before the mover runs, moved in two batches: the
	// course is completed once.
	d, e := b.lesson(t, "other", 1), b.lesson(t, "other", 2)
	b.report(t, member, d, 590_000, 8*time.Minute)
	b.report(t, member, e, 590_000, 9*time.Minute)
	if n := b.move(t); n != 2 {
		t.Fatalf("moved %d completions, want 2", n)
	}
	courses := 0
	for _, r := range b.outbox(t, member, last) {
		if r.Kind == media.OutboxCollectionCompleted {
			courses++
		}
	}
	if courses != 1 {
		t.Errorf("a course whose items finished together completed %d times, want 1", courses)
	}
	all := b.outbox(t, member, 0)
	last = all[len(all)-1].ID

	// A third course marked watched as a whole: three finishes by hand, one completion.
	third := []int64{b.lesson(t, "third", 1), b.lesson(t, "third", 2), b.lesson(t, "third", 3)}
	marked := b.mark(t, member, third, true, 10*time.Minute)
	if n := b.move(t); n != 3 {
		t.Fatalf("a course of 3 marked watched: moved %d completions, want 3", n)
	}
	courses = 0
	for _, r := range b.outbox(t, member, last) {
		if r.Kind == media.OutboxCollectionCompleted {
			courses++
			if d := r.CollectionCompleted(); d.CollectionID != "third" || d.Items != 3 || !d.CompletedAt.Equal(marked) {
				t.Errorf("the marked course's completion %+v", d)
			}
		} else if d := r.PlaybackCompleted(); d.How != media.FinishedByMark {
			t.Errorf("a finish by the course's mark %+v", d)
		}
	}
	if courses != 1 {
		t.Errorf("a course marked watched completed %d times, want 1", courses)
	}
	if n := len(b.outbox(t, 8, 0)); n != 0 {
		t.Errorf("another member has %d outbox rows", n)
	}
}

// TestMover_WaitsForTheMembersRowLock: the mover writes a member's outbox rows under the
// member's row lock, as the media pipeline does, so ids grow in commit order among a member's
// rows: while a pipeline transaction holds the lock and has written its row, the mover waits,
// and its row's id is above the pipeline's.
func TestMover_WaitsForTheMembersRowLock(t *testing.T) {
	t.Parallel()
	b := setup(t, 100)
	ctx := context.Background()
	lesson := b.lesson(t, "", 0)
	b.report(t, 1, lesson, 590_000, 0)

	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM members WHERE id = 1 FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	var moved = make(chan error, 1)
	go func() {
		_, err := b.mover.MoveOnce(ctx)
		moved <- err
	}()
	// Wait until the mover waits on the lock.
	for {
		var waiting bool
		if err := b.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%FROM members WHERE id = ANY%')`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	var pipeline int64
	if err := tx.QueryRow(ctx, `INSERT INTO notification_outbox (member_id, media_id, kind) VALUES (1, $1, $2) RETURNING id`,
		lesson, media.OutboxReady).Scan(&pipeline); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-moved; err != nil {
		t.Fatal(err)
	}
	got := b.outbox(t, 1, 0)
	if len(got) != 2 || got[0].ID != pipeline || got[1].Kind != media.OutboxPlaybackCompleted {
		t.Fatalf("outbox %+v: want the pipeline's row %d, then the completion", got, pipeline)
	}
}

// TestMover_LeavesErasedMembersAlone: an erased member's completion is not announced and their
// members row is not created again; the erasure job deletes the completion.
func TestMover_LeavesErasedMembersAlone(t *testing.T) {
	t.Parallel()
	b := setup(t, 100)
	ctx := context.Background()
	lesson := b.lesson(t, "", 0)
	b.report(t, 9, lesson, 590_000, 0)
	b.report(t, 10, lesson, 590_000, 0)
	if _, err := b.pool.Exec(ctx, `INSERT INTO member_erasures (member_id, erased_at) VALUES (9, now())`); err != nil {
		t.Fatal(err)
	}
	if n := b.move(t); n != 1 {
		t.Fatalf("moved %d, want only member 10's", n)
	}
	var rows, members int
	if err := b.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM notification_outbox WHERE member_id = 9),
		(SELECT count(*) FROM members WHERE id = 9)`).Scan(&rows, &members); err != nil {
		t.Fatal(err)
	}
	if rows != 0 || members != 0 {
		t.Errorf("erased member: %d outbox rows, %d members rows", rows, members)
	}
}

// TestMover_FailedMoveKeepsTheFinish: a move that fails after writing the outbox rows (a node
// killed, the database gone before the commit) keeps the finish it had claimed: the claim's
// delete and the outbox rows commit together or not at all, and the next run moves the finish
// once. The failure is a trigger that refuses the completion's outbox row, so the claim has
// run when the transaction fails.
func TestMover_FailedMoveKeepsTheFinish(t *testing.T) {
	t.Parallel()
	b := setup(t, 100)
	ctx := context.Background()
	lesson := b.lesson(t, "", 0)
	b.report(t, 11, lesson, 590_000, 0)
	if _, err := b.pool.Exec(ctx, `
		CREATE FUNCTION refuse_completion() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'refused'; END $$;
		CREATE TRIGGER refuse_completion BEFORE INSERT ON notification_outbox
		FOR EACH ROW WHEN (NEW.kind = '`+media.OutboxPlaybackCompleted+`') EXECUTE FUNCTION refuse_completion()`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.mover.MoveOnce(ctx); err == nil {
		t.Fatal("the move succeeded through the refusing trigger")
	}
	var kept int
	if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM playback_completions WHERE member_id = 11`).Scan(&kept); err != nil {
		t.Fatal(err)
	}
	if kept != 1 {
		t.Fatalf("after a failed move: %d finishes of member 11 left to move, want 1", kept)
	}
	if _, err := b.pool.Exec(ctx, `DROP TRIGGER refuse_completion ON notification_outbox`); err != nil {
		t.Fatal(err)
	}
	if n := b.move(t); n != 1 {
		t.Fatalf("moved %d, want 1", n)
	}
	if got := b.outbox(t, 11, 0); len(got) != 1 || got[0].Kind != media.OutboxPlaybackCompleted {
		t.Fatalf("outbox %+v: want one playback_completed", got)
	}
}

// TestMover_DropsFinishesOfDeletedMedia: a finish recorded before its media was deleted is
// taken but not announced (its media.deleted would come first); another media's finish in the
// same batch is.
func TestMover_DropsFinishesOfDeletedMedia(t *testing.T) {
	t.Parallel()
	b := setup(t, 100)
	ctx := context.Background()
	deleted, kept := b.lesson(t, "", 0), b.lesson(t, "", 0)
	b.report(t, 12, deleted, 590_000, 0)
	b.report(t, 12, kept, 590_000, time.Second)
	if _, err := b.pool.Exec(ctx, `UPDATE media SET status = 'DELETED' WHERE id = $1`, deleted); err != nil {
		t.Fatal(err)
	}
	if n := b.move(t); n != 2 {
		t.Fatalf("took %d finishes, want 2", n)
	}
	if got := b.outbox(t, 12, 0); len(got) != 1 || got[0].MediaID != kept {
		t.Fatalf("outbox %+v: want only media %d's playback_completed", got, kept)
	}
}
