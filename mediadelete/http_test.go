package mediadelete_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/cache"
	"github.com/playhead/playhead/httpserver"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/mediadelete"
	"github.com/playhead/playhead/notify"
)

const secret = "a test secret of at least thirty-two bytes"

// node is one API node's media routes over a shared database: its own media cache, evicted
// by its own listener, as in the binary.
type node struct {
	addr  string
	cache *cache.Cache
}

func startNode(t *testing.T, dbURL string) *node {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store := media.NewStore(pool)
	// A found media is trusted for an hour: only the deletion's notification evicts it.
	c, err := cache.New(cache.Config{Load: store.LookupAccess, TTL: time.Hour, NegativeTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	listener := notify.NewListener(dbURL, slog.New(slog.DiscardHandler))
	connected := make(chan struct{})
	var once sync.Once
	listener.Handle(media.ChannelChanged, c.EvictPayload, func() { c.Clear(); once.Do(func() { close(connected) }) })
	if err := listener.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = listener.Stop(context.Background()) })
	<-connected
	verifier, err := auth.NewVerifier([]byte(secret), 0)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := media.NewSigner([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	app := httpserver.New(httpserver.Config{BodyLimit: 1 << 16})
	v1 := app.Group("/v1", httpserver.LimitBody(1<<16), verifier.Middleware())
	(&media.Handler{Store: store, Access: c, Links: &media.Links{Signer: signer, TTL: time.Minute}}).Register(v1)
	deletions := &mediadelete.Handler{Pool: pool}
	deletions.Register(v1)
	admin := v1.Group("/admin", auth.RequireAdmin)
	(&media.AdminHandler{Store: store}).Register(admin)
	deletions.RegisterAdmin(admin)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.Shutdown(); <-done })
	return &node{addr: "http://" + ln.Addr().String(), cache: c}
}

func token(t *testing.T, member int64, admin bool) string {
	t.Helper()
	tok, err := auth.Mint([]byte(secret), member, admin, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// call sends method path with body (raw bytes, JSON unless contentType says otherwise) and
// returns the status and the answer.
func (n *node) call(t *testing.T, tok, method, path, contentType string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, n.addr+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

// errorOf is the {"error": …} of an answer, failing the test when it is not one.
func errorOf(t *testing.T, body []byte) string {
	t.Helper()
	var e struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error == "" {
		t.Fatalf("answer %s is not a JSON error", body)
	}
	return e.Error
}

// TestOwnerRoutes_PatchAndDeleteTheirOwnMediaOnly: an owner renames their media and changes
// its visibility, and deletes it; another member gets exactly the 404 of a missing media for
// both; bad bodies are 422 (a field the owner may not change, a bad value) or 400 (not JSON);
// an admin deletes any media. A deleted media vanishes at once from the owner's list and GET on
// another node, whose media cache the deletion's notification evicts; a second deletion and a
// PATCH of the deleted media are 404.
func TestOwnerRoutes_PatchAndDeleteTheirOwnMediaOnly(t *testing.T) {
	dbURL := pgtest.URL(t)
	a, b := startNode(t, dbURL), startNode(t, dbURL)
	const ownerID, otherID = 5, 6
	owner, other, admin := token(t, ownerID, false), token(t, otherID, false), token(t, 1, true)
	create := func(title string) int64 {
		status, out := a.call(t, admin, http.MethodPost, "/v1/admin/media", "application/json",
			fmt.Appendf(nil, `{"title": %q, "owner_id": %d, "duration_ms": 60000}`, title, ownerID))
		var m media.Media
		if status != http.StatusCreated || json.Unmarshal(out, &m) != nil {
			t.Fatalf("create: %d %s", status, out)
		}
		return m.ID
	}
	id, second := create("first"), create("second")
	const missing = 99999
	path := func(id int64) string { return fmt.Sprintf("/v1/media/%d", id) }
	adminPath := func(id int64) string { return fmt.Sprintf("/v1/admin/media/%d", id) }

	// Another member's media answers as a missing one does, with the same words.
	for _, method := range []string{http.MethodPatch, http.MethodDelete} {
		var body []byte
		if method == http.MethodPatch {
			body = []byte(`{"title": "mine now"}`)
		}
		status, out := a.call(t, other, method, path(id), "application/json", body)
		mStatus, mOut := a.call(t, other, method, path(missing), "application/json", body)
		if status != http.StatusNotFound || mStatus != http.StatusNotFound ||
			errorOf(t, out) != fmt.Sprintf("media %d not found", id) || errorOf(t, mOut) != fmt.Sprintf("media %d not found", missing) {
			t.Errorf("%s of another member's media: %d %s; of a missing one: %d %s; want the same 404", method, status, out, mStatus, mOut)
		}
	}
	for _, c := range []struct {
		name, contentType, body string
		want                    int
	}{
		{"status is the admin's", "application/json", `{"status": "READY"}`, http.StatusUnprocessableEntity},
		{"duration_ms is the admin's", "application/json", `{"title": "x", "duration_ms": 1}`, http.StatusUnprocessableEntity},
		{"unknown field", "application/json", `{"owner_id": 6}`, http.StatusUnprocessableEntity},
		{"nothing to change", "application/json", `{}`, http.StatusUnprocessableEntity},
		{"empty title", "application/json", `{"title": "  "}`, http.StatusUnprocessableEntity},
		{"control character", "application/json", `{"title": "a\u0000b"}`, http.StatusUnprocessableEntity},
		{"bad visibility", "application/json", `{"visibility": "FRIENDS"}`, http.StatusUnprocessableEntity},
		{"title not a string", "application/json", `{"title": 7}`, http.StatusUnprocessableEntity},
		{"not JSON", "application/json", `{"title": `, http.StatusBadRequest},
		{"trailing data", "application/json", `{"title": "x"} {}`, http.StatusBadRequest},
		{"not an object", "application/json", `["title"]`, http.StatusUnprocessableEntity},
		{"form body", "application/x-www-form-urlencoded", `title=x`, http.StatusUnsupportedMediaType},
	} {
		status, out := a.call(t, owner, http.MethodPatch, path(id), c.contentType, []byte(c.body))
		if status != c.want {
			t.Errorf("PATCH %s (%s): %d %s, want %d", c.body, c.name, status, out, c.want)
			continue
		}
		if e := errorOf(t, out); strings.Contains(e, "json.") || strings.Contains(e, "map[") {
			t.Errorf("PATCH %s (%s): the error %q names Go types", c.body, c.name, e)
		}
	}
	status, out := a.call(t, owner, http.MethodPatch, path(id), "application/json", []byte(`{"title": " renamed ", "visibility": "PRIVATE"}`))
	var m media.Media
	if status != http.StatusOK || json.Unmarshal(out, &m) != nil || m.Title != "renamed" || m.Visibility != media.VisibilityPrivate || m.Status != media.StatusReady {
		t.Fatalf("the owner's PATCH: %d %s, want the media renamed and PRIVATE", status, out)
	}
	// Node B has the media in its cache before the deletion.
	if status, out := b.call(t, owner, http.MethodGet, path(id), "", nil); status != http.StatusOK {
		t.Fatalf("GET on node B before the deletion: %d %s", status, out)
	}
	if _, found, err := b.cache.Access(context.Background(), id); err != nil || !found {
		t.Fatalf("node B's cache before the deletion: found %v, %v", found, err)
	}

	status, out = a.call(t, owner, http.MethodDelete, path(id), "", nil)
	if status != http.StatusAccepted || string(out) != fmt.Sprintf(`{"id":%d,"status":"DELETED"}`, id) {
		t.Fatalf("the owner's DELETE: %d %s, want 202 with the id and DELETED", status, out)
	}
	// Gone at once from node B's reads, whatever its cache holds.
	if status, out := b.call(t, owner, http.MethodGet, "/v1/media?owner=me", "", nil); status != http.StatusOK ||
		bytes.Contains(out, fmt.Appendf(nil, `"id":%d,`, id)) || !bytes.Contains(out, fmt.Appendf(nil, `"id":%d,`, second)) {
		t.Errorf("the owner's list on node B right after the deletion: %d %s, want only media %d", status, out, second)
	}
	if status, out := b.call(t, owner, http.MethodGet, path(id), "", nil); status != http.StatusNotFound {
		t.Errorf("GET on node B right after the deletion: %d %s, want 404", status, out)
	}
	// Node B's cache forgets the media when the deletion's notification arrives: with an hour
	// of TTL nothing else would evict it.
	waitUntil(t, "node B's cache to evict the deleted media", func() bool {
		_, found, err := b.cache.Access(context.Background(), id)
		return err == nil && !found
	})
	for _, method := range []string{http.MethodDelete, http.MethodPatch} {
		var body []byte
		if method == http.MethodPatch {
			body = []byte(`{"title": "again"}`)
		}
		if status, out := a.call(t, owner, method, path(id), "application/json", body); status != http.StatusNotFound {
			t.Errorf("%s of the deleted media: %d %s, want 404", method, status, out)
		}
		if status, out := a.call(t, admin, method, adminPath(id), "application/json", body); status != http.StatusNotFound || errorOf(t, out) != fmt.Sprintf("media %d not found", id) {
			t.Errorf("admin %s of the deleted media: %d %s, want 404", method, status, out)
		}
	}
	// The admin route deletes anyone's media; a member is refused it.
	if status, out := a.call(t, other, http.MethodDelete, adminPath(second), "", nil); status != http.StatusForbidden {
		t.Errorf("a member's DELETE on the admin route: %d %s, want 403", status, out)
	}
	if status, out := a.call(t, admin, http.MethodDelete, adminPath(second), "", nil); status != http.StatusAccepted {
		t.Errorf("the admin's DELETE: %d %s, want 202", status, out)
	}
	if status, out := a.call(t, owner, http.MethodGet, "/v1/media?owner=me", "", nil); status != http.StatusOK || string(out) != `{"items":[]}` {
		t.Errorf("the owner's list after both deletions: %d %s, want empty", status, out)
	}
}
