package mediadelete

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the deletion job's counters.
type Metrics struct {
	deletions prometheus.Counter
	objects   prometheus.Counter
}

// NewMetrics registers the deletion counters with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		deletions: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "playhead", Subsystem: "media", Name: "deletions_total",
			Help: "Media whose deletion job finished: objects and rows removed, the media row last."}),
		objects: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "playhead", Subsystem: "media", Name: "deleted_objects_total",
			Help: "Objects removed from the object store by deletion jobs (renditions, pictures, captions, sources, resumable uploads' bytes)."}),
	}
	reg.MustRegister(m.deletions, m.objects)
	return m
}
