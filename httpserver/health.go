package httpserver

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Health answers liveness and readiness. Ready means: started, not draining, and the database
// answers.
type Health struct {
	started  atomic.Bool
	draining atomic.Bool
	ping     func(ctx context.Context) error
	logger   *slog.Logger
	sampler  *Sampler
	// reports are added before serving and read by every /readyz on the metrics port.
	reports []report
}

type report struct {
	name  string
	value func() any
}

// NewHealth returns a Health that checks the database with ping. Why a check failed goes to
// logger (sampled) and to the metrics port's /readyz, never to the public one.
func NewHealth(ping func(ctx context.Context) error, logger *slog.Logger) *Health {
	return &Health{ping: ping, logger: logger, sampler: NewSampler(errorLogInterval)}
}

// Report adds name: value() to the metrics port's /readyz answer, for operators who look there
// first (the public port's /readyz says only ready or not). Call it before serving.
func (h *Health) Report(name string, value func() any) {
	h.reports = append(h.reports, report{name, value})
}

// SetStarted makes readiness possible: every service of the node has started. Until then
// /readyz answers 503, so a load balancer sends nothing to a node that is still replaying
// spilled positions or starting its workers, although its metrics port already answers.
func (h *Health) SetStarted() { h.started.Store(true) }

// SetDraining makes readiness fail from now on: the process is stopping.
func (h *Health) SetDraining() { h.draining.Store(true) }

// Ready returns nil when the node should receive traffic.
func (h *Health) Ready(ctx context.Context) error {
	switch {
	case !h.started.Load():
		return errStarting
	case h.draining.Load():
		return errDraining
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return h.ping(ctx)
}

var (
	errStarting = errors.New("starting")
	errDraining = errors.New("draining")
)

// Register adds /healthz and /readyz to the public app.
func (h *Health) Register(app *fiber.App) {
	app.Get("/healthz", func(c *fiber.Ctx) error { return c.JSON(fiber.Map{"status": "ok"}) })
	// The public answer says only "not ready": the database's error names its user, database
	// and host:port, which is nobody's business on the public port.
	app.Get("/readyz", func(c *fiber.Ctx) error {
		if err := h.Ready(c.UserContext()); err != nil {
			h.logNotReady(err)
			return c.Status(fiber.StatusServiceUnavailable).JSON(fiber.Map{"error": "not ready"})
		}
		return c.JSON(fiber.Map{"status": "ready"})
	})
}

func (h *Health) logNotReady(err error) {
	if h.logger == nil || errors.Is(err, errDraining) {
		return
	}
	if ok, suppressed := h.sampler.Allow("readyz"); ok {
		h.logger.Warn("not ready", "err", err, "suppressed", suppressed)
	}
}

// MetricsHandler serves /metrics from gatherer plus /healthz, /readyz and Go's
// /debug/pprof profiles, for the metrics listen address (loopback by default, never the
// public one): operators profile a busy node where they scrape it.
func (h *Health) MetricsHandler(gatherer prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	// ContinueOnError: one collector that cannot read the database (the job queue's, during an
	// outage) must not blank every other figure exactly when operators need them.
	mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		answer := map[string]any{"status": "ready"}
		status := http.StatusOK
		if err := h.Ready(r.Context()); err != nil {
			h.logNotReady(err)
			// The metrics port is for operators (loopback by default): say why.
			answer = map[string]any{"error": "not ready: " + err.Error()}
			status = http.StatusServiceUnavailable
		}
		for _, rep := range h.reports {
			answer[rep.name] = rep.value()
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(answer)
	})
	return mux
}
