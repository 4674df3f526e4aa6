package httpserver_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/httpserver"
)

// The framing tests: an answer given before a request's body was read must close
// the connection, or the body's bytes are read as the next requests on it. Each body carries a
// whole request (GET /smuggled) where fasthttp would start reading again, so a server that
// keeps the connection runs it; every test counts the requests that reached /smuggled.

// framingLimit is the test app's body limit (PLAYHEAD_MAX_BODY_BYTES).
const framingLimit = 64 << 10

// smuggledRequest is the request hidden in the bodies.
const smuggledRequest = "GET /smuggled HTTP/1.1\r\nHost: playhead\r\n\r\n"

// preRead is how much of a body within the limit fasthttp reads before the handler runs
// (readBodyWithStreaming: min(limit, Content-Length, 8 KiB)); a refused body's next request
// would start there.
const preRead = 8 << 10

// framingServer is the public app as cmd/api builds it, reduced to what framing needs: a body
// limit on /v1 (httpserver.LimitBody), routes that read their bodies, one that refuses before
// reading (as the upload route's authentication does), one that never reads its body and one
// that gives up halfway.
type framingServer struct {
	addr     string
	smuggled atomic.Int32
}

func startFramingServer(t *testing.T) *framingServer {
	t.Helper()
	s := &framingServer{}
	app := httpserver.New(httpserver.Config{BodyLimit: framingLimit, ReadTimeout: 2 * time.Second, IdleTimeout: 2 * time.Second})
	app.Get("/ok", func(c *fiber.Ctx) error { return c.SendString("ok") })
	app.Get("/smuggled", func(c *fiber.Ctx) error {
		s.smuggled.Add(1)
		return c.SendString("smuggled")
	})
	refuse := func(*fiber.Ctx) error { return apperr.Errorf(apperr.Unauthenticated, "no token") }
	app.Post("/v1/media", refuse, func(c *fiber.Ctx) error { return c.SendStatus(fiber.StatusAccepted) })
	app.Post("/v1/ignored", func(c *fiber.Ctx) error { return c.SendStatus(fiber.StatusAccepted) })
	app.Post("/v1/halfway", func(c *fiber.Ctx) error {
		if _, err := io.CopyN(io.Discard, c.Context().RequestBodyStream(), preRead+1024); err != nil {
			return err
		}
		return apperr.Errorf(apperr.TooManyRequests, "too many uploads in progress")
	})
	v1 := app.Group("/v1", httpserver.LimitBody(framingLimit))
	v1.Put("/playback/:mediaID", func(c *fiber.Ctx) error {
		if !bytes.HasPrefix(c.Body(), []byte(`{"position_ms":`)) {
			return apperr.Errorf(apperr.Invalid, "malformed JSON body")
		}
		return c.SendStatus(fiber.StatusNoContent)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.Shutdown() })
	s.addr = ln.Addr().String()
	return s
}

// answer is one answer read off a connection.
type answer struct {
	status int
	close  bool // Connection: close
	body   string
	// acceptEncoding is the Accept-Encoding header: what a 415 for a coding accepts.
	acceptEncoding string
}

func (a answer) String() string {
	return fmt.Sprintf("%d (close %v) %.80q", a.status, a.close, a.body)
}

// exchange opens a connection, writes the requests in one go, as a pipelining client does,
// and reads answers until the server closes the connection; the server's idle timeout ends a
// connection it keeps, so exchange returns either way. It starts the count of requests that
// reached /smuggled afresh.
func (s *framingServer) exchange(t *testing.T, requests ...string) []answer {
	t.Helper()
	s.smuggled.Store(0)
	conn, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Minute)) // only if the server hangs
	written := make(chan struct{})
	go func() {
		defer close(written)
		// The server may close before it has read everything: the write then fails.
		_, _ = io.WriteString(conn, strings.Join(requests, ""))
	}()
	got := readAnswers(t, bufio.NewReader(conn))
	conn.Close()
	<-written
	return got
}

// readAnswers reads answers until the connection ends.
func readAnswers(t *testing.T, br *bufio.Reader) []answer {
	t.Helper()
	var got []answer
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			// A server that closes with bytes of ours unread sends a reset, not an end.
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("reading the answers after %v: %v", got, err)
			}
			return got
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got = append(got, answer{status: resp.StatusCode, close: resp.Close, body: string(body), acceptEncoding: resp.Header.Get("Accept-Encoding")})
	}
}

// put is a position report.
func put(body string) string {
	return fmt.Sprintf("PUT /v1/playback/42 HTTP/1.1\r\nHost: playhead\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}

const okReport = `{"position_ms":61000}`

// withBody is a request with a Content-Length body of size bytes that carries
// smuggledRequest at offset at.
func withBody(method, target string, size, at int) string {
	return fmt.Sprintf("%s %s HTTP/1.1\r\nHost: playhead\r\nContent-Length: %d\r\n\r\n%s", method, target, size, smugglingBody(size, at))
}

func smugglingBody(size, at int) string {
	return strings.Repeat("a", at) + smuggledRequest + strings.Repeat("b", size-at-len(smuggledRequest))
}

// overLimit is a body over the limit. fasthttp's pre-read of such a body (readBodyIdentity)
// stops somewhere past 8 KiB, depending on its pooled buffer; a run of blank lines there,
// which a request parser skips, leads to the hidden request from wherever it stops.
func overLimit(method, target string) string {
	body := strings.Repeat("a", preRead-200) + strings.Repeat("\n", 3000) + smuggledRequest
	body += strings.Repeat("b", 4*framingLimit-len(body))
	return fmt.Sprintf("%s %s HTTP/1.1\r\nHost: playhead\r\nContent-Length: %d\r\n\r\n%s", method, target, len(body), body)
}

// chunked is a chunked request whose first chunk's data is the hidden request.
func chunked(method, target string) string {
	return fmt.Sprintf("%s %s HTTP/1.1\r\nHost: playhead\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n",
		method, target, len(smuggledRequest), smuggledRequest)
}

const getOK = "GET /ok HTTP/1.1\r\nHost: playhead\r\n\r\n"

// checkClosedAfter checks that got is exactly want's statuses, the last one with Connection:
// close, and that nothing reached /smuggled.
func (s *framingServer) checkClosedAfter(t *testing.T, got []answer, want ...int) {
	t.Helper()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = got[i].status == want[i] && got[i].close == (i == len(want)-1)
	}
	if !ok {
		t.Errorf("answers %v, want %v with the connection closed after the last: the server read a refused body as requests", got, want)
	}
	if n := s.smuggled.Load(); n > 0 {
		t.Errorf("the request hidden in the body ran %d times", n)
	}
}

// TestFraming_RefusedBodyClosesTheConnection sends one request whose body the server does not
// read, then a second request, on one connection: the server answers the first, closes the
// connection and never reads the body, or the second request, as a request.
func TestFraming_RefusedBodyClosesTheConnection(t *testing.T) {
	cases := []struct {
		name, request string
		status        int
	}{
		{"over the limit by Content-Length", overLimit("PUT", "/v1/playback/42"), fiber.StatusRequestEntityTooLarge},
		{"over the limit on a route that refuses first", overLimit("POST", "/v1/media"), fiber.StatusUnauthorized},
		{"refused before the body was read", withBody("POST", "/v1/media", 32<<10, preRead), fiber.StatusUnauthorized},
		{"refused before a chunked body was read", chunked("POST", "/v1/media"), fiber.StatusUnauthorized},
		{"unknown route", withBody("PUT", "/nothing-here", 32<<10, preRead), fiber.StatusNotFound},
		{"unknown method, answered by Fiber before any middleware", withBody("BREW", "/v1/playback/42", 32<<10, preRead), fiber.StatusBadRequest},
		{"a handler that never reads its body", withBody("POST", "/v1/ignored", 32<<10, preRead), fiber.StatusAccepted},
		{"refused halfway through the body", withBody("POST", "/v1/halfway", 32<<10, preRead+1024), fiber.StatusTooManyRequests},
	}
	s := startFramingServer(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s.checkClosedAfter(t, s.exchange(t, c.request, getOK), c.status)
		})
	}
}

// TestFraming_PipelinedRequestsAroundARefusedBody writes several requests at once, as a
// pipelining client does: the answers before the refused body come back on the kept
// connection, the refused one closes it, and nothing after it is answered.
func TestFraming_PipelinedRequestsAroundARefusedBody(t *testing.T) {
	s := startFramingServer(t)
	t.Run("over the limit", func(t *testing.T) {
		got := s.exchange(t, put(okReport), getOK, overLimit("PUT", "/v1/playback/42"), put(okReport), getOK)
		s.checkClosedAfter(t, got, fiber.StatusNoContent, fiber.StatusOK, fiber.StatusRequestEntityTooLarge)
	})
	t.Run("refused before the body was read", func(t *testing.T) {
		got := s.exchange(t, put(okReport), withBody("POST", "/v1/media", 16<<10, preRead), put(okReport), getOK)
		s.checkClosedAfter(t, got, fiber.StatusNoContent, fiber.StatusUnauthorized)
	})
	t.Run("refused chunked", func(t *testing.T) {
		got := s.exchange(t, getOK, chunked("POST", "/v1/media"), getOK, put(okReport))
		s.checkClosedAfter(t, got, fiber.StatusOK, fiber.StatusUnauthorized)
	})
	t.Run("unread body", func(t *testing.T) {
		got := s.exchange(t, put(okReport), withBody("POST", "/v1/ignored", 16<<10, preRead), getOK)
		s.checkClosedAfter(t, got, fiber.StatusNoContent, fiber.StatusAccepted)
	})
}

// TestFraming_ReadBodiesKeepTheConnection is the player's side: position reports every 5 s
// over one kept-alive connection. A body the server read to its end, whatever it answered,
// leaves the connection open.
func TestFraming_ReadBodiesKeepTheConnection(t *testing.T) {
	s := startFramingServer(t)
	conn, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Minute)) // only if the server hangs
	br := bufio.NewReader(conn)
	for i, c := range []struct {
		request string
		status  int
	}{
		{put(okReport), fiber.StatusNoContent},
		{put(okReport), fiber.StatusNoContent},
		{put(`{"position_ms":61000}` + strings.Repeat(" ", 20<<10)), fiber.StatusNoContent}, // past the pre-read
		{put(`{"position":1}`), fiber.StatusBadRequest},
		{chunked("PUT", "/v1/playback/42"), fiber.StatusBadRequest},
		{withBody("PUT", "/v1/playback/42", 16<<10, preRead), fiber.StatusBadRequest},
		{put(okReport), fiber.StatusNoContent},
		{getOK, fiber.StatusOK},
	} {
		if _, err := io.WriteString(conn, c.request); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: no answer: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || resp.Close {
			t.Fatalf("request %d: %d (Connection: close %v), want %d on a kept connection", i, resp.StatusCode, resp.Close, c.status)
		}
	}
	if n := s.smuggled.Load(); n > 0 {
		t.Errorf("a request in a body ran %d times", n)
	}
}

// TestFraming_BodyCutByTheReadTimeout sends part of a body past the pre-read and then nothing:
// the read timeout ends the body inside LimitBody. The answer (408) closes the connection, so
// the rest of the body, sent afterwards, is never read as a request. (fasthttp's Body() would
// hand the handler the timeout's text as the body, and the connection would carry on.)
func TestFraming_BodyCutByTheReadTimeout(t *testing.T) {
	s := startFramingServer(t)
	conn, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Minute)) // only if the server hangs
	const size, sent = 32 << 10, 16 << 10
	body := smugglingBody(size, sent)
	if _, err := fmt.Fprintf(conn, "PUT /v1/playback/42 HTTP/1.1\r\nHost: playhead\r\nContent-Length: %d\r\n\r\n%s", size, body[:sent]); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil) // after the server's read timeout
	if err != nil {
		t.Fatalf("no answer to a body that stopped: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	_, _ = io.WriteString(conn, body[sent:]+getOK) // fails if the server has closed
	got := append([]answer{{status: resp.StatusCode, close: resp.Close}}, readAnswers(t, br)...)
	s.checkClosedAfter(t, got, fiber.StatusRequestTimeout)
}

// TestFraming_AmbiguousChunkedFramingIsRefused: fasthttp reads any Transfer-Encoding but
// "identity" as chunked and drops a Content-Length beside it, where RFC 9112 (6.1, 6.3) has
// the server refuse the request, or at least close the connection after it: a proxy in front
// that framed the same bytes by the Content-Length, or that found no chunked coding at the end,
// would pass on what this server then reads as another request. Each request here hides one
// where a reader of the other framing resumes; the answer is one 400 that closes the connection.
func TestFraming_AmbiguousChunkedFramingIsRefused(t *testing.T) {
	report := fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(okReport), okReport)
	hidden := "0\r\n\r\n" + smuggledRequest // a chunked reader ends at 0; a Content-Length reader reads on
	head := "PUT /v1/playback/42 HTTP/1.1\r\nHost: playhead\r\nContent-Type: application/json\r\n"
	cases := []struct{ name, request string }{
		{"Transfer-Encoding then Content-Length", head + fmt.Sprintf("Transfer-Encoding: chunked\r\nContent-Length: %d\r\n\r\n%s", len(hidden), hidden)},
		{"Content-Length then Transfer-Encoding", head + fmt.Sprintf("Content-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n%s", len(hidden), hidden)},
		{"Content-Length 0 beside chunked", head + "Content-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n" + report + smuggledRequest},
		{"a coding after chunked", head + "Transfer-Encoding: chunked, identity\r\n\r\n" + report},
		{"a coding fasthttp does not know", head + "Transfer-Encoding: xchunked\r\n\r\n" + report},
		{"a coding that is not chunked", head + "Transfer-Encoding: gzip\r\n\r\n" + report},
		{"chunked twice", head + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n" + report},
		{"a folded Transfer-Encoding", head + "Transfer-Encoding:\r\n chunked\r\n\r\n" + report},
	}
	s := startFramingServer(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s.checkClosedAfter(t, s.exchange(t, c.request, getOK), fiber.StatusBadRequest)
		})
	}
	t.Run("plain chunked is read", func(t *testing.T) {
		got := s.exchange(t, head+"Transfer-Encoding: Chunked\r\n\r\n"+report, getOK)
		if len(got) != 2 || got[0].status != fiber.StatusNoContent || got[0].close || got[1].status != fiber.StatusOK {
			t.Errorf("answers %v, want 204 and 200 on a kept connection", got)
		}
	})
}

// TestFraming_DifferingContentLengthsAreRefused: fasthttp reads the last of several
// Content-Length lines, where a proxy in front may read the first (RFC 9112 6.3 has the server
// refuse the request). Each request hides one where a reader of the other length resumes; the
// answer is one 400 that closes the connection, whether the lines differ or not.
func TestFraming_DifferingContentLengthsAreRefused(t *testing.T) {
	head := "PUT /v1/playback/42 HTTP/1.1\r\nHost: playhead\r\nContent-Type: application/json\r\n"
	short, long := okReport, okReport+smuggledRequest
	cases := []struct{ name, request string }{
		{"the first length shorter", head + fmt.Sprintf("Content-Length: %d\r\nContent-Length: %d\r\n\r\n%s", len(short), len(long), long)},
		{"the last length shorter", head + fmt.Sprintf("Content-Length: %d\r\ncontent-length: %d\r\n\r\n%s", len(long), len(short), long)},
		{"a length of 0 last", head + fmt.Sprintf("Content-Length: %d\r\nContent-Length: 0\r\n\r\n%s", len(smuggledRequest), smuggledRequest)},
		{"the same length twice", head + fmt.Sprintf("Content-Length: %d\r\nContent-Length: %d\r\n\r\n%s", len(short), len(short), short)},
	}
	s := startFramingServer(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s.checkClosedAfter(t, s.exchange(t, c.request, getOK), fiber.StatusBadRequest)
		})
	}
}

// TestFraming_CompressedBodiesAreRefused: Fiber's Body() would decode a compressed body into
// memory with no bound before any limit applied to it. Every coding, in any letter case,
// layered or on several lines, is refused with 415 before the body is read, on a route that
// reads its body as on one that streams it; "identity" is no coding.
func TestFraming_CompressedBodiesAreRefused(t *testing.T) {
	s := startFramingServer(t)
	request := func(target, codings string) string {
		return fmt.Sprintf("PUT %s HTTP/1.1\r\nHost: playhead\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n%s",
			target, codings, len(okReport), okReport)
	}
	for _, codings := range []string{
		"Content-Encoding: gzip\r\n",
		"Content-Encoding: deflate\r\n",
		"Content-Encoding: br\r\n",
		"content-encoding: GZIP\r\n",
		"Content-Encoding: gzip, gzip\r\n",
		"Content-Encoding: identity, gzip\r\n",
		"Content-Encoding: gzip\r\nContent-Encoding: identity\r\n",
		"Content-Encoding: identity\r\nContent-Encoding: br\r\n",
		"Content-Encoding: zstd\r\n",
	} {
		t.Run(strings.TrimSpace(codings), func(t *testing.T) {
			got := s.exchange(t, request("/v1/playback/42", codings), getOK)
			s.checkClosedAfter(t, got, fiber.StatusUnsupportedMediaType)
			if len(got) == 1 && got[0].acceptEncoding != "identity" {
				t.Errorf("Accept-Encoding %q, want identity", got[0].acceptEncoding)
			}
		})
	}
	t.Run("identity is read", func(t *testing.T) {
		got := s.exchange(t, request("/v1/playback/42", "Content-Encoding: identity\r\n"), getOK)
		if len(got) != 2 || got[0].status != fiber.StatusNoContent || got[0].close || got[1].status != fiber.StatusOK {
			t.Errorf("answers %v, want 204 and 200 on a kept connection", got)
		}
	})
}

// TestFraming_ChunkedHTTP10IsRefused: HTTP/1.0 has no Transfer-Encoding, and RFC 9112 6.1 has a
// server treat the framing of an HTTP/1.0 request that carries one as faulty. fasthttp reads
// its body as chunked and, with Connection: keep-alive, goes on reading the connection after
// it, where a proxy in front that frames HTTP/1.0 by Content-Length alone (none: no body) reads
// the chunks as the next request, and passes on what follows them. Each request hides one after
// its chunked body; the answer is one 400 that closes the connection, kept alive or not.
func TestFraming_ChunkedHTTP10IsRefused(t *testing.T) {
	report := fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(okReport), okReport)
	head := "PUT /v1/playback/42 HTTP/1.0\r\nHost: playhead\r\nContent-Type: application/json\r\n"
	cases := []struct{ name, request string }{
		{"kept alive", head + "Connection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n" + report + smuggledRequest},
		{"not kept alive", head + "Transfer-Encoding: chunked\r\n\r\n" + report + smuggledRequest},
		{"beside a Content-Length", head + fmt.Sprintf("Connection: keep-alive\r\nContent-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n%s", len(report), report) + smuggledRequest},
	}
	s := startFramingServer(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s.checkClosedAfter(t, s.exchange(t, c.request, getOK), fiber.StatusBadRequest)
		})
	}
	t.Run("a Content-Length is read", func(t *testing.T) {
		request := head + fmt.Sprintf("Connection: keep-alive\r\nContent-Length: %d\r\n\r\n%s", len(okReport), okReport)
		got := s.exchange(t, request, getOK)
		if len(got) != 2 || got[0].status != fiber.StatusNoContent || got[0].close || got[1].status != fiber.StatusOK {
			t.Errorf("answers %v, want 204 and 200 on a kept connection", got)
		}
	})
}
