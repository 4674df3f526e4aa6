package history_test

import (
	"context"
	"testing"
	"time"

	"github.com/playhead/playhead/buffer"
	"github.com/playhead/playhead/history"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/playback"
)

// TestExpire_KeepsARowAFlushMadeRecentMeanwhile: a batch that has read two old rows and is
// removing the first when a flush writes a fresh position to the second and commits leaves
// the second, with that position. The batch's snapshot still shows the second row old: only
// FOR UPDATE's second look at the row it locks (its committed version, listed_at past the
// cutoff) keeps it; without it the DELETE follows the update to the new version and removes
// it, the member's current position with it.
func TestExpire_KeepsARowAFlushMadeRecentMeanwhile(t *testing.T) {
	pool, _ := pgtest.Pool(t)
	ctx := context.Background()
	exec(t, pool, `INSERT INTO members (id) VALUES (1)`)
	exec(t, pool, `INSERT INTO media (owner_id, title, status, duration_ms) VALUES (1, 'a', 'READY', 600000)`)
	exec(t, pool, `INSERT INTO playback (member_id, media_id, position_ms, event_time, updated_at) VALUES
		(7, 1, 1000, statement_timestamp() - interval '41 days', statement_timestamp()),
		(8, 1, 1000, statement_timestamp() - interval '40 days', statement_timestamp())`)
	// Recent rows of other members, so that the plan is the one a real table gets: the batch
	// reads its rows lazily (a nested loop over them), locking each as the DELETE comes to it.
	exec(t, pool, `INSERT INTO media (owner_id, title, status, duration_ms) SELECT 1, 'b', 'READY', 600000 FROM generate_series(1, 100)`)
	exec(t, pool, `INSERT INTO playback (member_id, media_id, position_ms, event_time, updated_at)
		SELECT mb, md.id, 1000, statement_timestamp() - interval '1 day', statement_timestamp()
		FROM generate_series(1000, 1099) mb, media md WHERE md.title = 'b'`)
	exec(t, pool, `ANALYZE playback`)
	// The batch stops at its first row's DELETE until the test lets it go on.
	exec(t, pool, `CREATE FUNCTION test_hold() RETURNS trigger LANGUAGE plpgsql AS
		$$ BEGIN PERFORM pg_advisory_xact_lock_shared(4242); RETURN OLD; END $$`)
	exec(t, pool, `CREATE TRIGGER test_hold BEFORE DELETE ON playback FOR EACH ROW EXECUTE FUNCTION test_hold()`)
	gate, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer gate.Release()
	if _, err := gate.Exec(ctx, `SELECT pg_advisory_lock(4242)`); err != nil {
		t.Fatal(err)
	}
	type result struct {
		n   int64
		err error
	}
	expired := make(chan result, 1)
	go func() {
		n, err := history.Expire(ctx, pool, time.Now().Add(-30*24*time.Hour), history.Batch, nil)
		expired <- result{n, err}
	}()
	for count(t, pool, `SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'advisory' AND datname = current_database()`) == 0 {
		time.Sleep(time.Millisecond)
	}
	fresh := playback.Position{PositionMS: 420_000, EventTime: time.Now().UTC().Truncate(time.Microsecond)}
	store := playback.NewStore(pool, media.Completion{Ratio: 0.9, Tail: time.Second})
	flushed := make(chan error, 1)
	go func() {
		flushed <- store.Flush(ctx, []buffer.Entry[playback.Key, playback.Position]{{Key: playback.Key{Member: 8, Media: 1}, Value: fresh}})
	}()
	// The flush either commits (the batch has not locked its row yet) or waits for the batch
	// (it has): either way the batch goes on after.
	var flushErr error
	waited := false
wait:
	for {
		select {
		case flushErr = <-flushed:
			break wait
		default:
		}
		if count(t, pool, `SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'transactionid' AND datname = current_database()`) > 0 {
			waited = true
			break
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := gate.Exec(ctx, `SELECT pg_advisory_unlock(4242)`); err != nil {
		t.Fatal(err)
	}
	if waited {
		flushErr = <-flushed
	}
	if flushErr != nil {
		t.Fatal(flushErr)
	}
	r := <-expired
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Logf("the flush waited for the batch: %v; the batch removed %d", waited, r.n)
	var position int64
	var eventTime time.Time
	if err := pool.QueryRow(ctx, `SELECT position_ms, event_time FROM playback WHERE member_id = 8`).Scan(&position, &eventTime); err != nil {
		t.Fatalf("member 8's row, flushed during the batch: %v", err)
	}
	if position != 420_000 || !eventTime.Equal(fresh.EventTime) {
		t.Errorf("member 8's row at %d ms, %s; want the flush's 420000 ms, %s", position, eventTime, fresh.EventTime)
	}
	if n := count(t, pool, `SELECT count(*) FROM playback WHERE member_id = 7`); n != 0 {
		t.Errorf("member 7's old row stays")
	}
}
