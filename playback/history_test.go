package playback_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/buffer"
	"github.com/playhead/playhead/erasure"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/playback"
)

// flushOne writes one report through the flush statement, as a buffer's flush would.
func (b *bundle) flushOne(t *testing.T, key playback.Key, pos playback.Position) {
	t.Helper()
	if err := b.store.Flush(context.Background(), []buffer.Entry[playback.Key, playback.Position]{{Key: key, Value: pos}}); err != nil {
		t.Fatal(err)
	}
}

func (b *bundle) rows(t *testing.T, key playback.Key) int {
	t.Helper()
	return b.count(t, `SELECT count(*) FROM playback WHERE member_id = $1 AND media_id = $2`, key.Member, key.Media)
}

func at(base time.Time, d time.Duration) playback.Position {
	return playback.Position{PositionMS: int32(d / time.Millisecond), EventTime: base.Add(d)}
}

// A forgotten item is deleted for real, and a report made before the forget (still in a buffer
// on another node, or in a spill file) does not create it again; a report made after does.
func TestForget_LateBufferedReportDoesNotComeBack(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	id := b.createMedia(t, map[string]any{"title": "film", "duration_ms": 600_000})
	key := playback.Key{Member: 31, Media: id}
	tok := token(t, key.Member, false)
	base := time.Now().UTC().Truncate(time.Microsecond).Add(-time.Minute)
	b.flushOne(t, key, at(base, 10*time.Second))
	late := at(base, 15*time.Second) // made before the forget, flushed after it

	path := fmt.Sprintf("/v1/playback/%d?forget=true", id)
	if status, body := b.do(t, http.MethodDelete, path, tok, nil); status != http.StatusNoContent {
		t.Fatalf("DELETE %s = %d %s", path, status, body)
	}
	if n := b.rows(t, key); n != 0 {
		t.Fatalf("%d rows after the forget, want 0 (not hidden: deleted)", n)
	}
	b.flushOne(t, key, late)
	if n := b.rows(t, key); n != 0 {
		t.Fatal("a report made before the forget created the row again")
	}
	if status, _ := b.do(t, http.MethodGet, fmt.Sprintf("/v1/playback/%d", id), tok, nil); status != http.StatusNotFound {
		t.Fatalf("GET after the forget = %d, want 404", status)
	}
	b.flushOne(t, key, playback.Position{PositionMS: 1000, EventTime: time.Now().UTC().Add(time.Second)})
	if n := b.rows(t, key); n != 1 {
		t.Fatal("a report made after the forget (watching again) was not stored")
	}
	if status, body := b.do(t, http.MethodDelete, fmt.Sprintf("/v1/playback/%d?forget=maybe", id), tok, nil); status != http.StatusBadRequest {
		t.Fatalf("forget=maybe = %d %s, want 400", status, body)
	}
}

// While a member's history is paused, reports are answered 204 and nothing of them is stored:
// no new row (not even from opening a video), no change to a row from before the pause (its
// position, watched ranges and watched mark stay), and that holds for a report accepted
// before the pause and flushed after it. Resuming stores reports again.
func TestPause_ReportsStoreNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	old := b.createMedia(t, map[string]any{"title": "old", "duration_ms": 600_000})
	fresh := b.createMedia(t, map[string]any{"title": "new", "duration_ms": 600_000})
	const member = 32
	tok := token(t, member, false)
	before := time.Now().UTC().Truncate(time.Microsecond).Add(-time.Minute)
	oldKey, freshKey := playback.Key{Member: member, Media: old}, playback.Key{Member: member, Media: fresh}
	b.flushOne(t, oldKey, at(before, 10*time.Second))
	snapshot := func() string {
		var s string
		if err := b.pool.QueryRow(context.Background(), `SELECT row(p.*)::text FROM playback p WHERE member_id = $1 AND media_id = $2`,
			member, old).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	stored := snapshot()
	accepted := at(before, 20*time.Second) // accepted before the pause, flushed after

	if status, body := b.do(t, http.MethodPut, "/v1/me/settings", tok, map[string]any{"history_paused": true}); status != http.StatusOK {
		t.Fatalf("PUT /v1/me/settings = %d %s", status, body)
	}
	status, body := b.do(t, http.MethodGet, "/v1/me/settings", tok, nil)
	var st playback.Settings
	if err := json.Unmarshal(body, &st); status != http.StatusOK || err != nil || !st.HistoryPaused {
		t.Fatalf("GET /v1/me/settings = %d %s, want history_paused true", status, body)
	}
	b.flushOne(t, oldKey, accepted)
	if status, body := b.do(t, http.MethodPut, fmt.Sprintf("/v1/playback/%d", fresh), tok, map[string]any{"position_ms": 30_000}); status != http.StatusNoContent {
		t.Fatalf("PUT while paused = %d %s, want 204", status, body)
	}
	b.flushOne(t, freshKey, at(time.Now().UTC(), 30*time.Second))
	if status, body := b.do(t, http.MethodPost, fmt.Sprintf("/v1/playback/%d", fresh), tok, nil); status != http.StatusOK {
		t.Fatalf("POST (open) while paused = %d %s", status, body)
	}
	if err := b.store.UpsertOne(context.Background(), freshKey, at(time.Now().UTC(), 40*time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := snapshot(); got != stored {
		t.Fatalf("a row from before the pause changed:\n was %s\n now %s", stored, got)
	}
	if n := b.rows(t, freshKey); n != 0 {
		t.Fatal("a report while paused created a row")
	}

	if status, body := b.do(t, http.MethodPut, "/v1/me/settings", tok, map[string]any{"history_paused": false}); status != http.StatusOK {
		t.Fatalf("PUT /v1/me/settings = %d %s", status, body)
	}
	b.flushOne(t, freshKey, at(time.Now().UTC(), 50*time.Second))
	if n := b.rows(t, freshKey); n != 1 {
		t.Fatal("a report after resuming was not stored")
	}
	for _, bad := range []string{`{}`, `{"history_paused": "yes"}`, `{"history_paused": true, "x": 1}`} {
		if status, _ := b.do(t, http.MethodPut, "/v1/me/settings", tok, bad); status < 400 || status >= 500 {
			t.Errorf("PUT /v1/me/settings %s = %d, want a 4xx", bad, status)
		}
	}
}

// A flush whose statement reaches the database while an erasure holds the fence waits for it,
// and then reads the erasure record: it stores nothing of the erased member and everything of
// the others. (Its batch was taken from the buffer before the erasure committed.)
func TestFlush_FencedByAnErasureInProgress(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	id := b.createMedia(t, map[string]any{"title": "film", "duration_ms": 600_000})
	const erased, kept = 4_700_000_001, 33
	batch := []buffer.Entry[playback.Key, playback.Position]{
		{Key: playback.Key{Member: kept, Media: id}, Value: at(time.Now().UTC().Truncate(time.Microsecond), 5*time.Second)},
		{Key: playback.Key{Member: erased, Media: id}, Value: at(time.Now().UTC().Truncate(time.Microsecond), 5*time.Second)},
	}
	ctx := context.Background()
	// The erasure's transaction, held open after its lock and record: what Erase does between
	// its first statement and its commit.
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT playhead_erasure_lock()`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO member_erasures VALUES ($1, statement_timestamp())`, erased); err != nil {
		t.Fatal(err)
	}
	flushed := make(chan error, 1)
	go func() { flushed <- b.store.Flush(ctx, batch) }()
	early := waitForLockWaiter(t, b, flushed)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if early {
		t.Error("the flush did not wait for the erasure holding the fence")
	} else if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	if n := b.count(t, `SELECT count(*) FROM playback WHERE member_id = $1`, erased); n != 0 {
		t.Fatal("the flush stored a row of a member erased while it waited: the fence let it through")
	}
	if n := b.count(t, `SELECT count(*) FROM playback WHERE member_id = $1`, kept); n != 1 {
		t.Fatal("the flush dropped the other member's row")
	}
	// And every later write of the member is a no-op.
	if err := b.store.UpsertOne(ctx, batch[1].Key, at(time.Now().UTC(), 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Open(ctx, batch[1].Key, time.Now().UTC(), ""); err == nil {
		t.Fatal("Open of an erased member answered, want an error")
	}
	if n := b.count(t, `SELECT count(*) FROM playback WHERE member_id = $1`, erased); n != 0 {
		t.Fatal("a write after the erasure stored a row")
	}
}

// An erasure waits for the flushes in flight (they hold the fence's shared side), so it never
// commits between a flush's read of the record and its write.
func TestErase_WaitsForAFlushInFlight(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := context.Background()
	var inFlight pgx.Batch
	inFlight.Queue(erasure.FenceSQL)
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := tx.SendBatch(ctx, &inFlight).Close(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := erasure.Erase(ctx, b.pool, 4_700_000_002, erasure.MaxAttempts)
		done <- err
	}()
	if waitForLockWaiter(t, b, done) {
		t.Fatal("Erase returned while a flush held the fence")
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// waitForLockWaiter waits until a session of the test's database waits for an advisory lock,
// or until returned (the call that should be waiting) gives its result: then it reports true,
// the result kept in returned.
func waitForLockWaiter(t *testing.T, b *bundle, returned chan error) (early bool) {
	t.Helper()
	for b.count(t, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`) == 0 {
		select {
		case err := <-returned:
			returned <- err
			return true
		default:
		}
		time.Sleep(time.Millisecond)
	}
	return false
}

// The periodic prune deletes the tombstones older than erasure.TombstoneKeep before its run
// time, and only those: a younger one still keeps a late report out.
func TestTombstoneKind_PrunesOnlyOldTombstones(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := context.Background()
	run := time.Now().UTC().Truncate(time.Millisecond)
	if _, err := b.pool.Exec(ctx, `INSERT INTO playback_forgotten (member_id, media_id, forgotten_at)
		SELECT 40, g, $1::timestamptz - make_interval(hours => g) FROM generate_series(1, 300) g`, run); err != nil {
		t.Fatal(err)
	}
	kind := erasure.TombstoneKind(b.pool)
	if _, err := kind.Run(ctx, jobqueue.Job{Subject: run.UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	keep := int(erasure.TombstoneKeep / time.Hour) // tombstones 1 … keep hours old stay (keep exactly is not older)
	if n := b.count(t, `SELECT count(*) FROM playback_forgotten`); n != keep {
		t.Fatalf("%d tombstones left, want the %d younger than %s", n, keep, erasure.TombstoneKeep)
	}
	if n := b.count(t, `SELECT count(*) FROM playback_forgotten WHERE forgotten_at < $1`, run.Add(-erasure.TombstoneKeep)); n != 0 {
		t.Fatalf("%d tombstones older than the keep left", n)
	}
}

// A report of a media deleted while it was buffered is dropped by the flush (the media row
// stays until its deletion job ends; the row would name a media nobody can read).
func TestFlush_SkipsDeletedMedia(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	id := b.createMedia(t, map[string]any{"title": "film", "duration_ms": 600_000})
	if _, err := b.pool.Exec(context.Background(), `UPDATE media SET status = 'DELETED' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	key := playback.Key{Member: 34, Media: id}
	b.flushOne(t, key, at(time.Now().UTC().Truncate(time.Microsecond), 5*time.Second))
	if err := b.store.UpsertOne(context.Background(), key, at(time.Now().UTC().Truncate(time.Microsecond), 6*time.Second)); err != nil {
		t.Fatal(err)
	}
	if n := b.rows(t, key); n != 0 {
		t.Fatal("a report of a DELETED media was stored")
	}
}

// No member row can be created for an erased member (media creation, tus uploads and imports
// all create their owner's row first): the trigger refuses it with PHERA, a 401.
func TestMembersTrigger_RefusesErasedMember(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := context.Background()
	const erased, kept = 4_700_000_301, 4_700_000_302
	if _, err := erasure.Erase(ctx, b.pool, erased, erasure.MaxAttempts); err != nil {
		t.Fatal(err)
	}
	err := media.EnsureMember(ctx, b.pool, erased)
	if code := apperr.CodeOf(err); code != apperr.Unauthenticated {
		t.Fatalf("EnsureMember(an erased member) = %v (%s), want unauthenticated", err, code)
	}
	if err := media.EnsureMember(ctx, b.pool, kept); err != nil {
		t.Fatal(err)
	}
	if n := b.count(t, `SELECT count(*) FROM members WHERE id IN ($1, $2)`, erased, kept); n != 1 {
		t.Fatalf("%d member rows, want only the member not erased", n)
	}
}
