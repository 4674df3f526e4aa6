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

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/buffer"
	"github.com/playhead/playhead/cache"
	"github.com/playhead/playhead/dbpool"
	"github.com/playhead/playhead/httpserver"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/notify"
	"github.com/playhead/playhead/playback"
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

// serve runs the node until ctx is cancelled (SIGTERM or SIGINT), then stops in the design's
// order: readiness fails, the HTTP server finishes in-flight requests, the playback buffer
// drains and flushes, the listener and pool close. Every position answered 204 before the
// signal is in the database when serve returns nil.
func serve(ctx context.Context, cfg Config, logger *slog.Logger) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	pool, err := dbpool.Open(ctx, cfg.DatabaseURL, int32(cfg.DBMaxConns), reg)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := waitForDatabase(ctx, pool, logger); err != nil {
		return err
	}
	if cfg.Role == roleAll {
		if err := migrate(ctx, pool, func(msg string) { logger.Info(msg) }); err != nil {
			return err
		}
	}

	verifier, err := auth.NewVerifier([]byte(cfg.JWTSecret))
	if err != nil {
		return err
	}
	mediaStore := media.NewStore(pool)
	mediaCache, err := cache.New(cache.Config{
		MaxItems:    int64(cfg.CacheMaxItems),
		TTL:         cfg.CacheTTL,
		NegativeTTL: cfg.CacheNegativeTTL,
		Load:        mediaStore.LookupAccess,
		Registerer:  reg,
	})
	if err != nil {
		return err
	}
	defer mediaCache.Close()

	listenCtx, stopListening := context.WithCancel(context.Background())
	listener := notify.NewListener(cfg.DatabaseURL, logger)
	listener.Handle(notify.ChannelMediaChanged, mediaCache.EvictPayload, mediaCache.Clear)
	listenDone := make(chan struct{})
	go func() {
		defer close(listenDone)
		_ = listener.Run(listenCtx) // returns only when listenCtx is cancelled
	}()
	defer func() { stopListening(); <-listenDone }()

	playbackStore := playback.NewStore(pool)
	playbackHandler := &playback.Handler{Store: playbackStore, Access: mediaCache, Mode: cfg.WriteMode}
	var playbackBuffer *buffer.Buffer[playback.Key, playback.Position]
	if cfg.WriteMode == playback.ModeSync {
		playbackHandler.Access = cache.Direct(mediaStore.LookupAccess)
	} else {
		playbackBuffer, err = buffer.New(buffer.Config[playback.Key, playback.Position]{
			Capacity:      cfg.BufferCapacity,
			FlushBatch:    cfg.FlushBatch,
			FlushInterval: cfg.FlushInterval,
			Flush:         playbackStore.Flush,
			Compare:       playback.CompareKeys,
			Newer:         playback.Newer,
			Metrics:       buffer.NewMetrics(reg, "playback"),
			Logger:        logger,
		})
		if err != nil {
			return err
		}
		playbackBuffer.Start()
		playbackHandler.Buffer = playbackBuffer
	}

	health := httpserver.NewHealth(pool.Ping)
	app := httpserver.New(httpserver.Config{
		BodyLimit:    cfg.MaxBodyBytes,
		ReadTimeout:  10 * time.Second,
		WriteTimeout: 30 * time.Second,
		IdleTimeout:  60 * time.Second,
		Logger:       logger,
		Metrics:      httpserver.NewMetrics(reg),
	})
	health.Register(app)
	api := app.Group("/v1", verifier.Middleware())
	playbackHandler.Register(api)
	(&media.AdminHandler{Store: mediaStore}).Register(api.Group("/admin", auth.RequireAdmin))

	// Listen before serving, so a busy port is an error at start-up, not a log line later.
	httpLn, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("PLAYHEAD_HTTP_ADDR: %w", err)
	}
	metricsLn, err := net.Listen("tcp", cfg.MetricsAddr)
	if err != nil {
		httpLn.Close()
		return fmt.Errorf("PLAYHEAD_METRICS_ADDR: %w", err)
	}
	metricsSrv := &http.Server{Handler: health.MetricsHandler(reg), ReadHeaderTimeout: 5 * time.Second}
	serveErr := make(chan error, 2)
	go func() { serveErr <- app.Listener(httpLn) }()
	go func() {
		if err := metricsSrv.Serve(metricsLn); !errors.Is(err, http.ErrServerClosed) {
			serveErr <- err
		}
	}()
	logger.Info("serving", "role", cfg.Role, "http", httpLn.Addr().String(), "metrics", metricsLn.Addr().String(),
		"write_mode", cfg.WriteMode)

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		return fmt.Errorf("server stopped: %w", err)
	}

	logger.Info("stopping", "budget", cfg.ShutdownTimeout.String())
	health.SetDraining()
	stopCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	var errs []error
	if err := app.ShutdownWithContext(stopCtx); err != nil {
		errs = append(errs, fmt.Errorf("http shutdown: %w", err))
	}
	if playbackBuffer != nil {
		if err := playbackBuffer.Close(stopCtx); err != nil {
			errs = append(errs, fmt.Errorf("playback buffer drain: %w", err))
		}
	}
	if err := metricsSrv.Shutdown(stopCtx); err != nil {
		errs = append(errs, fmt.Errorf("metrics shutdown: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	logger.Info("stopped cleanly")
	return nil
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
