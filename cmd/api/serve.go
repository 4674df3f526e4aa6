package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/buffer"
	"github.com/playhead/playhead/cache"
	"github.com/playhead/playhead/dbpool"
	"github.com/playhead/playhead/encodejobs"
	"github.com/playhead/playhead/encoder"
	"github.com/playhead/playhead/httpserver"
	"github.com/playhead/playhead/ingest"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/notify"
	"github.com/playhead/playhead/playback"
	"github.com/playhead/playhead/ratelimit"
	"github.com/playhead/playhead/storage"
	"github.com/playhead/playhead/web"
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

// node is everything one process runs, so serve can stop the parts in order.
type node struct {
	cfg      Config
	logger   *slog.Logger
	reg      *prometheus.Registry
	pool     *pgxpool.Pool
	listener *notify.Listener
	health   *httpserver.Health

	app            *fiber.App                                      // nil on a worker
	flushPool      *pgxpool.Pool                                   // nil on a worker
	playbackBuffer *buffer.Buffer[playback.Key, playback.Position] // nil on a worker or in sync mode
	mediaCache     *cache.Cache                                    // nil on a worker
	workers        []*encodejobs.Worker                            // encode and ingest; none on an api node
	queue          *encodejobs.Queue
	limiter        *ratelimit.Limiter // nil when PUTs are not rate limited
}

// serve runs the node until ctx is cancelled (SIGTERM or SIGINT), then stops in the design's
// order: readiness fails, the HTTP server finishes in-flight requests, the playback buffer
// drains and flushes (spilling to PLAYHEAD_SPILL_DIR what the database does not take before
// the deadline), workers give their claims back, the listener and pool close. Every position
// answered 204 before the signal is in the database, or in a spill file that the next start
// replays, when serve returns nil.
func serve(ctx context.Context, cfg Config, logger *slog.Logger) error {
	n := &node{cfg: cfg, logger: logger, reg: prometheus.NewRegistry()}
	n.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	maxConns := int32(cfg.DBMaxConns)
	switch {
	case maxConns > 0:
	case cfg.Role == roleWorker:
		// A worker needs a connection per running job (heartbeats, finishes) and some to claim.
		maxConns = int32(cfg.EncodeConcurrency + cfg.IngestConcurrency + 2)
	default:
		// HikariCP's default, which the seed's measurements used; pgx's own default,
		// max(4, CPUs), queues synchronous requests on a 2-core machine.
		maxConns = defaultAPIPoolConns
	}
	var err error
	n.pool, err = dbpool.Open(ctx, cfg.DatabaseURL, maxConns, n.reg)
	if err != nil {
		return err
	}
	defer n.pool.Close()
	if err := waitForDatabase(ctx, n.pool, logger); err != nil {
		return err
	}
	if cfg.Role == roleAll {
		if err := migrate(ctx, n.pool, func(msg string) { logger.Info(msg) }); err != nil {
			return err
		}
	}
	n.health = httpserver.NewHealth(n.pool.Ping, logger)
	n.listener = notify.NewListener(cfg.DatabaseURL, logger)
	n.queue = encodejobs.NewQueue(n.pool, cfg.JobLease)
	store, err := storage.NewLocal(cfg.StorageDir)
	if err != nil {
		return fmt.Errorf("PLAYHEAD_STORAGE_DIR: %w", err)
	}
	if cfg.Role != roleWorker {
		if err := n.buildAPI(ctx, store); err != nil {
			return err
		}
		defer n.closeAPI() // after stop: the buffer's final flush uses the flush pool
	}
	if cfg.Role != roleAPI {
		if err := n.buildWorker(store); err != nil {
			return err
		}
	}

	background, stopBackground := context.WithCancel(context.Background())
	listenDone := make(chan struct{})
	go func() {
		defer close(listenDone)
		_ = n.listener.Run(background) // returns only when background is cancelled
	}()
	defer func() { stopBackground(); <-listenDone }()
	for _, w := range n.workers {
		w.Start()
	}
	if n.limiter != nil {
		go sweepEvery(background, time.Minute, n.limiter)
	}
	if len(n.workers) > 0 {
		go n.queue.RunRetention(background, cfg.RetentionInterval, cfg.RetentionCompleted, cfg.RetentionDead, logger)
	}

	serveErr := make(chan error, 2)
	var httpAddr string
	if n.app != nil {
		// Listen before serving, so a busy port is an error at start-up, not a log line later.
		ln, err := net.Listen("tcp", cfg.HTTPAddr)
		if err != nil {
			return fmt.Errorf("PLAYHEAD_HTTP_ADDR: %w", err)
		}
		httpAddr = ln.Addr().String()
		go func() { serveErr <- n.app.Listener(ln) }()
	}
	metricsLn, err := net.Listen("tcp", cfg.MetricsAddr)
	if err != nil {
		return fmt.Errorf("PLAYHEAD_METRICS_ADDR: %w", err)
	}
	metricsSrv := &http.Server{Handler: n.health.MetricsHandler(n.reg), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := metricsSrv.Serve(metricsLn); !errors.Is(err, http.ErrServerClosed) {
			serveErr <- err
		}
	}()
	logger.Info("serving", "role", cfg.Role, "node", cfg.NodeID, "http", httpAddr, "metrics", metricsLn.Addr().String(),
		"write_mode", cfg.WriteMode)

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		return fmt.Errorf("server stopped: %w", err)
	}
	return n.stop(metricsSrv)
}

func (n *node) stop(metricsSrv *http.Server) error {
	n.logger.Info("stopping", "budget", n.cfg.ShutdownTimeout.String())
	n.health.SetDraining()
	stopCtx, cancel := context.WithTimeout(context.Background(), n.cfg.ShutdownTimeout)
	defer cancel()
	var errs []error
	if n.app != nil {
		if err := n.app.ShutdownWithContext(stopCtx); err != nil {
			errs = append(errs, fmt.Errorf("http shutdown: %w", err))
		}
	}
	if n.playbackBuffer != nil {
		if err := n.playbackBuffer.Stop(stopCtx); err != nil {
			errs = append(errs, fmt.Errorf("playback buffer stop: %w", err))
		}
	}
	for _, w := range n.workers {
		if err := w.Stop(stopCtx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := metricsSrv.Shutdown(stopCtx); err != nil {
		errs = append(errs, fmt.Errorf("metrics shutdown: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	n.logger.Info("stopped cleanly")
	return nil
}

// tokenCacheItems bounds the verified-token cache: one entry per active player (about 250
// bytes each), so 200 000 players fit in ~50 MiB.
const tokenCacheItems = 200_000

// defaultAPIPoolConns is the request pool's size on api and all nodes when
// PLAYHEAD_DB_MAX_CONNS is 0.
const defaultAPIPoolConns = 10

// objectsPath is where the public app serves encoded outputs (HLS and thumbnails), through
// media.ObjectsHandler. Uploaded sources are never served.
const objectsPath = "/objects/"

// flushPoolConns is the size of the playback flusher's own pool. The flusher is one goroutine;
// the second connection lets a flush start while the first one's connection is being reset.
const flushPoolConns = 2

// buildAPI builds the public app: playback, media, uploads and admin routes.
func (n *node) buildAPI(ctx context.Context, store storage.Store) error {
	cfg := n.cfg
	verifier, err := auth.NewVerifier([]byte(cfg.JWTSecret), tokenCacheItems)
	if err != nil {
		return err
	}
	mediaStore := media.NewStore(n.pool)
	n.mediaCache, err = cache.New(cache.Config{
		MaxItems:    int64(cfg.CacheMaxItems),
		TTL:         cfg.CacheTTL,
		NegativeTTL: cfg.CacheNegativeTTL,
		Load:        mediaStore.LookupAccess,
		Registerer:  n.reg,
	})
	if err != nil {
		return err
	}
	n.listener.Handle(notify.ChannelMediaChanged, n.mediaCache.EvictPayload, n.mediaCache.Clear)

	playbackStore := playback.NewStore(n.pool)
	playbackHandler := &playback.Handler{Store: playbackStore, Access: n.mediaCache, Mode: cfg.WriteMode}
	if cfg.PutRate > 0 {
		playbackHandler.Limit = ratelimit.New(cfg.PutRate, cfg.PutBurst)
		playbackHandler.RateLimited = prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "playhead", Subsystem: "playback", Name: "rate_limited_total",
			Help: "Position reports refused with 429 because a member sent more than PLAYHEAD_PUT_RATE/BURST.",
		})
		n.reg.MustRegister(playbackHandler.RateLimited)
		n.limiter = playbackHandler.Limit
	}
	// The flusher gets its own connections: under a burst of synchronous requests (players
	// opening videos) it must not queue for the request pool while the buffer fills up.
	n.flushPool, err = dbpool.Open(ctx, cfg.DatabaseURL, flushPoolConns, nil)
	if err != nil {
		return err
	}
	if cfg.WriteMode == playback.ModeSync {
		playbackHandler.Access = cache.Direct(mediaStore.LookupAccess)
	} else {
		if err := n.startPlaybackBuffer(ctx); err != nil {
			return err
		}
		playbackHandler.Buffer = n.playbackBuffer
	}

	app := httpserver.New(httpserver.Config{
		BodyLimit:    cfg.MaxBodyBytes,
		ReadTimeout:  cfg.HTTPReadTimeout,
		WriteTimeout: 30 * time.Second,
		IdleTimeout:  cfg.HTTPIdleTimeout,
		Logger:       n.logger,
		Metrics:      httpserver.NewMetrics(n.reg),
	})
	n.health.Register(app)
	// Encoded files need a member who may play the media, like the API: the token comes from
	// the Authorization header or, for the browser's own media requests, the player's cookie.
	(&media.ObjectsHandler{Store: store, Access: n.mediaCache}).Register(app, verifier.MediaMiddleware())
	// The player pages (/, /watch/:id, /static/…) load without a token; their scripts send it.
	pages, err := web.New()
	if err != nil {
		return err
	}
	pages.Register(app)
	// The upload streams its body and enforces its own limit, so it is registered before the
	// group whose LimitBody would read the body into memory.
	upload := &encodejobs.UploadHandler{Pool: n.pool, Store: store, MaxBytes: cfg.MaxUploadBytes,
		IdleTimeout: cfg.UploadIdleTimeout, Timeout: cfg.UploadTimeout,
		MaxPerMember: cfg.UploadsPerMember, MaxTotal: cfg.UploadsTotal, MaxAttempts: cfg.JobMaxAttempts}
	upload.Register(app, verifier.Middleware())
	ingestStore := ingest.NewStore(n.pool, cfg.IngestAttempts)
	imports := &ingest.AdminHandler{Store: ingestStore}
	imports.RegisterUpload(app, verifier.Middleware(), auth.RequireAdmin)
	api := app.Group("/v1", httpserver.LimitBody(cfg.MaxBodyBytes), verifier.Middleware())
	playbackHandler.Register(api)
	(&media.Handler{Store: mediaStore, Access: n.mediaCache, ObjectURL: objectURL}).Register(api)
	(&ingest.CollectionHandler{Store: ingestStore, ObjectURL: objectURL}).Register(api)
	admin := api.Group("/admin", auth.RequireAdmin)
	(&media.AdminHandler{Store: mediaStore}).Register(admin)
	(&encodejobs.AdminHandler{Queue: n.queue}).Register(admin)
	imports.Register(admin)
	n.app = app
	return nil
}

// closeAPI releases what buildAPI opened besides the app: the media cache and the flusher's
// pool. The playback buffer is stopped by stop, which drains it first.
func (n *node) closeAPI() {
	n.mediaCache.Close()
	n.flushPool.Close()
}

// startPlaybackBuffer builds the write-behind buffer and starts it. Start first replays the
// positions a previous run spilled to PLAYHEAD_SPILL_DIR at its stop, so it runs before the
// node serves; a database that fails during the replay fails the start and keeps the files.
func (n *node) startPlaybackBuffer(ctx context.Context) error {
	cfg := n.cfg
	spill, err := buffer.NewSpillDir[playback.Key, playback.Position](cfg.SpillDir, "playback", playback.SpillCodec{})
	if err != nil {
		return fmt.Errorf("PLAYHEAD_SPILL_DIR: %w", err)
	}
	n.playbackBuffer, err = buffer.New(buffer.Config[playback.Key, playback.Position]{
		Capacity:      cfg.BufferCapacity,
		MaxKeys:       cfg.BufferMaxKeys,
		FlushBatch:    cfg.FlushBatch,
		FlushInterval: cfg.FlushInterval,
		Flush:         playback.NewStore(n.flushPool).Flush,
		Compare:       playback.CompareKeys,
		Newer:         playback.Newer,
		Spill:         spill,
		Metrics:       buffer.NewMetrics(n.reg, "playback"),
		Logger:        n.logger,
	})
	if err != nil {
		return err
	}
	if err := n.playbackBuffer.Start(ctx); err != nil {
		return fmt.Errorf("playback buffer: %w", err)
	}
	n.health.Report("playback_buffer", func() any { return n.playbackBuffer.Stats() })
	return nil
}

func objectURL(key string) string { return objectsPath + strings.TrimPrefix(key, "/") }

// buildWorker builds the encode and ingest workers and hooks them to job notifications.
func (n *node) buildWorker(store storage.Store) error {
	cfg := n.cfg
	enc, err := encoder.New(encoder.Config{EncodeTimeout: cfg.EncodeTimeout, Preset: cfg.EncodePreset, Limits: cfg.VideoLimits})
	if err != nil {
		return err
	}
	encode := &encodejobs.Encode{Pool: n.pool, Store: store, Encoder: enc}
	metrics := encodejobs.NewMetrics(n.reg, n.pool, encodejobs.KindEncode, ingest.KindIngest)
	fetcher := ingest.NewFetcher(ingest.FetchConfig{
		AllowPrivate:    cfg.IngestAllowPrivate,
		ConnectTimeout:  cfg.IngestConnectTimeout,
		ResponseTimeout: cfg.IngestResponseTimeout,
		IdleTimeout:     cfg.IngestIdleTimeout,
		Timeout:         cfg.IngestTimeout,
		MaxBytes:        cfg.IngestMaxBytes,
		Metrics:         ingest.NewMetrics(n.reg),
	})
	importer := &ingest.Ingest{
		Store: ingest.NewStore(n.pool, cfg.IngestAttempts), Objects: store, Fetcher: fetcher,
		Links:          ingest.Links{Download: cfg.IngestDownloadURL, Fallback: cfg.IngestFallbackURL},
		EncodeAttempts: cfg.JobMaxAttempts,
	}
	// One worker per kind, so each has its own concurrency: downloads are limited by the
	// remote end, encodes by this machine's cores.
	for _, k := range []struct {
		kind        encodejobs.Kind
		concurrency int
	}{{encode.Kind(), cfg.EncodeConcurrency}, {importer.Kind(), cfg.IngestConcurrency}} {
		w, err := encodejobs.NewWorker(n.queue, encodejobs.WorkerConfig{
			Node:         cfg.NodeID,
			Concurrency:  k.concurrency,
			Lease:        cfg.JobLease,
			PollInterval: cfg.JobPollInterval,
			RetryBase:    cfg.JobRetryBase,
			RetryCap:     cfg.JobRetryCap,
			Logger:       n.logger,
			Metrics:      metrics,
		}, k.kind)
		if err != nil {
			return err
		}
		n.workers = append(n.workers, w)
	}
	wakeAll := func() {
		for _, w := range n.workers {
			w.Wake()
		}
	}
	n.listener.Handle(notify.ChannelJobs, func(string) { wakeAll() }, wakeAll)
	return nil
}

// sweepEvery forgets idle members from the rate limiter until ctx is done.
func sweepEvery(ctx context.Context, interval time.Duration, l *ratelimit.Limiter) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			l.Sweep()
		}
	}
}

// waitForDatabase retries a ping for up to 30 s: a node started together with its database
// should wait for it rather than crash-loop.
func waitForDatabase(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		pingCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := pool.Ping(pingCtx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("database unreachable: %w", err)
		}
		logger.Warn("waiting for database", "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
