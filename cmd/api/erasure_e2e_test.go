package main

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/buffer"
	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/s3test"
	"github.com/playhead/playhead/internal/ssetest"
	"github.com/playhead/playhead/internal/testvideo"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/playback"
)

// erasedMember is the member the erasure test erases: an id long enough that finding its
// digits anywhere is finding the member, not a coincidence with another number. It stays below
// auth.MaxSecretMember: the test's tokens are the shared secret's.
const erasedMember = 470_000_123_457

// TestErasure_FindsNothingAfterwards: two API nodes and a worker; the member has positions
// buffered on both API nodes (and rows stored, a forgotten item's tombstone, an upload being
// encoded, an unfinished resumable upload, events with webhook deliveries the receiver keeps
// failing, an open event stream). The database goes away for the second API node, which stops
// and spills the member's positions. The member erases their account on the first node. Then
// the erasure job runs, the second node starts again and replays its spill file, both nodes
// stop (their final flushes), the rollups run: a scan of every column of every table (read from
// the catalogue) finds the member's id only in the erasure record (the erasure job deletes its
// own row); no
// spill file is left; the object store holds nothing of theirs; their event stream ended; and
// the player's next PUT answers 401.
//
// It runs on local storage and on S3 (SeaweedFS): there the bucket must hold no object and no
// unfinished multipart upload afterwards.
func TestErasure_FindsNothingAfterwards(t *testing.T) {
	t.Run("local", func(t *testing.T) { testErasure(t, nil, "") })
	t.Run("s3", func(t *testing.T) { testErasure(t, s3test.Shared(t), s3test.Bucket(t)) })
}

// testErasure is TestErasure_FindsNothingAfterwards on local storage (srv nil) or on bucket.
func testErasure(t *testing.T, srv *s3test.Server, bucket string) {
	proxy, direct, viaProxy := proxiedDatabase(t)
	storageDir := t.TempDir()
	spill1, spill2 := t.TempDir(), t.TempDir()
	failing := atomic.Bool{}
	failing.Store(true)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if failing.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(receiver.Close)
	env := func(role, name, dbURL, spillDir string) map[string]string {
		e := pipelineEnv(role, name, storageDir, t.TempDir(), "veryfast")
		e["DATABASE_URL"] = dbURL
		e["PLAYHEAD_SPILL_DIR"] = spillDir
		e["PLAYHEAD_FLUSH_INTERVAL"] = "1h" // positions stay in the buffers until the stop
		e["PLAYHEAD_SHUTDOWN_TIMEOUT"] = "6s"
		e["PLAYHEAD_WEBHOOK_ALLOW_PRIVATE"] = "true"
		e["PLAYHEAD_AUDIENCE_INTERVAL"] = "1s"
		e["PLAYHEAD_JOB_RETRY_CAP"] = "1s"
		if srv != nil {
			maps.Copy(e, srv.Env(bucket))
		}
		return e
	}
	api1 := binarytest.Start(t, env("api", "erasure-api1", direct, spill1))
	env2 := env("api", "erasure-api2", viaProxy, spill2)
	env2["PLAYHEAD_DATABASE_DIRECT_URL"] = viaProxy
	api2 := binarytest.Start(t, env2)
	workerEnv := env("worker", "erasure-worker", direct, t.TempDir())
	workerEnv["PLAYHEAD_ENCODE_PRESET"] = "slow" // the upload's higher rungs still encode when the erasure comes
	worker := binarytest.Start(t, workerEnv)
	pool := api1.Pool(t)

	admin := binarytest.Token(t, 1, true)
	member := binarytest.Token(t, erasedMember, false)
	const other = 77 // a member whose data must stay
	otherTok := binarytest.Token(t, other, false)
	registerWebhookFor(t, api1, admin, receiver.URL, []string{media.EventPlayable, media.EventReady, media.EventFailed})
	films := []int64{api1.CreateMedia(t, admin, "one"), api1.CreateMedia(t, admin, "two"), api1.CreateMedia(t, admin, "three")}

	// Stored: opened rows, a finished one, a forgotten item (its tombstone names the member).
	for _, id := range films {
		api1.MustDo(t, http.StatusOK, http.MethodPost, api1.URL("/v1/playback/%d", id), member, nil)
		api1.MustDo(t, http.StatusOK, http.MethodPost, api1.URL("/v1/playback/%d", id), otherTok, nil)
	}
	api1.MustDo(t, http.StatusNoContent, http.MethodDelete, api1.URL("/v1/playback/%d?forget=true", films[2]), member, nil)
	// An upload being encoded, and an unfinished resumable upload.
	src := testvideo.MP4(t, t.TempDir(), testvideo.Spec{Seconds: 30, Width: 1280, Height: 720, Audio: true})
	uploaded := api1.Upload(t, member, binarytest.Upload{Path: src, Title: "mine"})
	api1.TusUpload(t, member, 1000, "", []byte("the first bytes of an upload never finished"))
	// Buffered on both nodes (the flush interval is an hour).
	for i, id := range films {
		api1.MustDo(t, http.StatusNoContent, http.MethodPut, api1.URL("/v1/playback/%d", id), member, map[string]any{"position_ms": 10_000 + i})
		api2.MustDo(t, http.StatusNoContent, http.MethodPut, api2.URL("/v1/playback/%d", id), member, map[string]any{"position_ms": 20_000 + i})
		api2.MustDo(t, http.StatusNoContent, http.MethodPut, api2.URL("/v1/playback/%d", id), otherTok, map[string]any{"position_ms": 30_000 + i})
	}
	// A finish, announced as playback.completed before the erasure (its outbox row, and the
	// members row the completion mover locks, name the member). The film is a course's one
	// lesson, so the finish completes the course too (collection_completions names the member).
	if _, err := pool.Exec(context.Background(), `
		WITH imp AS (INSERT INTO imports (created_by, filename, total_rows, accepted, rejected) VALUES (1, 'course.csv', 1, 1, 0) RETURNING id)
		INSERT INTO import_rows (import_id, row_number, collection, chapter, position, video_url, media_id)
		SELECT imp.id, 2, 'erasure-course', 1, 1, 'https://example.com/v.mp4', $1 FROM imp`, films[1]); err != nil {
		t.Fatal(err)
	}
	api1.MustDo(t, http.StatusNoContent, http.MethodPut, api1.URL("/v1/playback/%d/watched", films[1]), member, nil)
	waitCount(t, pool, "the member's playback.completed", `SELECT count(*) FROM notification_outbox WHERE member_id = $1 AND kind = 'playback_completed'`, erasedMember)
	waitCount(t, pool, "the member's course completion", `SELECT count(*) FROM collection_completions WHERE member_id = $1`, erasedMember)
	stream := ssetest.Open(t, &http.Client{Transport: api1.Client.Transport}, api1.URL("/v1/events"), member, "")
	// Events for the member (the upload's) with deliveries the receiver refuses.
	waitCount(t, pool, "the member's webhook deliveries", `SELECT count(*) FROM webhook_deliveries d JOIN notification_outbox o ON o.id = d.outbox_id WHERE o.member_id = $1`, erasedMember)

	// The database goes away for api2, which stops and spills what it holds.
	proxy.Partition()
	// A finishing report: replayed after the erasure, it must announce nothing either.
	api2.MustDo(t, http.StatusNoContent, http.MethodPut, api2.URL("/v1/playback/%d", films[0]), member,
		map[string]any{"position_ms": binarytest.MediaDurationMS - 1000})
	api2.Signal(t, syscall.SIGTERM)
	if code := api2.Wait(t, time.Minute); code != 0 {
		t.Fatalf("api2 exited %d; stderr:\n%s", code, api2.Stderr)
	}
	if spilled := spilledKeys(t, spill2); spilled[erasedMember] == 0 {
		t.Fatalf("api2's spill holds none of the member's positions (%v): the test would prove nothing", spilled)
	}

	// Every object in the store is the member's (the admin's media have no files).
	objects := func() []string {
		keys := filesUnder(t, storageDir)
		if srv != nil {
			keys = append(append(keys, srv.Keys(t, bucket)...), srv.Unfinished(t, bucket)...)
		}
		return keys
	}
	if len(objects()) == 0 {
		t.Fatal("the object store holds nothing of the member before the erasure: the test would prove nothing")
	}

	// The erasure, on api1, with a fresh token, while the upload still encodes.
	if n := countRows(t, pool, `SELECT count(*) FROM jobs WHERE subject_id = $1 AND kind LIKE 'encode%' AND status = 'PROCESSING'`, uploaded); n == 0 {
		t.Fatalf("no encode job of the upload runs at the erasure: the test would not erase during an encode")
	}
	api1.MustDo(t, http.StatusAccepted, http.MethodDelete, api1.URL("/v1/me"), binarytest.Token(t, erasedMember, false), nil)
	stream.WaitEnd(t)
	if status, body, _ := api1.Do(http.MethodPut, api1.URL("/v1/playback/%d", films[0]), member, map[string]any{"position_ms": 1}); status != http.StatusUnauthorized {
		t.Fatalf("the erased member's PUT on api1 = %d %s, want 401", status, body)
	}
	// The job's row goes once its completion has committed: its absence (with the member row's)
	// is the job done. A DEAD row would stay, and the wait give up.
	waitCount(t, pool, "the erasure job completed and its row deleted", `SELECT CASE WHEN count(*) = 0 THEN 1 ELSE 0 END FROM (
		SELECT 1 FROM jobs WHERE kind = 'member_erase' AND subject_id = $1 UNION ALL SELECT 1 FROM members WHERE id = $1) s`, erasedMember)
	failing.Store(false)

	// api2 comes back and replays its spill file; then every node stops (final flushes).
	proxy.Heal()
	env2["DATABASE_URL"], env2["PLAYHEAD_DATABASE_DIRECT_URL"] = direct, direct
	again := binarytest.Start(t, env2)
	if !strings.Contains(again.Stderr.String(), "spill file replayed and removed") {
		t.Fatalf("no replay at api2's start; stderr:\n%s", again.Stderr)
	}
	if status, body, _ := again.Do(http.MethodPut, again.URL("/v1/playback/%d", films[1]), member, map[string]any{"position_ms": 2}); status != http.StatusUnauthorized {
		t.Fatalf("the player's next PUT (api2 after its restart) = %d %s, want 401", status, body)
	}
	again.Stop(t)
	api1.Stop(t)
	waitCount(t, pool, "a rollup after the erasure", `SELECT count(*) FROM jobs WHERE kind = 'audience' AND status = 'COMPLETED'
		AND completed_at > (SELECT erased_at FROM member_erasures WHERE member_id = $1) + interval '1 second'`, erasedMember)
	waitCount(t, pool, "no job left to run", `SELECT CASE WHEN count(*) = 0 THEN 1 ELSE 0 END FROM jobs
		WHERE status IN ('PENDING', 'PROCESSING', 'WAITING') AND available_at <= statement_timestamp() AND kind <> 'audience' AND $1::bigint > 0`, erasedMember)
	worker.Stop(t)

	if found := columnsNaming(t, pool, erasedMember); len(found) > 0 {
		t.Errorf("the erased member is still named in: %s", strings.Join(found, "; "))
	}
	if n := countRows(t, pool, `SELECT count(*) FROM playback WHERE member_id = $1`, other); n != len(films) {
		t.Errorf("the other member has %d playback rows, want %d: the erasure took more than the member", n, len(films))
	}
	for _, dir := range []string{spill1, spill2} {
		if left := filesUnder(t, dir); len(left) > 0 {
			t.Errorf("spill directory still holds %v", left)
		}
	}
	if left := objects(); len(left) > 0 {
		t.Errorf("the object store still holds %d objects of the member (upload %d, the resumable upload): %v", len(left), uploaded, left)
	}
}

// waitCount waits until the query (one count, with args) answers at least 1.
func waitCount(t *testing.T, pool *pgxpool.Pool, what, sql string, args ...any) {
	t.Helper()
	giveUp := time.Now().Add(3 * time.Minute)
	for countRows(t, pool, sql, args...) < 1 {
		if time.Now().After(giveUp) {
			t.Fatalf("gave up waiting: %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func countRows(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// columnsNaming scans every column of every table of the public schema (read from the
// catalogue: a table added later is scanned without editing this) for values whose text
// holds member's id, and returns "table.column: n rows" for each, except the one place an
// erasure keeps it: the erasure record.
func columnsNaming(t *testing.T, pool *pgxpool.Pool, member int64) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT c.table_name, c.column_name FROM information_schema.columns c
		JOIN information_schema.tables tb ON tb.table_schema = c.table_schema AND tb.table_name = c.table_name
		WHERE c.table_schema = 'public' AND tb.table_type = 'BASE TABLE'
		ORDER BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	type column struct{ table, name string }
	columns, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (column, error) {
		var c column
		return c, r.Scan(&c.table, &c.name)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(columns) < 50 {
		t.Fatalf("the catalogue lists %d columns: not the schema", len(columns))
	}
	id := strconv.FormatInt(member, 10)
	var found []string
	for _, c := range columns {
		where := fmt.Sprintf(`strpos(%s::text, $1) > 0`, pgx.Identifier{c.name}.Sanitize())
		if c.table == "member_erasures" {
			continue // the record itself
		}
		n := countRows(t, pool, fmt.Sprintf(`SELECT count(*) FROM %s WHERE %s`, pgx.Identifier{c.table}.Sanitize(), where), id)
		if n > 0 {
			found = append(found, fmt.Sprintf("%s.%s: %d rows", c.table, c.name, n))
		}
	}
	return found
}

// spilledKeys reads every spill file in dir and counts its positions by member.
func spilledKeys(t *testing.T, dir string) map[int64]int {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "playback-*.spill"))
	out := map[int64]int{}
	for _, f := range files {
		entries, err := buffer.ReadSpillFile[playback.Key, playback.Position](f, playback.SpillCodec{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			out[e.Key.Member]++
		}
	}
	return out
}
