package httpserver_test

import (
	"testing"

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
