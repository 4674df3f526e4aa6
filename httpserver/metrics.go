package httpserver

import (
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics counts and times HTTP requests by route pattern (never by raw path, so ids do not
// become label values).
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec

	// resolved maps each (method, route, status) seen to its counter and histogram, so a
	// request pays one map lookup instead of hashing its label values into both vectors (and
	// copying two of them). The map is copied on write: a new combination is rare (routes and
	// statuses are few), and reads then need no lock.
	resolved  atomic.Pointer[map[routeStatus]routeObservers]
	resolveMu sync.Mutex
}

type routeStatus struct {
	method, route string
	status        int
}

type routeObservers struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

// maxResolved bounds the combinations remembered; past it a request resolves its labels
// itself, as before. Fiber refuses unknown methods before any middleware, so the bound is
// never reached in practice.
const maxResolved = 1024

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
	m.resolved.Store(&map[routeStatus]routeObservers{})
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
	o := m.observers(c.Method(), route, status)
	o.requests.Inc()
	o.duration.Observe(time.Since(start).Seconds())
	return err
}

// observers returns the counter and histogram of a request's labels.
func (m *Metrics) observers(method, route string, status int) routeObservers {
	key := routeStatus{method: method, route: route, status: status}
	if o, ok := (*m.resolved.Load())[key]; ok {
		return o
	}
	// Fiber's strings point into fasthttp's reused request buffer; a label value kept by
	// Prometheus (or a key kept here) must be a copy, or the next request on the connection
	// rewrites it.
	key.method, key.route = strings.Clone(method), strings.Clone(route)
	o := routeObservers{
		requests: m.requests.WithLabelValues(key.method, key.route, strconv.Itoa(status)),
		duration: m.duration.WithLabelValues(key.method, key.route),
	}
	m.resolveMu.Lock()
	defer m.resolveMu.Unlock()
	if old := *m.resolved.Load(); len(old) < maxResolved {
		next := make(map[routeStatus]routeObservers, len(old)+1)
		maps.Copy(next, old)
		next[key] = o
		m.resolved.Store(&next)
	}
	return o
}
