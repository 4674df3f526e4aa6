package playback_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/buffer"
	"github.com/playhead/playhead/erasure"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/playback"
)

// holdFlush starts a flush on store of a report of key at position made a minute ago and returns once its statement
// has inserted the row (uncommitted, its snapshot taken before anything the test does next):
// another node's flush in flight. It is held by an uncommitted mark of the same media in
// audience_dirty, the batch's statement after the upsert; release (the mark's rollback) lets
// it commit, and flushed gives its result.
func holdFlush(t *testing.T, b *bundle, store *playback.Store, key playback.Key, position time.Duration) (release func(), flushed <-chan error) {
	t.Helper()
	ctx := context.Background()
	if _, err := b.pool.Exec(ctx, `DELETE FROM audience_dirty`); err != nil {
		t.Fatal(err)
	}
	hold, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	release = func() { _ = hold.Rollback(ctx) }
	t.Cleanup(release)
	if _, err := hold.Exec(ctx, `INSERT INTO audience_dirty (media_id) VALUES ($1)`, key.Media); err != nil {
		t.Fatal(err)
	}
	made := at(time.Now().UTC().Truncate(time.Microsecond).Add(-time.Minute-position), position) // made a minute ago
	done := make(chan error, 1)
	go func() {
		done <- store.Flush(ctx, []buffer.Entry[playback.Key, playback.Position]{{Key: key, Value: made}})
	}()
	for b.count(t, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%audience_dirty%'
		AND datname = current_database()`) == 0 {
		time.Sleep(time.Millisecond)
	}
	return release, done
}

// A forget answers once the flushes in flight when its tombstone committed have ended, and
// deletes what they wrote: a flush whose statement took its snapshot before the commit does not
// see the tombstone and inserts the row again. Here such a flush is held until the forget has
// polled again and again for the writers older than its tombstone (so a poll found the flush),
// then let go; when the forget answers, the row is gone, and so is the course progress the
// flush recorded (the media is a lesson of an imported collection, the report finished).
func TestForget_WaitsForAFlushInFlight(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	b.store.SetForgetWait(time.Hour) // the flush is held on purpose until the forget waits
	id := b.createMedia(t, map[string]any{"title": "film", "duration_ms": 600_000})
	key := playback.Key{Member: 36, Media: id}
	if _, err := b.pool.Exec(context.Background(), `WITH i AS (
		INSERT INTO imports (created_by, filename, sheet, total_rows, accepted, rejected) VALUES (1, 'a.csv', '', 1, 1, 0) RETURNING id)
		INSERT INTO import_rows (import_id, row_number, collection, chapter, position, video_url, media_id)
		SELECT id, 2, 'course', 1, 1, 'https://videos.example/a.mp4', $1 FROM i`, id); err != nil {
		t.Fatal(err)
	}
	forgetWaitsForAFlush(t, b, b.store, key, 595*time.Second, func() error {
		if status, body := b.do(t, http.MethodDelete, fmt.Sprintf("/v1/playback/%d?forget=true", id), token(t, key.Member, false), nil); status != http.StatusNoContent {
			return fmt.Errorf("forget = %d %s, want 204", status, body)
		}
		return nil
	})
	if n := b.counter(t, "forgets_unsettled_total"); n != 0 {
		t.Errorf("%v unsettled forgets counted, want 0", n)
	}
}

// Through PgBouncer in transaction mode (PLAYHEAD_TEST_PGBOUNCER=1) the wait finds the flush
// too: pg_locks and pg_stat_activity are the server's, and a transaction runs on one server
// connection, whose xact_start is the transaction's.
func TestForget_WaitsForAFlushInFlightThroughPgBouncer(t *testing.T) {
	t.Parallel()
	if os.Getenv(pgtest.EnvPgBouncer) != "1" {
		t.Skip("no PgBouncer: set " + pgtest.EnvPgBouncer + "=1")
	}
	b := setup(t, options{})
	pooled := pgtest.PooledURL(t, b.dbURL)
	if pooled == "" {
		t.Fatal("no PgBouncer URL for the test's database")
	}
	pool, err := pgxpool.New(context.Background(), pooled)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store := playback.NewStore(pool, media.DefaultCompletion)
	store.SetForgetWait(time.Hour)
	id := b.createMedia(t, map[string]any{"title": "film", "duration_ms": 600_000})
	key := playback.Key{Member: 37, Media: id}
	forgetWaitsForAFlush(t, b, store, key, 5*time.Second, func() error {
		settled, err := store.Forget(context.Background(), key, time.Now())
		if err == nil && !settled {
			err = errors.New("the forget gave up its wait")
		}
		return err
	})
}

// forgetWaitsForAFlush holds a flush of key at position on store (holdFlush) and runs forget, lets the
// flush go once the forget has polled again and again for the writers older than its tombstone
// (so a poll found the flush), and checks that the row is gone when forget returns and stays
// gone once the flush has committed.
func forgetWaitsForAFlush(t *testing.T, b *bundle, store *playback.Store, key playback.Key, position time.Duration, forget func() error) {
	t.Helper()
	release, flushed := holdFlush(t, b, store, key, position)
	forgot := make(chan error, 1)
	go func() { forgot <- forget() }()
	// The forget is waiting once its poll has started three times (each sets its connection's
	// query_start; the first on a connection may be the statement's preparation): a poll before
	// the last found the flush.
	polls := map[time.Time]bool{}
	for len(polls) < 3 {
		select {
		case err := <-forgot:
			release()
			if ferr := <-flushed; ferr != nil {
				t.Fatal(ferr)
			}
			if n := b.rows(t, key); n != 0 {
				t.Fatalf("the forget returned (%v) while a flush older than its tombstone was in flight, and that flush wrote the row again", err)
			}
			t.Fatalf("the forget returned (%v) while a flush older than its tombstone was in flight", err)
		default:
			rows, err := b.pool.Query(context.Background(), `SELECT query_start FROM pg_stat_activity WHERE datname = current_database()
				AND query LIKE $1`, "%pg_locks l LEFT JOIN pg_stat_activity%") // a parameter: this query's text does not match
			if err != nil {
				t.Fatal(err)
			}
			starts, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range starts {
				polls[s] = true
			}
			time.Sleep(time.Millisecond)
		}
	}
	release()
	if err := <-forgot; err != nil {
		t.Fatal(err)
	}
	if n := b.rows(t, key); n != 0 {
		t.Fatal("the row a flush in flight wrote survived the forget: a report made before the forget brought the item back")
	}
	if n := b.count(t, `SELECT count(*) FROM playback_last_finished WHERE member_id = $1`, key.Member); n != 0 {
		t.Fatal("the course progress a flush in flight recorded survived the forget")
	}
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	if n := b.rows(t, key); n != 0 {
		t.Fatal("the flush wrote the row after the forget returned")
	}
}

// A flush that outlasts the forget's wait (a stuck writer) can still write the row after the
// forget answered; the forget is counted as unsettled, and the next forgotten_prune run deletes
// the row (its report predates the tombstone). Here the wait gives up at once.
func TestForget_AFlushOutlastingTheWaitIsSweptAfter(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	b.store.SetForgetWait(time.Nanosecond)
	ctx := context.Background()
	id := b.createMedia(t, map[string]any{"title": "film", "duration_ms": 600_000})
	key := playback.Key{Member: 35, Media: id}
	release, flushed := holdFlush(t, b, b.store, key, 5*time.Second)
	if status, body := b.do(t, http.MethodDelete, fmt.Sprintf("/v1/playback/%d?forget=true", id), token(t, key.Member, false), nil); status != http.StatusNoContent {
		t.Fatalf("forget = %d %s, want 204", status, body)
	}
	if n := b.counter(t, "forgets_unsettled_total"); n != 1 {
		t.Errorf("%v unsettled forgets counted, want 1", n)
	}
	release()
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	if n := b.rows(t, key); n != 1 {
		t.Fatalf("%d rows after the held flush committed, want its row (the test holds nothing back otherwise)", n)
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
