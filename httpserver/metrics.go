package httpserver

import (
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics counts and times HTTP requests by route pattern (never by raw path, so ids do not
// become label values).
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewMetrics creates the HTTP metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "playhead", Subsystem: "http", Name: "requests_total",
			Help: "HTTP requests answered, by method, route pattern and status code.",
		}, []string{"method", "route", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "playhead", Subsystem: "http", Name: "request_duration_seconds",
			Help:    "Time from request to response in the server, by method and route pattern.",
			Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		}, []string{"method", "route"}),
	}
	reg.MustRegister(m.requests, m.duration)
	return m
}

func (m *Metrics) middleware(c *fiber.Ctx) error {
	start := time.Now()
	err := c.Next()
	status := c.Response().StatusCode()
	if err != nil {
		// The error handler has not run yet; ask it what it will answer.
		status, _ = describe(err)
	}
	route := c.Route().Path
	if status == fiber.StatusNotFound && route == "/" && c.Path() != "/" {
		route = "unmatched" // Fiber reports its catch-all for unknown paths
	}
	// Fiber's strings point into fasthttp's reused request buffer; a label value kept by
	// Prometheus must be a copy, or the next request on the connection rewrites it.
	method := strings.Clone(c.Method())
	m.requests.WithLabelValues(method, route, strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(method, route).Observe(time.Since(start).Seconds())
	return err
}
