package httpserver_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/httpserver"
	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// send runs one request through app and returns the status, headers and body.
func send(t *testing.T, app *fiber.App, method, target string) (int, http.Header, string) {
	t.Helper()
	resp, err := app.Test(httptest.NewRequest(method, target, nil), -1)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(body)
}

// TestReadyz_PublicAnswerNamesNothing: when the database is down the public /readyz says only
// "not ready"; the database's error (user, database, host:port), which would tell anyone where
// the database is, goes to the log and to the metrics port's /readyz.
func TestReadyz_PublicAnswerNamesNothing(t *testing.T) {
	const detail = "failed to connect to `user=playhead database=members_prod`: 10.1.2.3:5432: connection refused"
	var log binarytest.Output
	h := httpserver.NewHealth(func(context.Context) error { return errors.New(detail) },
		slog.New(slog.NewJSONHandler(&log, nil)))
	h.SetStarted()
	app := httpserver.New(httpserver.Config{})
	h.Register(app)

	status, _, body := send(t, app, http.MethodGet, "/readyz")
	if status != http.StatusServiceUnavailable || strings.TrimSpace(body) != `{"error":"not ready"}` {
		t.Errorf("public /readyz: %d %s, want 503 {\"error\":\"not ready\"}", status, body)
	}
	for _, leak := range []string{"members_prod", "10.1.2.3", "user="} {
		if strings.Contains(body, leak) {
			t.Errorf("public /readyz names %q: %s", leak, body)
		}
	}
	if !strings.Contains(log.String(), "members_prod") {
		t.Errorf("the log does not carry the reason: %q", log.String())
	}
	rec := httptest.NewRecorder()
	h.MetricsHandler(nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "members_prod") {
		t.Errorf("metrics /readyz: %d %s, want 503 with the reason", rec.Code, rec.Body)
	}
}

// TestErrorHandler_LogIsSampledAndTruncated: a thousand failing requests with 3 KiB paths
// must not log a thousand lines with the whole path, or anyone can flood the log. One kind of
// failure is logged once per interval with the number held back, and the path is truncated.
func TestErrorHandler_LogIsSampledAndTruncated(t *testing.T) {
	var log binarytest.Output
	app := httpserver.New(httpserver.Config{Logger: slog.New(slog.NewJSONHandler(&log, nil))})
	// The error's text can carry the client's input too (a value quoted back), so it is cut
	// like the path.
	app.Get("/broken/*", func(c *fiber.Ctx) error { return errors.New("the disk is on fire under " + c.Path()) })
	long := "/broken/" + strings.Repeat("A", 3<<10)
	const requests = 1000
	start := time.Now()
	for range requests {
		if status, _, _ := send(t, app, http.MethodGet, long); status != http.StatusInternalServerError {
			t.Fatalf("status %d, want 500", status)
		}
	}
	elapsed := time.Since(start)
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	// One line per kind per 10 s: the first, plus one for each 10 s the loop took.
	if most := 1 + int(elapsed/(10*time.Second)); len(lines) > most {
		t.Errorf("%d requests in %s logged %d lines, want at most %d", requests, elapsed, len(lines), most)
	}
	for _, l := range lines {
		if len(l) > 1024 {
			t.Errorf("a log line of %d bytes: the path or the error is not truncated: %.200s…", len(l), l)
		}
		var rec struct {
			Route, Path string
			Status      int
		}
		if err := json.Unmarshal([]byte(l), &rec); err != nil || rec.Route != "/broken/*" || rec.Status != 500 ||
			!strings.HasPrefix(rec.Path, "/broken/AAAA") {
			t.Errorf("log line %s (%v): want route, a truncated path and the status", l, err)
		}
	}
	t.Logf("%d failing requests with %d-byte paths in %s: %d log lines, %d bytes", requests, len(long), elapsed, len(lines), len(log.String()))
}

func TestSampler_CountsWhatItHolds(t *testing.T) {
	s := httpserver.NewSampler(time.Hour)
	if ok, n := s.Allow("a"); !ok || n != 0 {
		t.Fatalf("first event: %v %d, want logged with 0 held back", ok, n)
	}
	for range 5 {
		if ok, _ := s.Allow("a"); ok {
			t.Fatal("a repeat within the interval was let through")
		}
	}
	if ok, _ := s.Allow("b"); !ok {
		t.Fatal("the first event of another kind was held back")
	}
	zero := httpserver.NewSampler(0)
	zero.Allow("a")
	if ok, n := zero.Allow("a"); !ok || n != 0 {
		t.Fatalf("interval 0: %v %d, want every event logged", ok, n)
	}
}

// TestNoSniff: every answer of the public app — JSON, an error, an unknown route — tells the
// browser not to sniff its content type.
func TestNoSniff(t *testing.T) {
	app := httpserver.New(httpserver.Config{})
	app.Get("/ok", func(c *fiber.Ctx) error { return c.JSON(fiber.Map{"ok": true}) })
	app.Get("/gone", func(*fiber.Ctx) error { return apperr.Errorf(apperr.NotFound, "gone") })
	for _, target := range []string{"/ok", "/gone", "/no/such/route"} {
		if _, h, _ := send(t, app, http.MethodGet, target); h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: X-Content-Type-Options %q, want nosniff", target, h.Get("X-Content-Type-Options"))
		}
	}

	// A request fasthttp cannot parse never reaches the middleware: its answer comes from the
	// error handler alone, over a real connection.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.Shutdown() })
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /ok HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("unparsable request: %d, X-Content-Type-Options %q; want 400 with nosniff", resp.StatusCode, resp.Header.Get("X-Content-Type-Options"))
	}
}

// TestErrorMap_DatabaseInputErrorsAreClientErrors: values PostgreSQL refuses — a NUL byte in
// text, a number out of range, a duplicate key — answer 4xx through the one error map even
// when no check at the edge caught them, while the database's other errors stay 500.
func TestErrorMap_DatabaseInputErrorsAreClientErrors(t *testing.T) {
	pool, _ := pgtest.Pool(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE t (id int PRIMARY KEY, name text NOT NULL, code varchar(3), ref int REFERENCES t (id), CHECK (id > 0))`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO t (id, name) VALUES (1, 'one')`); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	app := httpserver.New(httpserver.Config{Logger: slog.New(slog.NewJSONHandler(&log, nil))})
	exec := func(sql string, args ...any) fiber.Handler {
		return func(c *fiber.Ctx) error {
			_, err := pool.Exec(c.UserContext(), sql, args...)
			if err == nil {
				return c.SendStatus(http.StatusNoContent)
			}
			return errors.Join(errors.New("store thing"), err) // wrapped, as stores do
		}
	}
	for _, tc := range []struct {
		name, sql string
		args      []any
		want      int
	}{
		{"22021 NUL in text", `INSERT INTO t (id, name) VALUES (2, $1)`, []any{"a\x00b"}, 422},
		{"22021 invalid UTF-8", `INSERT INTO t (id, name) VALUES (2, $1)`, []any{"a\xffb"}, 422},
		{"22P02 bad syntax", `SELECT $1::text::bigint`, []any{"twelve"}, 422},
		{"22003 out of range", `SELECT $1::bigint::int`, []any{int64(1) << 40}, 422},
		{"22001 too long", `INSERT INTO t (id, name, code) VALUES (5, 'x', $1)`, []any{"abcdef"}, 422},
		{"23505 duplicate key", `INSERT INTO t (id, name) VALUES (1, 'again')`, nil, 409},
		{"23503 foreign key", `INSERT INTO t (id, name, ref) VALUES (3, 'x', 99)`, nil, 422},
		{"23502 not null", `INSERT INTO t (id) VALUES (4)`, nil, 422},
		{"23514 check", `INSERT INTO t (id, name) VALUES (-1, 'x')`, nil, 422},
		{"42P01 our own bug", `SELECT * FROM no_such_table`, nil, 500},
	} {
		route := "/" + strings.Fields(tc.name)[0]
		app.Get(route, exec(tc.sql, tc.args...))
		status, _, body := send(t, app, http.MethodGet, route)
		if status != tc.want {
			t.Errorf("%s: status %d %s, want %d", tc.name, status, body, tc.want)
		}
		if tc.want < 500 && !strings.Contains(body, "SQLSTATE "+route[1:]) {
			t.Errorf("%s: body %s does not name the SQLSTATE", tc.name, body)
		}
	}
	if !strings.Contains(log.String(), "22021") {
		t.Errorf("an input error caught only by the database is not logged: %q", log.String())
	}
}

// TestReadyz_NotReadyUntilStarted: a node whose database answers is not ready until every
// service has started (the playback buffer replays spilled positions in its start), and not
// ready again once it drains.
func TestReadyz_NotReadyUntilStarted(t *testing.T) {
	h := httpserver.NewHealth(func(context.Context) error { return nil }, slog.New(slog.DiscardHandler))
	app := httpserver.New(httpserver.Config{})
	h.Register(app)
	for _, step := range []struct {
		name string
		do   func()
		want int
	}{
		{"before start", func() {}, http.StatusServiceUnavailable},
		{"started", h.SetStarted, http.StatusOK},
		{"draining", h.SetDraining, http.StatusServiceUnavailable},
	} {
		step.do()
		if status, _, body := send(t, app, http.MethodGet, "/readyz"); status != step.want {
			t.Errorf("%s: /readyz %d %s, want %d", step.name, status, body, step.want)
		}
	}
}

// A database that is away — refusing connections, killing ours, not answering before our own
// deadline — answers 503 with Retry-After through the one error map (rather than 500 from
// every endpoint while PostgreSQL is stopped), while our own SQL bugs stay 500.
func TestErrorMap_DatabaseAwayIs503WithRetryAfter(t *testing.T) {
	pool, dbURL := pgtest.Pool(t)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedAddr := closed.Addr().String()
	closed.Close() // nothing listens there any more: connections are refused
	refused, err := pgxpool.New(context.Background(), strings.Replace(dbURL, pool.Config().ConnConfig.Host+":"+fmt.Sprint(pool.Config().ConnConfig.Port), refusedAddr, 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(refused.Close)
	app := httpserver.New(httpserver.Config{})
	query := func(p *pgxpool.Pool, timeout time.Duration, sql string) fiber.Handler {
		return func(c *fiber.Ctx) error {
			ctx, cancel := context.WithTimeout(c.UserContext(), timeout)
			defer cancel()
			_, err := p.Exec(ctx, sql)
			if err == nil {
				return c.SendStatus(http.StatusNoContent)
			}
			return fmt.Errorf("store thing: %w", err)
		}
	}
	for _, tc := range []struct {
		name, route string
		handler     fiber.Handler
		want        int
	}{
		{"connection refused", "/refused", query(refused, time.Minute, `SELECT 1`), 503},
		{"57P01 connection terminated", "/terminated", query(pool, time.Minute, `SELECT pg_terminate_backend(pg_backend_pid())`), 503},
		{"our own deadline", "/deadline", query(pool, 50*time.Millisecond, `SELECT pg_sleep(30)`), 503},
		{"42P01 our own bug", "/bug", query(pool, time.Minute, `SELECT * FROM no_such_table`), 500},
	} {
		app.Get(tc.route, tc.handler)
		status, header, body := send(t, app, http.MethodGet, tc.route)
		if status != tc.want || !strings.HasPrefix(body, `{"error":`) {
			t.Errorf("%s: status %d %s, want %d with a JSON error", tc.name, status, body, tc.want)
		}
		if got := header.Get("Retry-After"); (tc.want == 503) != (got != "") {
			t.Errorf("%s: status %d with Retry-After %q; want Retry-After exactly on 503", tc.name, status, got)
		}
	}
}

// TestParseErrors_EchoNothingOfTheRequest: fasthttp's text for a request it cannot parse ends
// with up to its whole read buffer ("Buffer size=…, contents: …"), which held the request's
// headers, a bearer token among them; behind a proxy that pipelines several clients on one
// connection, another client's. The 400 says what was wrong and nothing of what was sent.
func TestParseErrors_EchoNothingOfTheRequest(t *testing.T) {
	app := httpserver.New(httpserver.Config{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.Shutdown() })
	const secret = "Bearer eyJ-the-callers-token"
	for _, request := range []string{
		"GET /ok HTTP/1.1\r\nHost: x\r\nAuthorization: " + secret + "\r\nContent-Length: abc\r\n\r\n",
		"GET /ok HTTP/1.1\r\nAuthorization: " + secret + "\r\nContent-Length: 1, 2\r\n\r\n",
		"\x01\x02 /ok HTTP/1.1\r\nAuthorization: " + secret + "\r\n\r\n",
	} {
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(time.Minute)) // only if the server hangs
		if _, err := io.WriteString(conn, request); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		conn.Close()
		if resp.StatusCode != http.StatusBadRequest || strings.Contains(string(body), "eyJ") || strings.Contains(string(body), "contents") {
			t.Errorf("%q: %d %s; want 400 naming nothing of the request", request, resp.StatusCode, body)
		}
	}
}
