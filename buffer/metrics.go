package buffer

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are a buffer's Prometheus figures, named playhead_<name>_buffer_*.
type Metrics struct {
	offered, dropped, coalesced prometheus.Counter
	flushFailures, flushedRows  prometheus.Counter
	flushDuration, flushRows    prometheus.Histogram
	capacity                    prometheus.Gauge
	// depth and heldKeys are set by New to read the buffer at scrape time.
	depth, heldKeys func() float64
}

// NewMetrics creates a buffer's metrics and registers them with reg. name is the buffer's
// role, such as "playback".
func NewMetrics(reg prometheus.Registerer, name string) *Metrics {
	sub := name + "_buffer"
	opts := func(n, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: "playhead", Subsystem: sub, Name: n, Help: help}
	}
	m := &Metrics{
		offered:       prometheus.NewCounter(prometheus.CounterOpts(opts("offered_total", "Entries accepted into the buffer."))),
		dropped:       prometheus.NewCounter(prometheus.CounterOpts(opts("dropped_total", "Entries dropped because the buffer was full."))),
		coalesced:     prometheus.NewCounter(prometheus.CounterOpts(opts("coalesced_total", "Entries merged into a newer entry for the same key before a flush."))),
		flushFailures: prometheus.NewCounter(prometheus.CounterOpts(opts("flush_failures_total", "Flushes that failed; their entries were dropped."))),
		flushedRows:   prometheus.NewCounter(prometheus.CounterOpts(opts("flushed_rows_total", "Rows handed to successful flushes."))),
		flushDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "playhead", Subsystem: sub, Name: "flush_duration_seconds",
			Help:    "Time one flush took, successful or not.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		flushRows: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "playhead", Subsystem: sub, Name: "flush_rows",
			Help:    "Rows (distinct keys) in one flush.",
			Buckets: []float64{1, 10, 50, 100, 250, 500, 1000, 2500, 5000, 10000},
		}),
		capacity: prometheus.NewGauge(prometheus.GaugeOpts(opts("capacity", "Entries the buffer's channel can hold."))),
	}
	depth := prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts("depth", "Entries waiting in the buffer's channel.")), func() float64 {
		if m.depth == nil {
			return 0
		}
		return m.depth()
	})
	held := prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts("held_keys", "Distinct keys the flusher holds for its next flush (received from the channel, coalesced, not yet written).")), func() float64 {
		if m.heldKeys == nil {
			return 0
		}
		return m.heldKeys()
	})
	reg.MustRegister(m.offered, m.dropped, m.coalesced, m.flushFailures, m.flushedRows,
		m.flushDuration, m.flushRows, m.capacity, depth, held)
	return m
}
