// Package dbpool opens Playhead's pgx pool and exposes its figures to Prometheus with
// conventional names (seconds, _total counters), which the ecosystem's ready-made pgxpool
// collectors do not.
package dbpool

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// Option adjusts a pool's configuration before it opens.
type Option func(*pgxpool.Config)

// ThroughTransactionPooler configures a pool whose connection string points at a connection
// pooler in transaction mode (PgBouncer's pool_mode = transaction): each transaction may run
// on a different server session, so nothing may outlive one. pgx's default exec mode prepares
// named statements once per session and reuses them, which such a pooler breaks (PgBouncer
// before 1.21 forwards no prepared statement between sessions). QueryExecModeCacheDescribe
// sends every statement unnamed, in the same message sequence as its execution, and caches
// only its description on the client: one round trip, binary values, and no server state. Its
// cost: a query whose result columns change under it (a migration altering a table it reads)
// fails once before its description is refreshed. An exec mode chosen in the URL
// (default_query_exec_mode) other than pgx's default is kept.
func ThroughTransactionPooler() Option {
	return func(cfg *pgxpool.Config) {
		if cfg.ConnConfig.DefaultQueryExecMode == pgx.QueryExecModeCacheStatement {
			cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
		}
	}
}

// Open parses connString, applies maxConns when positive and then opts, and returns a pool
// whose acquisitions are timed into the registered metrics. It does not wait for the database.
func Open(ctx context.Context, connString string, maxConns int32, reg prometheus.Registerer, opts ...Option) (*pgxpool.Pool, error) {
	cfg, err := parse(connString, maxConns)
	if err != nil {
		return nil, err
	}
	for _, opt := range opts {
		opt(cfg)
	}
	return open(ctx, cfg, reg)
}

// OpenGenericPlans is Open for a pool whose sessions plan every prepared statement once, for
// any parameters (plan_cache_mode = force_generic_plan). It is for statements that cost more
// to plan than to run: by default PostgreSQL plans a prepared statement afresh for its first
// five executions on each connection, and again after every invalidation (an ANALYZE of a
// table it reads), before it settles on the generic plan. A statement whose generic plan is
// as good as its custom ones (index probes keyed by its parameters, checked by a plan test)
// loses nothing by skipping them. The setting belongs to the session, so connString must reach
// PostgreSQL directly or through a pooler in session mode (PgBouncer in transaction mode
// refuses the startup parameter).
func OpenGenericPlans(ctx context.Context, connString string, maxConns int32) (*pgxpool.Pool, error) {
	cfg, err := parse(connString, maxConns)
	if err != nil {
		return nil, err
	}
	cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	return open(ctx, cfg, nil)
}

func parse(connString string, maxConns int32) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	return cfg, nil
}

func open(ctx context.Context, cfg *pgxpool.Config, reg prometheus.Registerer) (*pgxpool.Pool, error) {
	tracer := &acquireTracer{wait: prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "playhead", Subsystem: "db_pool", Name: "acquire_duration_seconds",
		Help:    "Time to acquire a connection from the pool, including waiting for a free one.",
		Buckets: []float64{0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5},
	})}
	cfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database pool: %w", err)
	}
	if reg != nil {
		reg.MustRegister(tracer.wait, collector{pool: pool})
	}
	return pool, nil
}

// acquireTracer times pool acquisitions (pgxpool.AcquireTracer).
type acquireTracer struct {
	wait prometheus.Histogram
}

type acquireStartKey struct{}

func (t *acquireTracer) TraceAcquireStart(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireStartData) context.Context {
	return context.WithValue(ctx, acquireStartKey{}, time.Now())
}

func (t *acquireTracer) TraceAcquireEnd(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireEndData) {
	if start, ok := ctx.Value(acquireStartKey{}).(time.Time); ok {
		t.wait.Observe(time.Since(start).Seconds())
	}
}

// TraceQueryStart and TraceQueryEnd make acquireTracer a pgx.QueryTracer, which is the
// interface ConnConfig.Tracer is declared as; queries themselves are not traced.
func (t *acquireTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

// TraceQueryEnd does nothing; see TraceQueryStart.
func (t *acquireTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

var (
	descAcquired = prometheus.NewDesc("playhead_db_pool_acquired_conns", "Connections currently in use.", nil, nil)
	descIdle     = prometheus.NewDesc("playhead_db_pool_idle_conns", "Idle connections in the pool.", nil, nil)
	descTotal    = prometheus.NewDesc("playhead_db_pool_total_conns", "Open connections (acquired, idle and being opened).", nil, nil)
	descMax      = prometheus.NewDesc("playhead_db_pool_max_conns", "The pool's connection limit.", nil, nil)
	descAcquires = prometheus.NewDesc("playhead_db_pool_acquires_total", "Successful connection acquisitions.", nil, nil)
	descEmpty    = prometheus.NewDesc("playhead_db_pool_empty_acquires_total", "Acquisitions that had to wait because no connection was idle.", nil, nil)
	descCanceled = prometheus.NewDesc("playhead_db_pool_canceled_acquires_total", "Acquisitions cancelled by their context while waiting.", nil, nil)
	descWaitSum  = prometheus.NewDesc("playhead_db_pool_acquire_wait_seconds_total", "Total time spent acquiring connections.", nil, nil)
)

// collector reads pgxpool.Stat at scrape time.
type collector struct{ pool *pgxpool.Pool }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descAcquired, descIdle, descTotal, descMax, descAcquires, descEmpty, descCanceled, descWaitSum} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	s := c.pool.Stat()
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	gauge(descAcquired, float64(s.AcquiredConns()))
	gauge(descIdle, float64(s.IdleConns()))
	gauge(descTotal, float64(s.TotalConns()))
	gauge(descMax, float64(s.MaxConns()))
	counter(descAcquires, float64(s.AcquireCount()))
	counter(descEmpty, float64(s.EmptyAcquireCount()))
	counter(descCanceled, float64(s.CanceledAcquireCount()))
	counter(descWaitSum, s.AcquireDuration().Seconds())
}
