package collection_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/buffer"
	"github.com/playhead/playhead/cache"
	"github.com/playhead/playhead/collection"
	"github.com/playhead/playhead/httpserver"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/playback"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var secret = []byte("test-secret-test-secret-test-secret!")

// lessonMS is every test lesson's duration: 10 minutes.
const lessonMS = 600_000

// bundle is one test's server: a real database with the playback and collection routes on a
// loopback port, wired as the binary wires them. Positions reach the database through the
// playback flush function (what the buffer calls), with event times the test chooses.
type bundle struct {
	pool    *pgxpool.Pool
	store   *playback.Store
	baseURL string
	clock   time.Time // event time of the last flushed position
}

func setup(t *testing.T) *bundle {
	t.Helper()
	pool, _ := pgtest.Pool(t)
	b := &bundle{pool: pool, store: playback.NewStore(pool, completionOnly)}
	access, err := cache.New(cache.Config{Load: media.NewStore(pool).LookupAccess})
	if err != nil {
		t.Fatal(err)
	}
	if err := access.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = access.Stop(context.Background()) })
	verifier, err := auth.NewVerifier(secret, 0)
	if err != nil {
		t.Fatal(err)
	}
	app := httpserver.New(httpserver.Config{BodyLimit: 64 << 10})
	api := app.Group("/v1", verifier.Middleware())
	signer, err := media.NewSigner(secret)
	if err != nil {
		t.Fatal(err)
	}
	links := &media.Links{Signer: signer, TTL: time.Minute}
	(&playback.Handler{Store: b.store, Access: access, Mode: playback.ModeSync, Links: links}).Register(api)
	(&collection.Handler{Store: collection.NewStore(pool), Links: links}).Register(api)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.Shutdown(); <-done })
	b.baseURL = "http://" + ln.Addr().String()
	return b
}

// course imports a collection of n READY lessons of lessonMS in chapter 1, orders 1…n, and
// returns their media ids in order.
func (b *bundle) course(t *testing.T, name string, n int) []int64 {
	t.Helper()
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = b.place(t, name, 1, i+1, fmt.Sprintf("%s lesson %d", name, i+1))
	}
	return ids
}

// place imports one READY public media at (collection, chapter, order) and returns its id.
func (b *bundle) place(t *testing.T, name string, chapter, order int, title string) int64 {
	t.Helper()
	var id int64
	if _, err := b.pool.Exec(context.Background(), `INSERT INTO members (id) VALUES (1) ON CONFLICT DO NOTHING`); err != nil {
		t.Fatal(err)
	}
	err := b.pool.QueryRow(context.Background(), `
		WITH imp AS (INSERT INTO imports (created_by, filename, total_rows, accepted, rejected)
		             VALUES (1, 'sheet.csv', 1, 1, 0) RETURNING id),
		     m AS (INSERT INTO media (owner_id, title, status, visibility, duration_ms, hls_key)
		           VALUES (1, $4, 'READY', 'PUBLIC', $5, 'hls/x/master.m3u8') RETURNING id)
		INSERT INTO import_rows (import_id, row_number, collection, chapter, position, video_url, media_id)
		SELECT imp.id, 2, $1, $2, $3, 'https://example.com/v.mp4', m.id FROM imp, m
		RETURNING media_id`, name, chapter, order, title, lessonMS).Scan(&id)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// placeAgain places an existing media at (collection, chapter, order) too.
func (b *bundle) placeAgain(t *testing.T, name string, chapter, order int, mediaID int64) {
	t.Helper()
	if _, err := b.pool.Exec(context.Background(), `
		INSERT INTO import_rows (import_id, row_number, collection, chapter, position, video_url, media_id)
		SELECT import_id, row_number + 1, $1, $2, $3, video_url, media_id FROM import_rows WHERE media_id = $4 LIMIT 1`,
		name, chapter, order, mediaID); err != nil {
		t.Fatal(err)
	}
}

// watch flushes member's position in media at fraction of a lesson through the flush
// statement, received now: after every earlier flush of this bundle and every earlier request.
func (b *bundle) watch(t *testing.T, member, mediaID int64, fraction float64) {
	t.Helper()
	b.clock = b.clock.Add(time.Microsecond)
	if now := time.Now().UTC().Truncate(time.Microsecond); now.After(b.clock) {
		b.clock = now
	}
	pos := playback.Position{PositionMS: int32(fraction * lessonMS), EventTime: b.clock}
	if err := b.store.Flush(context.Background(), []buffer.Entry[playback.Key, playback.Position]{
		{Key: playback.Key{Member: member, Media: mediaID}, Value: pos}}); err != nil {
		t.Fatal(err)
	}
}

// get sends GET path as member and decodes the JSON answer into out.
func (b *bundle) get(t *testing.T, member int64, path string, out any) {
	t.Helper()
	status, body := b.send(t, member, http.MethodGet, path)
	if status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, status, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		t.Fatalf("GET %s: %v in %s", path, err, body)
	}
}

func (b *bundle) send(t *testing.T, member int64, method, path string) (int, []byte) {
	t.Helper()
	tok, err := auth.Mint(secret, member, false, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(method, b.baseURL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

type listItem struct {
	MediaID    int64      `json:"media_id"`
	PositionMS int32      `json:"position_ms"`
	WatchedAt  *time.Time `json:"watched_at"`
	Status     string     `json:"status"`
	Thumbnail  string     `json:"thumbnail_url"`
	UpNext     *struct {
		Collection   string `json:"collection"`
		AfterMediaID int64  `json:"after_media_id"`
	} `json:"up_next"`
}

// continueWatching returns member's whole continue-watching list, page by page of size.
func (b *bundle) continueWatching(t *testing.T, member int64, size int) []listItem {
	t.Helper()
	var all []listItem
	cursor := ""
	for range 100 {
		var page struct {
			Items      []listItem `json:"items"`
			NextCursor string     `json:"next_cursor"`
		}
		b.get(t, member, fmt.Sprintf("/v1/playback?limit=%d&cursor=%s", size, cursor), &page)
		all = append(all, page.Items...)
		if page.NextCursor == "" {
			return all
		}
		cursor = page.NextCursor
	}
	t.Fatal("the continue-watching list did not end after 100 pages")
	return nil
}

func (b *bundle) progress(t *testing.T, member int64, name string) collection.Progress {
	t.Helper()
	var p collection.Progress
	b.get(t, member, "/v1/collections/"+url.PathEscape(name), &p)
	return p
}

// completionOnly is the default completion point without the resume minimums: the tests here
// script short media and positions of a few seconds, and check what the list and progress
// do with rows in progress; the resume thresholds have their own tests
// (audience/resume_rule_test.go, playback/progress_test.go).
var completionOnly = media.Completion{Ratio: media.DefaultCompletion.Ratio, Tail: media.DefaultCompletion.Tail}
