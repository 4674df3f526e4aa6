package playback_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/playback"
)

// TestMarks_ThroughTheAPI marks through the routes, at the default thresholds: a media marked
// watched answers finished with a watched mark and leaves continue watching; marked unwatched
// it has neither and the open resumes from 0; a position in the credits answers finished; a course marked watched marks each item; another
// member's private media is 404 and a paused history 409, with nothing stored.
func TestMarks_ThroughTheAPI(t *testing.T) {
	t.Parallel()
	b := setup(t, options{completion: media.DefaultCompletion})
	tok := token(t, 7, false)
	lesson := func(title string) int64 {
		return b.createMedia(t, map[string]any{"title": title, "duration_ms": 1_200_000, "status": "READY", "visibility": "PUBLIC"})
	}
	first, second := lesson("one"), lesson("two")
	position := func(id int64) (pos struct {
		PositionMS int32      `json:"position_ms"`
		Finished   bool       `json:"finished"`
		WatchedAt  *time.Time `json:"watched_at"`
	}) {
		t.Helper()
		status, body := b.do(t, http.MethodPost, fmt.Sprintf("/v1/playback/%d", id), tok, nil)
		if status != http.StatusOK || json.Unmarshal(body, &pos) != nil {
			t.Fatalf("open %d: %d %s", id, status, body)
		}
		return pos
	}
	listed := func() int {
		t.Helper()
		items, _, err := b.store.List(t.Context(), 7, nil, 10)
		if err != nil {
			t.Fatal(err)
		}
		return len(items)
	}
	mark := func(method, path string, want int) {
		t.Helper()
		if status, body := b.do(t, method, path, tok, nil); status != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, status, body, want)
		}
	}

	// Half-way: listed, resumes there.
	if err := b.store.UpsertOne(t.Context(), playback.Key{Member: 7, Media: first},
		playback.Position{PositionMS: 600_000, EventTime: time.Now().Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if p := position(first); p.PositionMS != 600_000 || listed() != 1 {
		t.Fatalf("half-way: open %+v, %d listed; want 600000, 1", p, listed())
	}
	mark(http.MethodPut, fmt.Sprintf("/v1/playback/%d/watched", first), http.StatusNoContent)
	if p := position(first); !p.Finished || p.WatchedAt == nil || p.PositionMS != 1_200_000 || listed() != 0 {
		t.Errorf("marked watched: open %+v, %d listed; want finished at the end with a watched mark, none listed", p, listed())
	}
	mark(http.MethodDelete, fmt.Sprintf("/v1/playback/%d/watched", first), http.StatusNoContent)
	if p := position(first); p.Finished || p.WatchedAt != nil || p.PositionMS != 0 || listed() != 0 {
		t.Errorf("marked unwatched: open %+v, %d listed; want position 0, no mark, none listed", p, listed())
	}
	// A report below the minimum keeps no resume point: the open answers 0.
	if err := b.store.UpsertOne(t.Context(), playback.Key{Member: 7, Media: second},
		playback.Position{PositionMS: 30_000, EventTime: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if p := position(second); p.PositionMS != 0 {
		t.Errorf("at 0:30 of 20 min: open answers %d, want 0", p.PositionMS)
	}

	// In the credits: finished, in the answer as in the list.
	credits := lesson("credits")
	if _, err := b.pool.Exec(t.Context(), `UPDATE media SET credits_start_ms = 1000000, credits_end_ms = 1200000 WHERE id = $1`, credits); err != nil {
		t.Fatal(err)
	}
	if err := b.store.UpsertOne(t.Context(), playback.Key{Member: 7, Media: credits},
		playback.Position{PositionMS: 1_100_000, EventTime: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if p := position(credits); !p.Finished || p.WatchedAt == nil || listed() != 0 {
		t.Errorf("in the credits: open %+v, %d listed; want finished with a watched mark, none listed", p, listed())
	}

	if _, err := b.pool.Exec(t.Context(), `
		WITH imp AS (INSERT INTO imports (created_by, filename, total_rows, accepted, rejected) VALUES (1, 'c.csv', 2, 2, 0) RETURNING id)
		INSERT INTO import_rows (import_id, row_number, collection, chapter, position, video_url, media_id)
		SELECT imp.id, n, '레벨1', 1, n, 'https://example.com/l.mp4', m FROM imp, unnest($1::bigint[]) WITH ORDINALITY AS l(m, n)`,
		[]int64{first, second}); err != nil {
		t.Fatal(err)
	}
	mark(http.MethodPut, "/v1/collections/%EB%A0%88%EB%B2%A81/watched", http.StatusNoContent)
	if n := b.count(t, `SELECT count(*) FROM playback WHERE member_id = 7 AND media_id <> $1 AND watched_at IS NOT NULL AND finished`, credits); n != 2 {
		t.Errorf("course marked watched: %d items watched, want 2", n)
	}
	mark(http.MethodDelete, "/v1/collections/%EB%A0%88%EB%B2%A81/watched", http.StatusNoContent)
	if n := b.count(t, `SELECT count(*) FROM playback WHERE member_id = 7 AND media_id <> $1 AND (watched_at IS NOT NULL OR finished)`, credits); n != 0 {
		t.Errorf("course marked unwatched: %d items still watched, want 0", n)
	}
	mark(http.MethodPut, "/v1/collections/nothing/watched", http.StatusNotFound)

	private := b.createMedia(t, map[string]any{"title": "mine", "duration_ms": 1_200_000, "status": "READY", "visibility": "PRIVATE", "owner_id": 8})
	mark(http.MethodPut, fmt.Sprintf("/v1/playback/%d/watched", private), http.StatusNotFound)
	if status, body := b.do(t, http.MethodPut, "/v1/me/settings", tok, map[string]any{"history_paused": true}); status != http.StatusOK {
		t.Fatalf("pause: %d %s", status, body)
	}
	mark(http.MethodPut, fmt.Sprintf("/v1/playback/%d/watched", first), http.StatusConflict)
	if n := b.count(t, `SELECT count(*) FROM playback WHERE member_id = 7 AND media_id <> $2 AND watched_at IS NOT NULL OR member_id = 7 AND media_id = $1`,
		private, credits); n != 0 {
		t.Errorf("refused marks stored %d rows", n)
	}
}
