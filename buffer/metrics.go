package buffer

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are a buffer's Prometheus figures, named playhead_<name>_buffer_*.
type Metrics struct {
	offered, coalesced         prometheus.Counter
	flushFailures, flushedRows prometheus.Counter
	flushDuration, flushRows   prometheus.Histogram
	capacity, maxKeys          prometheus.Gauge
	// depth and stats are set by New to read the buffer at scrape time.
	depth func() float64
	stats func() Stats
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
		coalesced:     prometheus.NewCounter(prometheus.CounterOpts(opts("coalesced_total", "Entries that replaced (or lost to) a held entry for the same key before a flush."))),
		flushFailures: prometheus.NewCounter(prometheus.CounterOpts(opts("flush_failures_total", "Calls of the flush function that failed; their entries are kept and retried (or, when the database rejected the data, split)."))),
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
		maxKeys:  prometheus.NewGauge(prometheus.GaugeOpts(opts("max_keys", "Distinct keys the buffer may hold before it drops new ones."))),
	}
	stat := func(read func(Stats) float64) func() float64 {
		return func() float64 {
			if m.stats == nil {
				return 0
			}
			return read(m.stats())
		}
	}
	gauge := func(n, help string, read func(Stats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts(n, help)), stat(read))
	}
	counter := func(n, help string, labels prometheus.Labels, read func(Stats) float64) prometheus.Collector {
		o := prometheus.CounterOpts(opts(n, help))
		o.ConstLabels = labels
		return prometheus.NewCounterFunc(o, stat(read))
	}
	collectors := []prometheus.Collector{m.offered, m.coalesced, m.flushFailures, m.flushedRows,
		m.flushDuration, m.flushRows, m.capacity, m.maxKeys,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts("depth", "New keys waiting in the buffer's channel for the flusher.")), func() float64 {
			if m.depth == nil {
				return 0
			}
			return m.depth()
		}),
		gauge("held_keys", "Distinct keys the flusher holds: received, not yet written (held for retry included).",
			func(s Stats) float64 { return float64(s.HeldKeys) }),
		gauge("retry_held_keys", "Keys held since a flush round failed (the database was away or refused): waiting for a retry.",
			func(s Stats) float64 { return float64(s.HeldForRetry) }),
		gauge("retry_oldest_age_seconds", "How long the oldest key held for retry has waited since its first failed flush round; 0 when none is.",
			func(s Stats) float64 { return s.OldestHeldForRetrySeconds }),
		counter("retries_total", "Flush rounds retried after a failed one.", nil,
			func(s Stats) float64 { return float64(s.Retries) }),
		counter("replayed_rows_total", "Rows written from spill files at start.", nil,
			func(s Stats) float64 { return float64(s.Replayed) }),
		counter("corrupt_spill_files_total", "Spill files found corrupt or truncated at start and moved aside (*.corrupt).", nil,
			func(s Stats) float64 { return float64(s.CorruptSpills) }),
	}
	for _, reason := range lostReasonNames {
		collectors = append(collectors, counter("lost_total",
			"Accepted entries never written, by reason: full (dropped at the bound), bad_row (rejected by the database on its own), spill_failed (not written before the stop deadline and not spilled).",
			prometheus.Labels{"reason": reason}, func(s Stats) float64 { return float64(s.Lost[reason]) }))
	}
	reg.MustRegister(collectors...)
	return m
}
