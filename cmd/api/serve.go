package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/playhead/playhead/buffer"
	"github.com/playhead/playhead/dbpool"
	"github.com/playhead/playhead/encodejobs"
	"github.com/playhead/playhead/events"
	"github.com/playhead/playhead/httpserver"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/lifecycle"
	"github.com/playhead/playhead/notify"
	"github.com/playhead/playhead/playback"
	"github.com/playhead/playhead/storage"
	"github.com/playhead/playhead/tus"
	"github.com/playhead/playhead/webhooks"
)

func runServe(ctx context.Context, args []string) error {
	cfg, err := loadConfig(args)
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	if err != nil {
		return fmt.Errorf("configuration:\n%w", err)
	}
	logger := newLogger(cfg.LogLevel)
	slog.SetDefault(logger)
	return serve(ctx, cfg, logger)
}

// serve runs the node until ctx is cancelled (SIGTERM or SIGINT) or a server fails, then
// stops it (node.shutdown). Every position answered 204 before the signal is in the database,
// or in a spill file that the next start replays, when serve returns nil.
func serve(ctx context.Context, cfg Config, logger *slog.Logger) error {
	n, err := build(ctx, cfg, logger)
	if err != nil {
		return err
	}
	return n.run(ctx)
}

// node is everything one process runs: what build opened (listening ports, pools) and the
// ordered list of services that run starts and shutdown stops.
type node struct {
	cfg    Config
	logger *slog.Logger
	reg    metricRegistry
	health *httpserver.Health

	// services start in this order and stop in reverse, all through shutdown.
	services []service
	// servers are the HTTP services among them, watched for serve errors.
	servers []*httpserver.Service
	// closers run after every service has stopped (the pools), in order.
	closers []func()

	metricsLn net.Listener
	httpLn    net.Listener // nil on a worker
	// ready is set once every service started (readiness may answer 200): only then can a load
	// balancer be sending to this node, and only then does a stop wait for it to notice.
	ready bool

	// requests is every public request's context: the public server's stop cancels it once
	// in-flight requests have had half of the budget (httpserver.BoundRequests).
	requests       context.Context
	cancelRequests context.CancelFunc
	// stopDeadline is the end of the stop's budget, set when shutdown begins: closing the
	// pools waits for their connections only until then (closePool).
	stopDeadline time.Time

	pool           *pgxpool.Pool
	sessionPool    *pgxpool.Pool // n.pool, or its own on PLAYHEAD_DATABASE_DIRECT_URL (openSessionPool)
	queue          *jobqueue.Queue
	eventStreams   *events.Hub                                     // nil on a worker
	playbackBuffer *buffer.Buffer[playback.Key, playback.Position] // nil on a worker or in sync mode
	uploadMetrics  *tus.Metrics                                    // tusMetrics
}

// metricRegistry is what a node's components register their metrics with and what its
// /metrics gathers from: a *prometheus.Registry, or for the metric reference (docs_test.go) one
// that also keeps the collectors, to describe the labelled families that have no series yet.
type metricRegistry interface {
	prometheus.Registerer
	prometheus.Gatherer
}

type service struct {
	name string
	lifecycle.Service
}

func (n *node) add(name string, s lifecycle.Service) {
	n.services = append(n.services, service{name, s})
}

// build opens the listening ports first (so a busy port is an error before anything starts),
// then the pools, the schema and every component, and lists the services in start order:
//
//	metrics server, job runners, rescuer, pruner, orphan sweep, media cache, playback buffer,
//	rate-limit sweeper, notification listener, public server, event streams
//
// so that shutdown stops them in the design's order: the event streams end (clients reconnect
// elsewhere with Last-Event-ID), the public server finishes in-flight
// requests, the buffer drains and flushes, the runners give their claims back, the metrics
// server (with /readyz answering 503 all along) goes last. Nothing is started here; on an
// error, build closes what it opened.
func build(ctx context.Context, cfg Config, logger *slog.Logger) (*node, error) {
	return buildWithRegistry(ctx, cfg, logger, prometheus.NewRegistry())
}

// buildWithRegistry is build with the registry the node's metrics go to.
func buildWithRegistry(ctx context.Context, cfg Config, logger *slog.Logger, reg metricRegistry) (_ *node, err error) {
	// n is not the named result: every error return sets that to nil, and n must still close.
	n := &node{cfg: cfg, logger: logger, reg: reg}
	n.requests, n.cancelRequests = context.WithCancel(context.Background())
	n.closers = append(n.closers, n.cancelRequests)
	defer func() {
		if err != nil {
			n.closeAll()
		}
	}()
	n.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if cfg.Role != roleWorker {
		if n.httpLn, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
			return nil, fmt.Errorf("PLAYHEAD_HTTP_ADDR: %w", err)
		}
		n.closers = append(n.closers, func() { _ = n.httpLn.Close() })
	}
	if n.metricsLn, err = net.Listen("tcp", cfg.MetricsAddr); err != nil {
		return nil, fmt.Errorf("PLAYHEAD_METRICS_ADDR: %w", err)
	}
	n.closers = append(n.closers, func() { _ = n.metricsLn.Close() })

	if n.pool, err = dbpool.Open(ctx, cfg.DatabaseURL, poolConns(cfg), n.reg, poolOptions(cfg)...); err != nil {
		return nil, err
	}
	n.closers = append(n.closers, func() { n.closePool(n.pool) })
	if err := dbpool.WaitReachable(ctx, n.pool, "DATABASE_URL", logger); err != nil {
		return nil, err
	}
	if n.sessionPool, err = n.openSessionPool(ctx); err != nil {
		return nil, err
	}
	// The direct URL is checked too: a node that cannot reach it would answer ready while its
	// LISTEN (cache invalidation from other nodes) and its progress reads fail for ever.
	if n.sessionPool != n.pool {
		if err := dbpool.WaitReachable(ctx, n.sessionPool, "PLAYHEAD_DATABASE_DIRECT_URL", logger); err != nil {
			return nil, err
		}
	}
	if cfg.Role == roleAll {
		if err := migrate(ctx, n.sessionPool, func(msg string) { logger.Info(msg) }); err != nil {
			return nil, err
		}
	}
	n.health = httpserver.NewHealth(n.pool.Ping, logger)
	metricsServer := httpserver.NewHTTPService("metrics", &http.Server{Handler: n.health.MetricsHandler(n.reg), ReadHeaderTimeout: 5 * time.Second}, n.metricsLn)
	n.servers = append(n.servers, metricsServer)
	n.add("metrics server", metricsServer)

	store, storeOrigin, err := openStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	listener := notify.NewListener(cfg.DatabaseDirectURL, logger)
	if cfg.Role == roleAPI {
		// The admin retry needs every kind's hooks, not their runners.
		n.queue, err = jobqueue.NewQueue(n.pool, cfg.JobLease, kindHooks(cfg)...)
	} else {
		err = n.buildWorker(store, listener)
	}
	if err != nil {
		return nil, err
	}
	var public *fiber.App
	if cfg.Role != roleWorker {
		if public, err = n.buildAPI(ctx, store, storeOrigin, listener); err != nil {
			return nil, err
		}
	}
	// The listener starts after the cache and the runners it dispatches to, and stops before.
	// A notification missed while it is down is made good on reconnect (the cache clears, the
	// runners poll).
	n.add("notification listener", listener)
	if public != nil {
		publicServer := httpserver.NewAppService("public", public, n.httpLn)
		n.servers = append(n.servers, publicServer)
		n.add("public server", httpserver.BoundRequests{Service: publicServer, Cancel: n.cancelRequests})
		// Listed after the public server so that it stops first: the server waits for every
		// connection to end, and a stream ends only when told.
		n.add("event streams", n.eventStreams)
	}
	return n, nil
}

// run starts the services in order and waits for a signal or a server error; on every way
// out — those two and a failed start-up — it stops the node through shutdown.
func (n *node) run(ctx context.Context) error {
	var group lifecycle.Group
	for _, s := range n.services {
		group.Add(s.name, s.Service)
	}
	cause := group.Start(ctx)
	if cause == nil {
		n.health.SetStarted()
		n.ready = true
		n.logger.Info("serving", "role", n.cfg.Role, "node", n.cfg.NodeID, "http", addr(n.httpLn),
			"metrics", addr(n.metricsLn), "write_mode", n.cfg.WriteMode)
		cause = n.wait(ctx)
	}
	if cause != nil {
		n.logger.Error("stopping after a failure", "err", cause)
	}
	if err := n.shutdown(&group); err != nil {
		return errors.Join(cause, err)
	}
	return cause
}

// wait returns nil when ctx is cancelled (a signal), or the first server error.
func (n *node) wait(ctx context.Context) error {
	errs := make(chan error, len(n.servers))
	stop := make(chan struct{})
	defer close(stop)
	for _, s := range n.servers {
		go func() {
			select {
			case err := <-s.Err():
				errs <- err
			case <-stop:
			}
		}()
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-errs:
		return err
	}
}

// shutdown is the one way a node stops: readiness fails, a node with a public port keeps
// serving for PLAYHEAD_SHUTDOWN_DRAIN_DELAY (a load balancer's health checks see the 503 and
// stop sending before the port closes), every service stops in reverse start order within
// what is left of PLAYHEAD_SHUTDOWN_TIMEOUT (also those never started: their Stop is a no-op),
// then the pools close.
func (n *node) shutdown(group *lifecycle.Group) error {
	n.logger.Info("stopping", "budget", n.cfg.ShutdownTimeout.String(), "drain_delay", n.cfg.ShutdownDrainDelay.String())
	n.health.SetDraining()
	n.stopDeadline = time.Now().Add(n.cfg.ShutdownTimeout)
	if n.ready && n.httpLn != nil && n.cfg.ShutdownDrainDelay > 0 {
		time.Sleep(n.cfg.ShutdownDrainDelay)
	}
	stopCtx, cancel := context.WithDeadline(context.Background(), n.stopDeadline)
	defer cancel()
	err := group.Stop(stopCtx)
	n.closeAll()
	if err != nil {
		return err
	}
	n.logger.Info("stopped cleanly")
	return nil
}

// closePool closes pool, waiting for its connections at most until the stop's deadline once a
// stop began (dbpool.CloseBy).
func (n *node) closePool(pool *pgxpool.Pool) { dbpool.CloseBy(pool, n.stopDeadline, n.logger) }

// closeAll closes what build opened, last opened first.
func (n *node) closeAll() {
	for i := len(n.closers) - 1; i >= 0; i-- {
		n.closers[i]()
	}
	n.closers = nil
}

func addr(ln net.Listener) string {
	if ln == nil {
		return ""
	}
	return ln.Addr().String()
}

// poolConns is the request pool's size.
func poolConns(cfg Config) int32 {
	switch {
	case cfg.DBMaxConns > 0:
		return int32(cfg.DBMaxConns)
	case cfg.Role == roleWorker:
		// A connection per running job (heartbeats, finishes), two for the claims, the rescuer,
		// the pruner and the periodic scheduler, which are short, two for the orphan sweep (its
		// lock's session and its queries), and one for the webhook relay.
		return int32(jobConcurrency(cfg) + 5)
	default:
		// HikariCP's default, which the seed's measurements used; pgx's own default,
		// max(4, CPUs), queues synchronous requests on a 2-core machine.
		return defaultAPIPoolConns
	}
}

// tokenCacheItems bounds the verified-token cache: one entry per active player (about 250
// bytes each), so 200 000 players fit in ~50 MiB.
const tokenCacheItems = 200_000

// defaultAPIPoolConns is the request pool's size on api and all nodes when
// PLAYHEAD_DB_MAX_CONNS is 0.
const defaultAPIPoolConns = 10

// publicWriteTimeout bounds writing one answer to a client (an event stream: each write).
const publicWriteTimeout = 30 * time.Second

// flushPoolConns is the size of the playback flusher's own pool. The flusher is one goroutine;
// the second connection lets a flush start while the first one's connection is being reset.
const flushPoolConns = 2

// readPoolConns is the size of the pool the progress reads use (the continue-watching list, a
// collection with progress, the started collections). They get their own pool so that they
// plan their statements once per connection (see dbpool.OpenGenericPlans) and so that a burst
// of them cannot queue players opening videos in the request pool. Four are enough for reads
// of about a millisecond each; more would only let more of them compete for the CPU. The
// setting belongs to the session, so this pool connects with PLAYHEAD_DATABASE_DIRECT_URL: four
// direct connections per API node, past a transaction pooler.
const readPoolConns = 4

// buildWorker builds the queue with every kind of jobKinds and lists one runner per kind (each
// with its own concurrency: downloads are limited by the remote end, encodes by this machine's
// cores, deliveries by the receivers), the webhook relay, the node's one rescuer and its
// pruner.
func (n *node) buildWorker(store storage.Store, listener *notify.Listener) error {
	cfg := n.cfg
	kinds := make([]jobqueue.Kind, len(jobKinds))
	for i, k := range jobKinds {
		var err error
		if kinds[i], err = k.worker(workerParts{node: n, store: store}); err != nil {
			return fmt.Errorf("job kind %s: %w", k.name, err)
		}
		kinds[i] = k.limited(cfg, kinds[i])
	}
	var err error
	n.queue, err = jobqueue.NewQueue(n.pool, cfg.JobLease, kinds...)
	if err != nil {
		return err
	}
	metrics := jobqueue.NewMetrics(n.reg, n.queue)
	runners := map[string]*jobqueue.Runner{}
	for _, k := range jobKinds {
		r, err := jobqueue.NewRunner(n.queue, jobqueue.RunnerConfig{
			Kind:         k.name,
			Node:         cfg.NodeID,
			Concurrency:  k.concurrency(cfg),
			PollInterval: cfg.JobPollInterval,
			RetryBase:    cfg.JobRetryBase,
			RetryCap:     k.retryCap(cfg),
			Logger:       n.logger,
			Metrics:      metrics,
		})
		if err != nil {
			return err
		}
		runners[k.name] = r
		n.add(k.name+" runner", r)
	}
	n.addWebhookRelay(listener)
	n.addCompletionMover()
	n.addXAPIRelay(listener)
	n.add("job rescuer", jobqueue.NewRescuer(n.queue, jobqueue.RescuerConfig{Interval: 5 * cfg.JobPollInterval, Logger: n.logger, Metrics: metrics}))
	// Enqueues the run times of the kinds that set Periodic, on every worker node: the cluster
	// enqueues each run time once (jobqueue.Scheduler).
	n.add("job scheduler", jobqueue.NewScheduler(n.queue, jobqueue.SchedulerConfig{Logger: n.logger, Metrics: metrics}))
	n.add("job pruner", jobqueue.NewPruner(n.queue, jobqueue.PrunerConfig{
		CompletedAfter: cfg.RetentionCompleted, DeadAfter: cfg.RetentionDead, Interval: cfg.RetentionInterval, Logger: n.logger,
	}))
	history, err := webhooks.NewRetention(n.pool, webhooks.RetentionConfig{
		KeepFor: cfg.OutboxRetention, Interval: cfg.RetentionInterval, Metrics: n.reg, Logger: n.logger,
	})
	if err != nil {
		return err
	}
	n.add("event history retention", history)
	orphans, err := storage.NewSweeper(storage.SweepConfig{
		Store:       store,
		Rules:       append(encodejobs.OrphanRules(n.pool), tus.OrphanRule(n.pool)),
		Grace:       cfg.OrphanGrace,
		Interval:    cfg.OrphanSweepInterval,
		PassObjects: cfg.OrphanSweepBatch,
		Lock:        encodejobs.OrphanSweepLock(n.sessionPool),
		Logger:      n.logger,
		Metrics:     storage.NewSweepMetrics(n.reg),
	})
	if err != nil {
		return err
	}
	n.add("orphan sweep", orphans)
	if err := n.buildUploadExpiry(store); err != nil {
		return err
	}
	listener.Handle(jobqueue.Channel, func(kind string) {
		if r, ok := runners[kind]; ok {
			r.Wake()
		}
	}, func() {
		for _, r := range runners { // notifications may have been missed while disconnected
			r.Wake()
		}
	})
	return nil
}
