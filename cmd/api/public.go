package main

import (
	"context"
	"fmt"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/api"
	"github.com/playhead/playhead/audience"
	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/buffer"
	"github.com/playhead/playhead/cache"
	"github.com/playhead/playhead/captions"
	"github.com/playhead/playhead/collection"
	"github.com/playhead/playhead/dbpool"
	"github.com/playhead/playhead/encodejobs"
	"github.com/playhead/playhead/erasure"
	"github.com/playhead/playhead/events"
	"github.com/playhead/playhead/export"
	"github.com/playhead/playhead/httpserver"
	"github.com/playhead/playhead/ingest"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/markers"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/mediadelete"
	memberids "github.com/playhead/playhead/members"
	"github.com/playhead/playhead/notify"
	"github.com/playhead/playhead/playback"
	"github.com/playhead/playhead/quality"
	"github.com/playhead/playhead/ratelimit"
	"github.com/playhead/playhead/storage"
	"github.com/playhead/playhead/tus"
	"github.com/playhead/playhead/web"
	"github.com/playhead/playhead/webhooks"
)

// buildAPI builds the public app (playback, media, uploads and admin routes) and lists the
// media cache, the playback buffer and the rate-limit sweeper. storeOrigin is where the
// store's presigned URLs point ("" for local storage).
func (n *node) buildAPI(ctx context.Context, store storage.Store, storeOrigin string, listener *notify.Listener) (*fiber.App, error) {
	cfg := n.cfg
	links, err := objectLinks(cfg, store)
	if err != nil {
		return nil, err
	}
	// Erased members' tokens are refused from the start (the Set reads every erasure before the
	// public server starts) and from each notification; their buffered positions and event
	// streams go at the same time (the database's fence keeps their data out regardless).
	erased := erasure.NewSet(n.pool, n.logger)
	subjects := memberids.NewResolver(n.pool, memberids.Config{Erased: erased.Contains, Registerer: n.reg, LoadTimeout: cfg.CacheLoadTimeout})
	verifier, keys, err := newVerifier(cfg, subjects, n.reg, n.logger)
	if err != nil {
		return nil, err
	}
	if keys != nil {
		n.add("identity provider keys", keys)
	}
	verifier.Refuse(erased.Contains)
	erased.OnErase(n.forgetErased)
	n.add("erased members", erased)
	listener.Handle(erasure.Channel, erased.Notified, erased.Reload)
	mediaStore := media.NewStore(n.pool)
	mediaCache, err := cache.New(cache.Config{
		MaxItems:    int64(cfg.CacheMaxItems),
		TTL:         cfg.CacheTTL,
		NegativeTTL: cfg.CacheNegativeTTL,
		MaxStale:    cfg.CacheMaxStale,
		LoadTimeout: cfg.CacheLoadTimeout,
		Load:        mediaStore.LookupAccess,
		Registerer:  n.reg,
	})
	if err != nil {
		return nil, err
	}
	n.add("media cache", mediaCache)
	listener.Handle(media.ChannelChanged, mediaCache.EvictPayload, mediaCache.Clear)

	readPool, err := dbpool.OpenGenericPlans(ctx, cfg.DatabaseDirectURL, readPoolConns)
	if err != nil {
		return nil, err
	}
	n.closers = append(n.closers, func() { n.closePool(readPool) })
	playbackStore := playbackStoreOn(n.pool, cfg).ListOn(readPool)
	playbackHandler := &playback.Handler{Store: playbackStore, Access: mediaCache, Mode: cfg.WriteMode, Links: links}
	// The flusher gets its own connections: under a burst of synchronous requests (players
	// opening videos) it must not queue for the request pool while the buffer fills up.
	flushPool, err := dbpool.Open(ctx, cfg.DatabaseURL, flushPoolConns, nil, poolOptions(cfg)...)
	if err != nil {
		return nil, err
	}
	n.closers = append(n.closers, func() { n.closePool(flushPool) }) // after the buffer's stop: its final flush uses it
	if cfg.WriteMode == playback.ModeSync {
		playbackHandler.Access = cache.Direct(mediaStore.LookupAccess)
	} else {
		if err := n.buildPlaybackBuffer(flushPool, mediaCache); err != nil {
			return nil, err
		}
		playbackHandler.Buffer = n.playbackBuffer
	}
	// Quality sums are written on the request pool every PLAYHEAD_QUALITY_INTERVAL: one small
	// statement per period, never on a request's path. Listed after the buffer, so stopped
	// before it, after the HTTP server has stopped taking reports.
	qualitySums, err := quality.New(quality.Config{Pool: n.pool, Interval: cfg.QualityInterval, MaxMedia: cfg.QualityMaxMedia,
		Logger: n.logger, Registerer: n.reg})
	if err != nil {
		return nil, err
	}
	n.add("playback quality", qualitySums)
	playbackHandler.Quality = qualitySums
	if cfg.PutRate > 0 {
		playbackHandler.Limit = ratelimit.New(cfg.PutRate, cfg.PutBurst)
		playbackHandler.RateLimited = prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "playhead", Subsystem: "playback", Name: "rate_limited_total",
			Help: "Position reports and marks watched or unwatched refused with 429 because a member sent more than PLAYHEAD_PUT_RATE/BURST.",
		})
		n.reg.MustRegister(playbackHandler.RateLimited)
		n.add("rate-limit sweeper", ratelimit.NewSweeper(playbackHandler.Limit, time.Minute))
	}
	playbackHandler.ForgetsUnsettled = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "playhead", Subsystem: "playback", Name: "forgets_unsettled_total",
		Help: "Forgets (DELETE /v1/playback/{id}?forget=true) answered before every writer older than their tombstone had ended (the wait gave up after 5 s): the forgotten_prune sweep deletes what such a writer brings back.",
	})
	n.reg.MustRegister(playbackHandler.ForgetsUnsettled)

	app := httpserver.New(httpserver.Config{
		BodyLimit:    cfg.MaxBodyBytes,
		ReadTimeout:  cfg.HTTPReadTimeout,
		WriteTimeout: publicWriteTimeout,
		IdleTimeout:  cfg.HTTPIdleTimeout,
		Logger:       n.logger,
		Metrics:      httpserver.NewMetrics(n.reg),
		// The public server's stop cancels it when in-flight requests have had half the budget.
		RequestContext: n.requests,
		// The upload limits must hold from a body's first byte, not after fasthttp's 8 KiB.
		FirstByteRoutes: append([]httpserver.Route{media.UploadRoute}, tus.FirstByteRoutes...),
		// Integrators' pages on other origins call the API and fetch local storage's files.
		CORSOrigins: cfg.CORSOrigins,
	})
	n.health.Register(app)
	// The OpenAPI document, without a token like the health routes.
	api.Register(app)
	// Encoded files are fetched by players with signed URLs (GET /v1/media/{id} gives them),
	// checked for the member they were issued to, who must still be allowed to play the media.
	captionStore := captions.NewStore(n.pool)
	markerStore := markers.NewStore(n.pool)
	(&media.ObjectsHandler{Store: store, Access: mediaCache, Links: links, Subtitles: captionStore, Masters: mediaStore,
		Chapters: markerStore}).Register(app)
	// The player pages (/, /watch/:id, /static/…) load without a token; their scripts send it.
	// With S3 storage they fetch segments and thumbnails from the store's origin; with
	// PLAYHEAD_OIDC_CLIENT_ID they sign in at the provider (GET /signin.json names it).
	var mediaOrigins []string
	if storeOrigin != "" {
		mediaOrigins = append(mediaOrigins, storeOrigin)
	}
	pages, err := web.New(web.Config{MediaOrigins: mediaOrigins, SignIn: cfg.pagesSignIn()})
	if err != nil {
		return nil, err
	}
	pages.Register(app)
	// The upload streams its body and enforces its own limit, so it is registered before the
	// group whose LimitBody would read the body into memory.
	limits := &media.UploadLimits{MaxPerMember: cfg.UploadsPerMember, MaxTotal: cfg.UploadsTotal,
		IdleTimeout: cfg.UploadIdleTimeout, Timeout: cfg.UploadTimeout}
	commit := media.Committer{JobKind: encodejobs.KindEncode, MaxAttempts: cfg.JobMaxAttempts, FIFO: !cfg.JobsFair}
	upload := &media.UploadHandler{Pool: n.pool, Store: store, MaxBytes: cfg.MaxUploadBytes, Limits: limits, Commit: commit}
	upload.Register(app, verifier.Middleware())
	// Resumable uploads (tus): the same limits, the same end.
	if err := n.buildResumable(app, store, limits, commit, verifier.Middleware(), listener); err != nil {
		return nil, err
	}
	ingestStore := ingest.NewStore(n.pool, cfg.IngestAttempts).WithFIFO(!cfg.JobsFair)
	imports := &ingest.AdminHandler{Store: ingestStore, Sheets: ingest.SheetLinks{
		Export: cfg.IngestSheetExportURL,
		// The same address checks and timeouts as the videos' downloads; a sheet's size limit.
		Fetcher: ingest.NewFetcher(ingest.FetchConfig{
			AllowPrivate:    cfg.IngestAllowPrivate,
			ConnectTimeout:  cfg.IngestConnectTimeout,
			ResponseTimeout: cfg.IngestResponseTimeout,
			IdleTimeout:     cfg.IngestIdleTimeout,
			MaxBytes:        ingest.MaxFileBytes,
		}),
	}}
	imports.RegisterUpload(app, verifier.Middleware(), auth.RequireAdmin)
	// Caption files (up to captions.MaxBodyBytes) come before the group's body limit too.
	captionsHandler := &captions.Handler{Store: captionStore, Media: mediaStore, Access: mediaCache, Objects: store,
		Metrics: captions.NewMetrics(n.reg), Logger: n.logger, Limits: limits}
	captionsHandler.RegisterUpload(app, verifier.Middleware())
	v1 := app.Group("/v1", httpserver.LimitBody(cfg.MaxBodyBytes), verifier.Middleware())
	playbackHandler.Register(v1)
	(&media.Handler{Store: mediaStore, Access: mediaCache, Links: links, Chapters: markerStore}).Register(v1)
	(&markers.Handler{Store: markerStore, Media: mediaStore, Access: mediaCache}).Register(v1)
	deletions := &mediadelete.Handler{Pool: n.pool}
	deletions.Register(v1)
	captionsHandler.Register(v1)
	(&collection.Handler{Store: collection.NewStore(readPool).WithCompletion(cfg.Completion), Links: links}).Register(v1)
	(&audience.Handler{Store: audience.NewStore(readPool)}).Register(v1)
	admin := v1.Group("/admin", auth.RequireAdmin)
	(&media.AdminHandler{Store: mediaStore}).Register(admin)
	deletions.RegisterAdmin(admin)
	erasures := &erasure.Handler{Pool: n.pool, FreshFor: cfg.ErasureFreshToken, Erased: erased}
	erasures.Register(v1)
	erasures.RegisterAdmin(admin)
	(&jobqueue.AdminHandler{Queue: n.queue, Actor: adminActor}).Register(admin)
	imports.Register(admin)
	(&webhooks.AdminHandler{Store: webhooks.NewStore(n.pool), AllowPrivate: cfg.WebhookAllowPrivate}).Register(admin)
	n.eventStreams = events.NewHub(events.Config{Pool: n.pool, PerMember: cfg.EventsPerMember, Total: cfg.EventsMaxStreams,
		Heartbeat: cfg.EventsHeartbeat, WriteTimeout: publicWriteTimeout, Registerer: n.reg, Logger: n.logger})
	n.eventStreams.Refuse(erased.Contains) // a stream that subscribes after Hub.End ran
	listener.Handle(media.ChannelOutbox, n.eventStreams.Notify, n.eventStreams.Resync)
	n.eventStreams.Register(v1)
	// The export streams from the request pool, a few at a time (export.MaxRunning).
	export.NewHandler(n.pool, publicWriteTimeout, n.logger).Register(v1)
	return app, nil
}

// forgetErased drops what this node holds of erased members: their buffered positions and
// their event streams. It runs on the notification listener's goroutine, and at the Set's
// start (before the buffer replays its spill files and the public server starts).
func (n *node) forgetErased(members []int64) {
	if n.playbackBuffer != nil {
		ids := make(map[int64]bool, len(members))
		for _, m := range members {
			ids[m] = true
		}
		n.playbackBuffer.Drop(func(k playback.Key) bool { return ids[k.Member] })
	}
	if n.eventStreams != nil {
		n.eventStreams.End(members)
	}
}

// playbackStoreOn is a playback store on pool with cfg's completion point, recording watched
// ranges unless PLAYHEAD_WATCHED_RANGES is off, with the window cfg's flush interval makes.
func playbackStoreOn(pool *pgxpool.Pool, cfg Config) *playback.Store {
	s := playback.NewStore(pool, cfg.Completion).WatchedWithin(playback.WatchedWindow(cfg.FlushInterval))
	if !cfg.WatchedRanges {
		s.WithoutWatchedRanges()
	}
	return s
}

// buildPlaybackBuffer builds the write-behind buffer and lists it. Its Start first replays the
// positions a previous run spilled to PLAYHEAD_SPILL_DIR at its stop, each checked through
// access as a PUT is, so it comes before the public server in start order (and after the media
// cache); a database that fails during the replay fails the start and keeps the files.
func (n *node) buildPlaybackBuffer(flushPool *pgxpool.Pool, access playback.AccessChecker) error {
	cfg := n.cfg
	spill, err := buffer.NewSpillDir[playback.Key, playback.Position](cfg.SpillDir, "playback", playback.SpillCodec{})
	if err != nil {
		return fmt.Errorf("PLAYHEAD_SPILL_DIR: %w", err)
	}
	n.playbackBuffer, err = buffer.New(buffer.Config[playback.Key, playback.Position]{
		Capacity:      cfg.BufferCapacity,
		MaxKeys:       cfg.BufferMaxKeys,
		FlushBatch:    cfg.FlushBatch,
		FlushAt:       cfg.FlushAt,
		FlushInterval: cfg.FlushInterval,
		Flush:         playbackStoreOn(flushPool, cfg).Flush,
		Compare:       playback.CompareKeys,
		Newer:         playback.Newer,
		Spill:         spill,
		CheckReplayed: playback.ReplayCheck(access, time.Now),
		Metrics:       buffer.NewMetrics(n.reg, "playback"),
		Logger:        n.logger,
	})
	if err != nil {
		return err
	}
	n.add("playback buffer", n.playbackBuffer)
	n.health.Report("playback_buffer", func() any { return n.playbackBuffer.Stats() })
	return nil
}

// adminActor names the administrator of a request as the queue records it (who paused a kind).
func adminActor(c *fiber.Ctx) string { return fmt.Sprintf("member %d", auth.From(c).MemberID) }
