package playback_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/buffer"
	"github.com/playhead/playhead/cache"
	"github.com/playhead/playhead/httpserver"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/playback"
	"github.com/playhead/playhead/quality"
	"github.com/playhead/playhead/ratelimit"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var secret = []byte("test-secret-test-secret-test-secret!")

// bundle is one test's server: a real database, the playback and admin routes on a loopback
// port, and what the test needs to look behind them.
type bundle struct {
	pool    *pgxpool.Pool
	dbURL   string
	store   *playback.Store
	media   *media.Store
	cache   *cache.Cache
	buf     *buffer.Buffer[playback.Key, playback.Position]
	reg     *prometheus.Registry
	baseURL string
	admin   string // an admin token (member 1)
	links   *media.Links
	// quality adds up the reports' quality; the tests write it (Write) when they need to.
	quality *quality.Aggregator
}

type options struct {
	capacity, flushBatch int
	limit                *ratelimit.Limiter
	flush                buffer.FlushFunc[playback.Key, playback.Position]
	// completion is the store's rule; completionOnly when its Ratio is 0.
	completion media.Completion
	// sync writes each report in its request (playback.ModeSync) instead of through the buffer.
	sync bool
}

func setup(t *testing.T, opts options) *bundle {
	t.Helper()
	pool, dbURL := pgtest.Pool(t)
	completion := opts.completion
	if completion.Ratio == 0 {
		completion = completionOnly
	}
	b := &bundle{pool: pool, dbURL: dbURL, store: playback.NewStore(pool, completion), media: media.NewStore(pool), reg: prometheus.NewRegistry()}
	var err error
	b.cache, err = cache.New(cache.Config{Load: b.media.LookupAccess, Registerer: b.reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.cache.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.cache.Stop(context.Background()) })
	flush := opts.flush
	if flush == nil {
		flush = b.store.Flush
	}
	b.buf, err = buffer.New(buffer.Config[playback.Key, playback.Position]{
		Capacity: opts.capacity, FlushBatch: opts.flushBatch, FlushInterval: time.Hour, Flush: flush,
		Compare: playback.CompareKeys, Newer: playback.Newer, Metrics: buffer.NewMetrics(b.reg, "playback"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.buf.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.buf.Stop(context.Background()) })

	verifier, err := auth.NewVerifier(secret, 0)
	if err != nil {
		t.Fatal(err)
	}
	app := httpserver.New(httpserver.Config{BodyLimit: 64 << 10, Metrics: httpserver.NewMetrics(b.reg)})
	api := app.Group("/v1", verifier.Middleware())
	signer, err := media.NewSigner(secret)
	if err != nil {
		t.Fatal(err)
	}
	b.links = &media.Links{Signer: signer, TTL: time.Hour}
	forgetsUnsettled := prometheus.NewCounter(prometheus.CounterOpts{Name: "forgets_unsettled_total"})
	b.reg.MustRegister(forgetsUnsettled)
	if b.quality, err = quality.New(quality.Config{Pool: pool}); err != nil {
		t.Fatal(err)
	}
	mode := playback.ModeWriteBehind
	if opts.sync {
		mode = playback.ModeSync
	}
	(&playback.Handler{Store: b.store, Access: b.cache, Buffer: b.buf, Mode: mode, Limit: opts.limit, Links: b.links,
		ForgetsUnsettled: forgetsUnsettled, Quality: b.quality}).Register(api)
	(&media.AdminHandler{Store: b.media}).Register(api.Group("/admin", auth.RequireAdmin))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.Shutdown() })
	b.baseURL = "http://" + ln.Addr().String()
	b.admin = token(t, 1, true)
	return b
}

func token(t *testing.T, member int64, admin bool) string {
	t.Helper()
	tok, err := auth.Mint(secret, member, admin, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// do sends a request and returns the status and body.
func (b *bundle) do(t *testing.T, method, path, tok string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		rd = bytes.NewBufferString(v)
	case []byte:
		rd = bytes.NewReader(v)
	default:
		raw, _ := json.Marshal(v)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, b.baseURL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// createMedia registers a media item through the admin API and returns its id.
func (b *bundle) createMedia(t *testing.T, req map[string]any) int64 {
	t.Helper()
	status, body := b.do(t, http.MethodPost, "/v1/admin/media", b.admin, req)
	if status != http.StatusCreated {
		t.Fatalf("create media: %d %s", status, body)
	}
	var m media.Media
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	return m.ID
}

// flushNow drains the buffer by closing it; tests call it once, at the point they check the
// database.
func (b *bundle) flushNow(t *testing.T) {
	t.Helper()
	if err := b.buf.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func (b *bundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// counter reads the value of the counter name in b's registry (0 when it is not there).
func (b *bundle) counter(t *testing.T, name string) float64 {
	t.Helper()
	families, err := b.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

// completionOnly is the default completion point without the resume minimums: the tests here
// script short media and positions of a few seconds, and check what the list and progress
// do with rows in progress; the resume thresholds have their own tests
// (audience/resume_rule_test.go, playback/progress_test.go).
var completionOnly = media.Completion{Ratio: media.DefaultCompletion.Ratio, Tail: media.DefaultCompletion.Tail}
