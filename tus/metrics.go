package tus

import "github.com/prometheus/client_golang/prometheus"

// Metrics counts the resumable uploads of a node.
type Metrics struct {
	created, resumed, resumedWrites, finished, expired, terminated prometheus.Counter
	bytes                                                          prometheus.Counter
	// tailWritten and tailRead count the bytes of tail pieces written to and read from
	// PostgreSQL (rows; a piece object's bytes are the store's); rateLimited the requests
	// refused by Config.RateLimit.
	tailWritten, tailRead, rateLimited prometheus.Counter
	// writing is a gauge: PATCH bodies being stored now.
	writing prometheus.Gauge
}

// NewMetrics registers the uploads' metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "playhead", Subsystem: "tus", Name: name, Help: help})
	}
	m := &Metrics{
		created: counter("uploads_created_total", "Resumable uploads created (POST /v1/uploads)."),
		resumed: counter("uploads_resumed_total",
			"Resumptions: HEADs of an unfinished upload, which a client sends to learn where to go on (after a dropped connection, a pause or a reload)."),
		resumedWrites: counter("resumed_writes_total", "PATCHes that continued an upload from an offset past 0."),
		finished:      counter("uploads_finished_total", "Resumable uploads whose last byte arrived and that became media (with their encode job)."),
		expired:       counter("uploads_expired_total", "Unfinished resumable uploads removed after PLAYHEAD_UPLOAD_EXPIRY without a byte, with their stored bytes."),
		terminated:    counter("uploads_terminated_total", "Unfinished resumable uploads their member removed (DELETE)."),
		bytes:         counter("bytes_received_total", "Bytes of resumable uploads stored (counted when recorded in the upload's offset)."),
		tailWritten: counter("tail_bytes_written_total",
			"Bytes written to PostgreSQL as upload tails (what a request brought past its upload's last whole part), merges included."),
		tailRead: counter("tail_bytes_read_total", "Bytes of upload tails read back from PostgreSQL, to be stored in a part or merged."),
		rateLimited: counter("rate_limited_total",
			"Resumable-upload requests (POST, PATCH, DELETE) refused with 429 because a member sent more than PLAYHEAD_UPLOAD_RATE/BURST."),
		writing: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "playhead", Subsystem: "tus", Name: "writes_in_progress",
			Help: "PATCH bodies being stored now: requests past their upload's checks (owner, expiry, offset), reading their body."}),
	}
	reg.MustRegister(m.created, m.resumed, m.resumedWrites, m.finished, m.expired, m.terminated, m.bytes, m.writing,
		m.tailWritten, m.tailRead, m.rateLimited)
	return m
}
