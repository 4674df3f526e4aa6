package webhooks

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/egress"
)

// Metrics are the webhook figures. A nil *Metrics records nothing.
type Metrics struct {
	attempts *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// The outcomes of one delivery attempt, the values of the outcome label.
const (
	outcomeDelivered   = "delivered"   // a 2xx answer
	outcomeRejected    = "rejected"    // any other answer
	outcomeUnreachable = "unreachable" // no answer: connection error or timeout
	outcomeRefused     = "refused"     // the address is not allowed (egress policy)
)

// NewMetrics creates the delivery metrics, and a collector that reads the age of the oldest
// undelivered event from pool's database at scrape time, and registers them with reg.
func NewMetrics(reg prometheus.Registerer, pool *pgxpool.Pool) *Metrics {
	m := &Metrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "playhead", Subsystem: "webhook", Name: "attempts_total",
			Help: "Webhook delivery attempts made by this node, by outcome: delivered (2xx), rejected (another status), unreachable (connection error or timeout), refused (address not allowed).",
		}, []string{"outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "playhead", Subsystem: "webhook", Name: "attempt_duration_seconds",
			Help:    "Time from sending a webhook to the receiver's answer (or the failure), by outcome.",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15},
		}, []string{"outcome"}),
	}
	// Every outcome's series exists from the start, at 0: rate() sees the first increase too.
	for _, o := range []string{outcomeDelivered, outcomeRejected, outcomeUnreachable, outcomeRefused} {
		m.attempts.WithLabelValues(o)
		m.duration.WithLabelValues(o)
	}
	reg.MustRegister(m.attempts, m.duration, oldestCollector{pool: pool})
	return m
}

func (m *Metrics) attempt(err error, d time.Duration) {
	if m == nil {
		return
	}
	outcome := outcomeDelivered
	switch {
	case errors.Is(err, egress.ErrForbiddenAddress):
		outcome = outcomeRefused
	case errors.Is(err, errRejected):
		outcome = outcomeRejected
	case err != nil:
		outcome = outcomeUnreachable
	}
	m.attempts.WithLabelValues(outcome).Inc()
	m.duration.WithLabelValues(outcome).Observe(d.Seconds())
}

var descOldest = prometheus.NewDesc("playhead_webhook_oldest_undelivered_age_seconds",
	"Age of the oldest event not yet delivered to an endpoint that should get it (0 when none): deliveries waiting or queued, and outbox rows not yet relayed while endpoints exist. Cluster-wide; a DEAD delivery no longer counts.", nil, nil)

// oldestCollector reads the oldest undelivered event's age at scrape time.
type oldestCollector struct{ pool *pgxpool.Pool }

func (c oldestCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descOldest }

func (c oldestCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var age float64
	err := c.pool.QueryRow(ctx, `
		SELECT coalesce(extract(epoch FROM statement_timestamp() - least(
		    (SELECT min(event_at) FROM webhook_deliveries WHERE status IN ('WAITING', 'QUEUED')),
		    (SELECT min(created_at) FROM notification_outbox WHERE relayed_at IS NULL AND EXISTS (SELECT 1 FROM webhook_endpoints))
		)), 0)::float8`).Scan(&age)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descOldest, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(descOldest, prometheus.GaugeValue, age)
}
