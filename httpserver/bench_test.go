package httpserver_test

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/playhead/playhead/httpserver"
)

// BenchmarkMetricsMiddleware measures one PUT through the public app with request metrics on
// (the handler only answers 204), from concurrent callers as under load: Fiber's routing and
// middleware chain plus the metrics' label lookups.
func BenchmarkMetricsMiddleware(b *testing.B) {
	app := httpserver.New(httpserver.Config{Metrics: httpserver.NewMetrics(prometheus.NewRegistry())})
	app.Put("/v1/playback/:mediaID", func(c *fiber.Ctx) error { return c.SendStatus(fiber.StatusNoContent) })
	handler := app.Handler()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var ctx fasthttp.RequestCtx
		for pb.Next() {
			ctx.Request.Reset()
			ctx.Response.Reset()
			ctx.Request.Header.SetMethod(fasthttp.MethodPut)
			ctx.Request.SetRequestURI("/v1/playback/42")
			handler(&ctx)
			if ctx.Response.StatusCode() != fiber.StatusNoContent {
				b.Fatalf("status %d", ctx.Response.StatusCode())
			}
		}
	})
}

// BenchmarkPutOnAKeptAliveConnection measures a player's position report as the server handles
// it: on one kept-alive connection, fasthttp reads each request and its body, then the public
// app's middleware, LimitBody and a handler that reads the JSON body answer 204. The upload is a
// first-byte route, as in cmd/api, so every request passes fasthttp's HeaderReceived too. The
// connection is in memory (no network noise), one request per read as a player sends them; the
// benchmark fails if the server closes it before the last request.
func BenchmarkPutOnAKeptAliveConnection(b *testing.B) {
	app := httpserver.New(httpserver.Config{BodyLimit: 64 << 10, Metrics: httpserver.NewMetrics(prometheus.NewRegistry()),
		FirstByteRoutes: []httpserver.Route{{Method: fiber.MethodPost, Path: "/v1/media"}}})
	app.Group("/v1", httpserver.LimitBody(64<<10)).Put("/playback/:mediaID", func(c *fiber.Ctx) error {
		if !bytes.HasPrefix(c.Body(), []byte(`{"position_ms":`)) {
			return fiber.ErrBadRequest
		}
		return c.SendStatus(fiber.StatusNoContent)
	})
	app.Handler() // builds the route tree, as Listen does
	conn := &requestsConn{
		request: []byte("PUT /v1/playback/42 HTTP/1.1\r\nHost: playhead\r\nAuthorization: Bearer x\r\n" +
			"Content-Type: application/json\r\nContent-Length: 21\r\n\r\n{\"position_ms\":61000}"),
		left: b.N,
	}
	b.ReportAllocs()
	b.ResetTimer()
	if err := app.Server().ServeConn(conn); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if conn.answered != b.N || conn.left > 0 {
		b.Fatalf("%d of %d requests answered 204, %d never read: the server closed the connection", conn.answered, b.N, conn.left)
	}
}

// requestsConn is a client connection that sends request left times, one per Read, and counts
// the 204 answers written to it.
type requestsConn struct {
	request  []byte
	left     int
	unread   []byte
	answered int
	tail     []byte // the end of the last write, where an answer's status line may have been cut
}

var status204 = []byte("HTTP/1.1 204 No Content\r\n")

func (c *requestsConn) Read(p []byte) (int, error) {
	if len(c.unread) == 0 {
		if c.left == 0 {
			return 0, io.EOF
		}
		c.left--
		c.unread = c.request
	}
	n := copy(p, c.unread)
	c.unread = c.unread[n:]
	return n, nil
}

func (c *requestsConn) Write(p []byte) (int, error) {
	seen := append(c.tail, p...)
	c.answered += bytes.Count(seen, status204)
	c.tail = append(c.tail[:0], seen[max(0, len(seen)-len(status204)+1):]...)
	return len(p), nil
}

func (c *requestsConn) Close() error { return nil }
func (c *requestsConn) LocalAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
}
func (c *requestsConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 50000}
}
func (c *requestsConn) SetDeadline(time.Time) error      { return nil }
func (c *requestsConn) SetReadDeadline(time.Time) error  { return nil }
func (c *requestsConn) SetWriteDeadline(time.Time) error { return nil }
