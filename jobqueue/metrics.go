package jobqueue

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the queue's Prometheus figures. A nil *Metrics records nothing.
type Metrics struct {
	claims   *prometheus.CounterVec
	outcomes *prometheus.CounterVec
	duration *prometheus.HistogramVec
	enqueued *prometheus.CounterVec
	skipped  *prometheus.CounterVec
}

// outcomes are the ways a claimed job ends, the values of the outcome label.
var outcomes = []string{"completed", "retried", "dead", "released", "claim_lost", "error"}

// NewMetrics creates the runner metrics, plus collectors that read jobs by status and the
// oldest due pending job from q's database at scrape time, and registers them with reg. The
// kinds are q's registered kinds; their series start at zero, so that rate() sees their first
// increase too.
func NewMetrics(reg prometheus.Registerer, q *Queue) *Metrics {
	kinds := q.Kinds()
	m := &Metrics{
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "playhead", Subsystem: "jobs", Name: "claimed_total",
			Help: "Jobs claimed by this node, by kind.",
		}, []string{"kind"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "playhead", Subsystem: "jobs", Name: "outcomes_total",
			Help: "How claimed jobs ended on this node: completed, retried, dead, released, claim_lost or error.",
		}, []string{"kind", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "playhead", Subsystem: "jobs", Name: "duration_seconds",
			Help:    "Time from claim to the end of a job's run, by kind and outcome.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800},
		}, []string{"kind", "outcome"}),
		enqueued: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "playhead", Subsystem: "jobs", Name: "scheduled_total",
			Help: "Jobs of periodic kinds this node enqueued, one per run time, by kind.",
		}, []string{"kind"}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "playhead", Subsystem: "jobs", Name: "schedule_skipped_total",
			Help: "Run times of periodic kinds missed while no node enqueued them (only the latest runs), by kind.",
		}, []string{"kind"}),
	}
	for _, k := range kinds {
		m.claims.WithLabelValues(k)
		for _, o := range outcomes {
			m.outcomes.WithLabelValues(k, o)
		}
		if q.kinds.kinds[k].Periodic != nil {
			m.enqueued.WithLabelValues(k)
			m.skipped.WithLabelValues(k)
		}
	}
	reg.MustRegister(m.claims, m.outcomes, m.duration, m.enqueued, m.skipped, queueCollector{q: q})
	return m
}

func (m *Metrics) claimed(kind string) {
	if m != nil {
		m.claims.WithLabelValues(kind).Inc()
	}
}

func (m *Metrics) scheduled(kind string, skipped int64) {
	if m != nil {
		m.enqueued.WithLabelValues(kind).Inc()
		m.skipped.WithLabelValues(kind).Add(float64(skipped))
	}
}

func (m *Metrics) observe(kind, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.outcomes.WithLabelValues(kind, outcome).Inc()
	if d > 0 {
		m.duration.WithLabelValues(kind, outcome).Observe(d.Seconds())
	}
}

var (
	descByStatus = prometheus.NewDesc("playhead_jobs", "Jobs in the queue table, by kind and status.", []string{"kind", "status"}, nil)
	descOldest   = prometheus.NewDesc("playhead_jobs_oldest_pending_age_seconds",
		"Age of the oldest PENDING job that is due (0 when none), by kind.", []string{"kind"}, nil)
	descPaused = prometheus.NewDesc("playhead_jobs_paused",
		"1 while the kind is paused (no node claims its jobs), else 0, by kind.", []string{"kind"}, nil)
	descRunning = prometheus.NewDesc("playhead_jobs_running",
		"Jobs PROCESSING with a live lease on any node, what a kind's cluster-wide limit counts, by kind.", []string{"kind"}, nil)
	descMaxRunning = prometheus.NewDesc("playhead_jobs_max_running",
		"The kind's cluster-wide limit of running jobs as this node has it (0: none), by kind.", []string{"kind"}, nil)
)

// queueCollector reads the queue's state for its kinds from the database at scrape time.
// Every node reports the same cluster-wide figures; dashboards take max() across instances.
type queueCollector struct {
	q *Queue
}

func (c queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descByStatus
	ch <- descOldest
	ch <- descPaused
	ch <- descRunning
	ch <- descMaxRunning
}

func (c queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	counts, err := c.q.Counts(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descByStatus, err)
		return
	}
	for _, n := range counts {
		ch <- prometheus.MustNewConstMetric(descByStatus, prometheus.GaugeValue, float64(n.Jobs), n.Kind, string(n.Status))
	}

	rows, err := c.q.pool.Query(ctx, `
		SELECT k.kind, coalesce(extract(epoch FROM statement_timestamp() - min(j.available_at)), 0)
		FROM unnest($1::text[]) k(kind)
		LEFT JOIN jobs j ON j.kind = k.kind AND j.status = 'PENDING' AND j.available_at <= statement_timestamp()
		GROUP BY k.kind`, c.q.kinds.names)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descOldest, err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var kind string
		var age float64
		if err := rows.Scan(&kind, &age); err != nil {
			ch <- prometheus.NewInvalidMetric(descOldest, err)
			return
		}
		ch <- prometheus.MustNewConstMetric(descOldest, prometheus.GaugeValue, age, kind)
	}
	if err := rows.Err(); err != nil {
		ch <- prometheus.NewInvalidMetric(descOldest, err)
	}
	c.collectControls(ctx, ch)
}

// collectControls reports each kind's pause and its running jobs beside its limit. The running
// count reads the PROCESSING index led by the kind: as cheap as the claim's own scan of it.
func (c queueCollector) collectControls(ctx context.Context, ch chan<- prometheus.Metric) {
	rows, err := c.q.pool.Query(ctx, `
		SELECT k.kind, p.kind IS NOT NULL,
		       (SELECT count(*) FROM jobs j WHERE j.kind = k.kind AND j.status = 'PROCESSING' AND j.lease_until > statement_timestamp())
		FROM unnest($1::text[]) k(kind) LEFT JOIN job_kind_pauses p ON p.kind = k.kind`, c.q.kinds.names)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descPaused, err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var kind string
		var paused bool
		var running float64
		if err := rows.Scan(&kind, &paused, &running); err != nil {
			ch <- prometheus.NewInvalidMetric(descPaused, err)
			return
		}
		var pausedValue float64
		if paused {
			pausedValue = 1
		}
		ch <- prometheus.MustNewConstMetric(descPaused, prometheus.GaugeValue, pausedValue, kind)
		ch <- prometheus.MustNewConstMetric(descRunning, prometheus.GaugeValue, running, kind)
		ch <- prometheus.MustNewConstMetric(descMaxRunning, prometheus.GaugeValue, float64(c.q.kinds.kinds[kind].MaxRunning), kind)
	}
	if err := rows.Err(); err != nil {
		ch <- prometheus.NewInvalidMetric(descPaused, err)
	}
}
