package media_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/cache"
	"github.com/playhead/playhead/httpserver"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/notify"
)

// queryCounter counts every statement a pool sends to PostgreSQL (pgx's tracer sees each one,
// transactions' BEGIN and COMMIT included).
type queryCounter struct{ n atomic.Int64 }

func (q *queryCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	q.n.Add(1)
	return ctx
}

func (q *queryCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// mediaAPI is the member and admin media routes over a real database, with every statement
// counted.
type mediaAPI struct {
	addr    string
	pool    *pgxpool.Pool
	store   *media.Store
	links   *media.Links
	queries *queryCounter
}

func setupMediaAPI(t *testing.T) *mediaAPI {
	t.Helper()
	cfg := must(pgxpool.ParseConfig(pgtest.URL(t)))(t)
	counter := &queryCounter{}
	cfg.ConnConfig.Tracer = counter
	pool := must(pgxpool.NewWithConfig(context.Background(), cfg))(t)
	t.Cleanup(pool.Close)
	store := media.NewStore(pool)
	c := startCache(t, cache.Config{Load: store.LookupAccess, NegativeTTL: time.Hour})
	// Each node's listener evicts changed ids, as in the binary.
	listener := notify.NewListener(cfg.ConnString(), slog.New(slog.DiscardHandler))
	connected := make(chan struct{})
	var once sync.Once
	listener.Handle(media.ChannelChanged, c.EvictPayload, func() { c.Clear(); once.Do(func() { close(connected) }) })
	if err := listener.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = listener.Stop(context.Background()) })
	select {
	case <-connected:
	case <-time.After(30 * time.Second):
		t.Fatal("the notification listener did not connect")
	}
	verifier := must(auth.NewVerifier([]byte(secret), 0))(t)
	app := httpserver.New(httpserver.Config{BodyLimit: 1 << 16})
	api := app.Group("/v1", httpserver.LimitBody(1<<16), verifier.Middleware())
	links := &media.Links{Signer: must(media.NewSigner([]byte(secret)))(t), TTL: time.Minute}
	(&media.Handler{Store: store, Access: c, Links: links}).Register(api)
	(&media.AdminHandler{Store: store}).Register(api.Group("/admin", auth.RequireAdmin))
	return &mediaAPI{addr: serveApp(t, app), pool: pool, store: store, links: links, queries: counter}
}

func (a *mediaAPI) get(t *testing.T, token string, id int64) int {
	t.Helper()
	status, _, _ := rawGet(t, a.addr, fmt.Sprintf("/v1/media/%d", id), bearer(token))
	return status
}

// TestMediaGet_UnknownAndInvisibleIDsStayOffTheDatabase: GET /v1/media/{id} for ids that do
// not exist (or that the member may not see) must not reach the database on every request, or
// anyone could load it by asking for random ids. Through the media cache, each id costs at
// most one query per negative-cache window.
func TestMediaGet_UnknownAndInvisibleIDsStayOffTheDatabase(t *testing.T) {
	a := setupMediaAPI(t)
	private := must(a.store.Create(context.Background(), media.Media{OwnerID: 2, Title: "theirs",
		Status: media.StatusReady, Visibility: media.VisibilityPrivate}))(t)
	token := must(auth.Mint([]byte(secret), 1, false, time.Hour))(t)

	const distinct, rounds = 10, 50
	before := a.queries.n.Load()
	for range rounds {
		for i := range distinct {
			if status := a.get(t, token, 1_000_000+int64(i)); status != http.StatusNotFound {
				t.Fatalf("GET an unknown id: status %d, want 404", status)
			}
		}
		if status := a.get(t, token, private.ID); status != http.StatusNotFound {
			t.Fatalf("GET another member's private media: status %d, want 404", status)
		}
	}
	queries := a.queries.n.Load() - before
	t.Logf("%d requests for %d unknown ids and one invisible id: %d statements sent to PostgreSQL",
		rounds*(distinct+1), distinct, queries)
	// One per id, and one more: the private media's own creation notice may arrive after its
	// first load and evict it.
	if queries > distinct+2 {
		t.Errorf("%d statements for %d requests over %d ids, want at most one per id (+1)", queries, rounds*(distinct+1), distinct+1)
	}

	// The owner still sees it, and a new media is found at once, though its id was asked for
	// (and cached as missing) before it existed: creation evicts the cached miss.
	owner := must(auth.Mint([]byte(secret), 2, false, time.Hour))(t)
	if status := a.get(t, owner, private.ID); status != http.StatusOK {
		t.Errorf("GET own private media: status %d, want 200", status)
	}
	next := private.ID + 1
	if status := a.get(t, owner, next); status != http.StatusNotFound {
		t.Fatalf("GET a future id: status %d, want 404", status)
	}
	created := must(a.store.Create(context.Background(), media.Media{OwnerID: 2, Title: "new",
		Status: media.StatusProcessing, Visibility: media.VisibilityPrivate}))(t)
	if created.ID != next {
		t.Fatalf("created media %d, expected the next id %d", created.ID, next)
	}
	waitFor(t, fmt.Sprintf("GET /v1/media/%d to find the new media", next), func() bool {
		return a.get(t, owner, next) == http.StatusOK
	})
}

// waitFor polls cond until it holds, failing after a generous limit.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAdminMedia_RefusesTextTheDatabaseCannotStore: a title with a NUL byte is refused 422
// before it reaches PostgreSQL, which would refuse it (SQLSTATE 22021) and leave the admin
// with a 500.
func TestAdminMedia_RefusesTextTheDatabaseCannotStore(t *testing.T) {
	a := setupMediaAPI(t)
	admin := must(auth.Mint([]byte(secret), 1, true, time.Hour))(t)
	m := must(a.store.Create(context.Background(), media.Media{OwnerID: 1, Title: "ok",
		Status: media.StatusReady, Visibility: media.VisibilityPublic}))(t)
	for _, title := range []string{`a\u0000b`, `\u0000`, `bell\u0007`, `esc\u001b[31m`, `c1\u0085x`} {
		for _, req := range []struct{ method, path string }{
			{http.MethodPost, "/v1/admin/media"},
			{http.MethodPatch, fmt.Sprintf("/v1/admin/media/%d", m.ID)},
		} {
			status, body := rawSend(t, a.addr, req.method, req.path, admin, `{"title": "`+title+`"}`)
			if status != http.StatusUnprocessableEntity || !strings.Contains(body, "title") {
				t.Errorf("%s %s with title %s: %d %s, want 422 naming the title", req.method, req.path, title, status, body)
			}
		}
	}
	got := must(a.store.Get(context.Background(), m.ID))(t)
	if got.Title != "ok" {
		t.Errorf("title is %q after refused patches, want %q", got.Title, "ok")
	}
}
