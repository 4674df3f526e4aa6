package playback_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/erasure"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/playback"
)

// TestMark_StoresNothingItMustNot marks below the handler's checks, as a node that has not
// heard of an erasure or a deletion yet would: an erased member's marks answer 401 and store
// no row, a DELETED media gets no row, a course's mark leaves out another member's private item
// placed in it, and a report made before a mark and flushed after the member's erasure brings
// nothing back.
func TestMark_StoresNothingItMustNot(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := context.Background()
	id := b.createMedia(t, map[string]any{"title": "film", "duration_ms": 600_000})
	now := time.Now().UTC()

	t.Run("ErasedMember", func(t *testing.T) {
		const erased = 4_700_000_601
		if _, err := erasure.Erase(ctx, b.pool, erased, erasure.MaxAttempts); err != nil {
			t.Fatal(err)
		}
		for _, watched := range []bool{true, false} {
			if err := b.store.Mark(ctx, erased, []int64{id}, watched, now); apperr.CodeOf(err) != apperr.Unauthenticated {
				t.Errorf("Mark(watched %v) of an erased member = %v, want unauthenticated", watched, err)
			}
		}
		if n := b.rows(t, playback.Key{Member: erased, Media: id}); n != 0 {
			t.Errorf("an erased member's mark stored %d rows", n)
		}
	})

	t.Run("DeletedMedia", func(t *testing.T) {
		gone := b.createMedia(t, map[string]any{"title": "gone", "duration_ms": 600_000})
		if _, err := b.pool.Exec(ctx, `UPDATE media SET status = 'DELETED' WHERE id = $1`, gone); err != nil {
			t.Fatal(err)
		}
		if err := b.store.Mark(ctx, 61, []int64{gone}, true, now); err != nil {
			t.Fatal(err)
		}
		if n := b.rows(t, playback.Key{Member: 61, Media: gone}); n != 0 {
			t.Errorf("a mark of a DELETED media stored %d rows", n)
		}
	})

	t.Run("CourseWithAnotherMembersPrivateItem", func(t *testing.T) {
		private := b.createMedia(t, map[string]any{"title": "theirs", "duration_ms": 600_000, "status": "READY", "visibility": "PRIVATE", "owner_id": 63})
		public := b.createMedia(t, map[string]any{"title": "ours", "duration_ms": 600_000, "status": "READY", "visibility": "PUBLIC"})
		if _, err := b.pool.Exec(ctx, `
			WITH imp AS (INSERT INTO imports (created_by, filename, total_rows, accepted, rejected) VALUES (1, 'c.csv', 2, 2, 0) RETURNING id)
			INSERT INTO import_rows (import_id, row_number, collection, chapter, position, video_url, media_id)
			SELECT imp.id, n, 'mixed', 1, n, 'https://example.com/l.mp4', m FROM imp, unnest($1::bigint[]) WITH ORDINALITY AS l(m, n)`,
			[]int64{private, public}); err != nil {
			t.Fatal(err)
		}
		if status, body := b.do(t, http.MethodPut, "/v1/collections/mixed/watched", token(t, 62, false), nil); status != http.StatusNoContent {
			t.Fatalf("PUT the course watched: %d %s", status, body)
		}
		if n := b.rows(t, playback.Key{Member: 62, Media: private}); n != 0 {
			t.Errorf("the course's mark stored a row for another member's private item")
		}
		if n := b.rows(t, playback.Key{Member: 62, Media: public}); n != 1 {
			t.Errorf("the course's public item: %d rows, want 1", n)
		}
	})

	t.Run("MarkErasureLateFlush", func(t *testing.T) {
		const member = 4_700_000_602
		key := playback.Key{Member: member, Media: id}
		if err := b.store.Mark(ctx, member, []int64{id}, true, now); err != nil {
			t.Fatal(err)
		}
		if _, err := erasure.Erase(ctx, b.pool, member, erasure.MaxAttempts); err != nil {
			t.Fatal(err)
		}
		job := (&erasure.Job{Pool: b.pool,
			DeleteMedia:   func(context.Context, pgx.Tx, int64) (int, error) { return 0, nil },
			ExpireUploads: func(context.Context) (int, error) { return 0, nil },
		}).Kind()
		if _, err := job.Run(ctx, jobqueue.Job{Kind: erasure.KindErase, Subject: member}); err != nil {
			t.Fatal(err)
		}
		// Made before the mark, buffered, flushed after the erasure.
		b.flushOne(t, key, playback.Position{PositionMS: 300_000, EventTime: now.Add(-time.Second)})
		b.flushOne(t, key, playback.Position{PositionMS: 590_000, EventTime: now.Add(time.Second)})
		for _, table := range []string{"playback", "playback_last_finished"} {
			if n := b.count(t, `SELECT count(*) FROM `+table+` WHERE member_id = $1`, member); n != 0 {
				t.Errorf("%s holds %d rows of the erased member after a late flush", table, n)
			}
		}
	})
}
