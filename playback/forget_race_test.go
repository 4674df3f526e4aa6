package playback_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/playhead/playhead/buffer"
	"github.com/playhead/playhead/erasure"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/playback"
)

// A forget that runs while a flush holding a report made before it is in flight (another
// node's flush, its statement past its snapshot but not committed) cannot see the row that
// flush inserts, and the row outlives the forget; the next forgotten_prune run deletes it (its
// report predates the tombstone). Here the flush is held by an uncommitted mark of the same
// media in audience_dirty, the batch's statement after the upsert.
func TestForget_AFlushInFlightIsSweptAfter(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := context.Background()
	id := b.createMedia(t, map[string]any{"title": "film", "duration_ms": 600_000})
	key := playback.Key{Member: 35, Media: id}
	tok := token(t, key.Member, false)
	if _, err := b.pool.Exec(ctx, `DELETE FROM audience_dirty`); err != nil {
		t.Fatal(err)
	}
	hold, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hold.Rollback(ctx) }()
	if _, err := hold.Exec(ctx, `INSERT INTO audience_dirty (media_id) VALUES ($1)`, id); err != nil {
		t.Fatal(err)
	}
	made := at(time.Now().UTC().Truncate(time.Microsecond).Add(-time.Minute), 5*time.Second)
	flushed := make(chan error, 1)
	go func() {
		flushed <- b.store.Flush(ctx, []buffer.Entry[playback.Key, playback.Position]{{Key: key, Value: made}})
	}()
	// The flush has inserted the row (uncommitted) and waits on the mark.
	for b.count(t, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%audience_dirty%'
		AND datname = current_database()`) == 0 {
		time.Sleep(time.Millisecond)
	}
	if status, body := b.do(t, http.MethodDelete, fmt.Sprintf("/v1/playback/%d?forget=true", id), tok, nil); status != http.StatusNoContent {
		t.Fatalf("forget = %d %s, want 204", status, body)
	}
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	if _, err := erasure.TombstoneKind(b.pool).Run(ctx, jobqueue.Job{Subject: time.Now().UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	if n := b.rows(t, key); n != 0 {
		t.Fatal("the row a flush in flight wrote survived the forget and the sweep: a report made before the forget brought the item back")
	}
	if n := b.count(t, `SELECT count(*) FROM playback_forgotten WHERE member_id = $1`, key.Member); n != 1 {
		t.Fatalf("%d tombstones, want the forget's (it is younger than the keep)", n)
	}
}

// The sweep goes through every tombstone, a batch at a time: a row whose report predates its
// tombstone goes, in the last batch too; a row reported after its tombstone (watched again)
// stays.
func TestTombstoneKind_SweepsEveryBatch(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := context.Background()
	id := b.createMedia(t, map[string]any{"title": "film", "duration_ms": 600_000})
	forgot := time.Now().UTC().Truncate(time.Microsecond).Add(-time.Hour)
	if _, err := b.pool.Exec(ctx, `INSERT INTO playback_forgotten (member_id, media_id, forgotten_at)
		SELECT g, $1, $2 FROM generate_series(1, 12001) g`, id, forgot); err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(ctx, `INSERT INTO playback (member_id, media_id, position_ms, event_time, updated_at)
		VALUES (1, $1, 1000, $2::timestamptz - interval '1 second', now()), (12001, $1, 1000, $2::timestamptz, now()),
		       (6000, $1, 1000, $2::timestamptz + interval '1 second', now())`, id, forgot); err != nil {
		t.Fatal(err)
	}
	if _, err := erasure.TombstoneKind(b.pool).Run(ctx, jobqueue.Job{Subject: time.Now().UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	if n := b.count(t, `SELECT count(*) FROM playback WHERE member_id IN (1, 12001)`); n != 0 {
		t.Errorf("%d rows reported before their tombstone are left (the first and the last batch's)", n)
	}
	if n := b.count(t, `SELECT count(*) FROM playback WHERE member_id = 6000`); n != 1 {
		t.Error("the row reported after its tombstone was swept")
	}
}
