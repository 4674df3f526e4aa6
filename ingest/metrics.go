package ingest

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the importer's download figures. A nil *Metrics records nothing.
type Metrics struct {
	downloads *prometheus.CounterVec
	bytes     prometheus.Counter
	retries   prometheus.Counter
	duration  prometheus.Histogram
}

// NewMetrics creates the download metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		downloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "playhead", Subsystem: "ingest", Name: "downloads_total",
			Help: "Downloads by outcome: ok, failed (retryable, left to the job's next attempt), rejected (permanent), cancelled.",
		}, []string{"outcome"}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "playhead", Subsystem: "ingest", Name: "downloaded_bytes_total",
			Help: "Bytes of successfully downloaded files.",
		}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "playhead", Subsystem: "ingest", Name: "download_retries_total",
			Help: "Downloads that failed with a 429, a 5xx, a connection error or a timeout and were handed back to the job queue for a later attempt.",
		}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "playhead", Subsystem: "ingest", Name: "download_duration_seconds",
			Help:    "Time one download attempt took.",
			Buckets: []float64{0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800},
		}),
	}
	reg.MustRegister(m.downloads, m.bytes, m.retries, m.duration)
	return m
}

func (m *Metrics) download(err error, n int64, d time.Duration) {
	if m == nil {
		return
	}
	outcome := "ok"
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		outcome = "cancelled"
	case err != nil && IsPermanent(err):
		outcome = "rejected"
	case err != nil:
		outcome = "failed"
	default:
		m.bytes.Add(float64(n))
	}
	m.downloads.WithLabelValues(outcome).Inc()
	m.duration.Observe(d.Seconds())
}

func (m *Metrics) retry() {
	if m != nil {
		m.retries.Inc()
	}
}
