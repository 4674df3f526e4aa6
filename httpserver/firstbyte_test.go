package httpserver_test

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/playhead/playhead/httpserver"
)

// firstByteServer is an app with one first-byte route, POST /v1/media, whose handler reports on
// reached that it runs and answers 202 with the SHA-256 of the body it read through
// BodyStream; POST /v1/other is an ordinary route with the same handler.
type firstByteServer struct {
	addr    string
	reached chan string // the request target of each handler run
}

func startFirstByteServer(t *testing.T) *firstByteServer {
	t.Helper()
	s := &firstByteServer{reached: make(chan string, 16)}
	app := httpserver.New(httpserver.Config{BodyLimit: framingLimit, ReadTimeout: 2 * time.Second, IdleTimeout: 2 * time.Second,
		FirstByteRoutes: []httpserver.Route{{Method: fiber.MethodPost, Path: "/v1/media"}, {Method: fiber.MethodPost, Path: "/v1/read"},
			{Method: fiber.MethodPatch, Path: "/v1/uploads", Under: true}}})
	hash := func(c *fiber.Ctx) error {
		s.reached <- string(c.Request().Header.RequestURI())
		h := sha256.New()
		n, err := io.Copy(h, httpserver.BodyStream(c))
		if err != nil {
			return err
		}
		return c.Status(fiber.StatusAccepted).SendString(fmt.Sprintf("%d %x", n, h.Sum(nil)))
	}
	app.Post("/v1/media", hash)
	app.Post("/v1/other", hash)
	app.Patch("/v1/uploads/:id", hash)
	app.Patch("/v1/uploadsx", hash) // beside the folder, not in it: an ordinary route
	// A first-byte route whose body LimitBody reads to its end.
	app.Post("/v1/read", httpserver.LimitBody(framingLimit), func(c *fiber.Ctx) error {
		return c.Status(fiber.StatusAccepted).SendString(fmt.Sprintf("%d", len(c.Body())))
	})
	app.Get("/ok", func(c *fiber.Ctx) error { return c.SendString("ok") })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.Shutdown() })
	s.addr = ln.Addr().String()
	return s
}

// TestFirstByteRoutes_HandlerRunsAtTheFirstBytes sends the headers of a 1 MiB upload and its
// first two bytes, then nothing: the handler of a first-byte route runs at once, however its
// path is spelled, where an ordinary route waits for 8 KiB (until the read timeout cuts it).
func TestFirstByteRoutes_HandlerRunsAtTheFirstBytes(t *testing.T) {
	s := startFirstByteServer(t)
	// Every spelling Fiber routes to POST /v1/media (any letter case, trailing slashes, a
	// query, a fragment, the absolute form).
	targets := []string{"/v1/media", "/V1/Media", "/v1/media/", "/v1/media//", "/v1/media?title=x", "/v1/media#f", "http://playhead/v1/media",
		"PATCH /v1/uploads/abc", "PATCH /V1/Uploads/abc/", "PATCH /v1/uploads/abc?x=1"}
	for _, target := range targets {
		method := "POST"
		if m, rest, ok := strings.Cut(target, " "); ok {
			method, target = m, rest
		}
		t.Run(method+" "+target, func(t *testing.T) {
			conn, err := net.Dial("tcp", s.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(time.Minute)) // only if the server hangs
			if _, err := fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: playhead\r\nContent-Length: %d\r\n\r\nxx", method, target, 1<<20); err != nil {
				t.Fatal(err)
			}
			answered := make(chan int, 1)
			go func() {
				resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if err != nil {
					answered <- 0
					return
				}
				resp.Body.Close()
				answered <- resp.StatusCode
			}()
			select {
			case got := <-s.reached:
				if got != target {
					t.Errorf("the handler ran for %q, want %q", got, target)
				}
			case status := <-answered:
				t.Fatalf("answered %d before the handler ran: fasthttp waited for more of the body", status)
			}
			conn.Close()
			<-answered
		})
	}
	for _, ordinary := range []string{"POST /v1/other", "PATCH /v1/uploadsx", "POST /v1/uploads/abc"} {
		t.Run("an ordinary route waits: "+ordinary, func(t *testing.T) {
			srv := &framingServer{addr: s.addr}
			got := srv.exchange(t, fmt.Sprintf("%s HTTP/1.1\r\nHost: playhead\r\nContent-Length: %d\r\n\r\nxx", ordinary, 1<<20))
			if len(got) != 1 || got[0].status != fiber.StatusRequestTimeout || len(s.reached) > 0 {
				t.Errorf("answers %v, handler runs %d; want a 408 from the read timeout and no handler run", got, len(s.reached))
			}
		})
	}
}

// TestFirstByteRoutes_BodyArrivesWhole uploads through a first-byte route, whose handler
// starts on a two-byte pre-read: a body of a few MiB, and a chunked one, arrive byte for byte.
// A small body with a request pipelined behind it arrives exactly too, though fasthttp's
// pre-read took the next request's bytes with it: read past the body, fasthttp's stream would
// hand those out and then panic, ending the process. The connection is closed after the
// answer, so the pipelined request is never read from the middle.
func TestFirstByteRoutes_BodyArrivesWhole(t *testing.T) {
	s := startFirstByteServer(t)
	large := make([]byte, 3<<20+12345)
	_, _ = rand.Read(large)
	sum := func(b []byte) string {
		h := sha256.Sum256(b)
		return fmt.Sprintf("%d %s", len(b), hex.EncodeToString(h[:]))
	}
	small := []byte(strings.Repeat("s", 300))
	cases := []struct {
		name, request string
		want          string
	}{
		{"large", fmt.Sprintf("POST /v1/media HTTP/1.1\r\nHost: playhead\r\nContent-Length: %d\r\n\r\n%s", len(large), large), sum(large)},
		{"chunked", fmt.Sprintf("POST /v1/media HTTP/1.1\r\nHost: playhead\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n",
			1<<20, large[:1<<20], len(large)-(1<<20), large[1<<20:]), sum(large)},
		{"small with a request behind it", fmt.Sprintf("POST /v1/media HTTP/1.1\r\nHost: playhead\r\nContent-Length: %d\r\n\r\n%s%s%s",
			len(small), small, getOK, strings.Repeat("junk", 1000)), sum(small)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := &framingServer{addr: s.addr}
			got := srv.exchange(t, c.request)
			<-s.reached
			if len(got) != 1 || got[0].status != fiber.StatusAccepted || got[0].body != c.want || !got[0].close {
				t.Errorf("answers %v, want one 202 %q closing the connection", got, c.want)
			}
		})
	}
}

// TestFirstByteRoutes_ReadBodyStillClosesAfterAnOverread: fasthttp's pre-read of a first-byte
// route's body takes whatever has arrived, which can be the next pipelined request too. Those
// bytes are gone from the connection even when LimitBody then reads the body exactly to its end,
// so the connection must still be closed after the answer: kept, it would wait for, or parse
// from its middle, a request whose start was swallowed.
func TestFirstByteRoutes_ReadBodyStillClosesAfterAnOverread(t *testing.T) {
	s := startFirstByteServer(t)
	srv := &framingServer{addr: s.addr}
	body := strings.Repeat("r", 300)
	got := srv.exchange(t, fmt.Sprintf("POST /v1/read HTTP/1.1\r\nHost: playhead\r\nContent-Length: %d\r\n\r\n%s", len(body), body)+getOK+getOK)
	if len(got) != 1 || got[0].status != fiber.StatusAccepted || got[0].body != "300" || !got[0].close {
		t.Errorf("answers %v, want one 202 \"300\" closing the connection", got)
	}
}
