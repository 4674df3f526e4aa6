package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/encoder"
	"github.com/playhead/playhead/ingest"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/playback"
	"github.com/playhead/playhead/storage"
)

// Config is the whole operator interface: every field comes from one PLAYHEAD_* (or
// DATABASE_URL) environment variable, documented in the README's table.
type Config struct {
	// DatabaseURL is the PostgreSQL connection string (DATABASE_URL). Required. The request
	// pool and the playback flusher's pool connect with it; it may point at a connection pooler
	// in transaction mode (DBPooler).
	DatabaseURL string
	// DatabaseDirectURL reaches PostgreSQL with a session of its own, for what cannot go
	// through a transaction pooler: LISTEN, the orphan sweep's session advisory lock, the
	// migrations (goose's session lock) and the progress reads' session setting
	// (PLAYHEAD_DATABASE_DIRECT_URL). Default DatabaseURL; required when DBPooler is
	// transaction.
	DatabaseDirectURL string
	// DBPooler says what DatabaseURL points at: none (PostgreSQL, or a pooler in session mode)
	// or transaction (a pooler in transaction mode, e.g. PgBouncer's pool_mode = transaction),
	// which makes the pools keep no state between transactions (PLAYHEAD_DB_POOLER). Default none.
	DBPooler string
	// Role is all, api or worker (PLAYHEAD_ROLE, flag --role). Default all.
	Role string
	// HTTPAddr is the public API listen address (PLAYHEAD_HTTP_ADDR). Default :8080.
	HTTPAddr string
	// MetricsAddr serves /metrics, /healthz and /readyz (PLAYHEAD_METRICS_ADDR). Default
	// 127.0.0.1:9464.
	MetricsAddr string
	// JWTSecret signs and verifies tokens (PLAYHEAD_JWT_SECRET). Required, ≥ 32 bytes.
	JWTSecret string
	// BufferCapacity bounds the playback buffer, in entries (PLAYHEAD_BUFFER_CAPACITY).
	// Default 10 000.
	BufferCapacity int
	// BufferMaxKeys bounds the distinct (member, media) keys the playback buffer holds, held
	// for retry during a database outage included; beyond it new keys are dropped
	// (PLAYHEAD_BUFFER_MAX_KEYS). Default 20 × BufferCapacity.
	BufferMaxKeys int
	// FlushBatch bounds the rows of one flush statement (PLAYHEAD_FLUSH_BATCH). Default 1 000.
	FlushBatch int
	// FlushAt flushes before the interval once this many distinct keys are held
	// (PLAYHEAD_FLUSH_AT_KEYS). Default FlushBatch (BufferMaxKeys if smaller); at most
	// BufferMaxKeys.
	FlushAt int
	// FlushInterval flushes at least this often (PLAYHEAD_FLUSH_INTERVAL). Default 5 s.
	FlushInterval time.Duration
	// WriteMode is writebehind or sync (PLAYHEAD_PLAYBACK_WRITE_MODE). Default writebehind.
	WriteMode playback.Mode
	// Completion is when a position marks a media watched: a ratio of the duration
	// (PLAYHEAD_COMPLETION_RATIO, from 0.5 to 1) or a stretch before the end
	// (PLAYHEAD_COMPLETION_TAIL), whichever comes first. Defaults 0.95 and 30 s.
	Completion media.Completion
	// CacheTTL and CacheNegativeTTL bound how long found and missing media are trusted
	// (PLAYHEAD_CACHE_TTL, PLAYHEAD_CACHE_NEGATIVE_TTL). Defaults 60 s and 5 s.
	CacheTTL, CacheNegativeTTL time.Duration
	// CacheMaxStale is how long past its TTL a media entry still answers while the database
	// cannot be read (PLAYHEAD_CACHE_MAX_STALE). Default 10 min.
	CacheMaxStale time.Duration
	// CacheLoadTimeout bounds one media lookup in the database (PLAYHEAD_CACHE_LOAD_TIMEOUT):
	// past it the request answers 503 (or a stale entry). Default 2 s.
	CacheLoadTimeout time.Duration
	// CacheMaxItems bounds the media cache (PLAYHEAD_CACHE_MAX_ITEMS). Default 100 000.
	CacheMaxItems int
	// ShutdownTimeout is the whole budget of a graceful stop (PLAYHEAD_SHUTDOWN_TIMEOUT). Default 30 s.
	ShutdownTimeout time.Duration
	// ShutdownDrainDelay is how long a node with a public port keeps serving after SIGTERM
	// with /readyz answering 503, so that a load balancer's health checks take it out of
	// rotation before it stops accepting (PLAYHEAD_SHUTDOWN_DRAIN_DELAY). Part of
	// ShutdownTimeout. Default 0.
	ShutdownDrainDelay time.Duration
	// DBMaxConns caps the request pool (PLAYHEAD_DB_MAX_CONNS). Default 0: 10 on api and all
	// nodes, encode + ingest + webhook concurrency + 5 on workers. The playback flusher has 2 more of its
	// own.
	DBMaxConns int
	// MaxBodyBytes bounds request bodies read into memory (PLAYHEAD_MAX_BODY_BYTES). Default 64 KiB.
	MaxBodyBytes int
	// HTTPReadTimeout bounds reading one request's headers and body; a client that trickles
	// them (slow loris) is cut (PLAYHEAD_HTTP_READ_TIMEOUT). Default 10 s. Uploads extend it.
	HTTPReadTimeout time.Duration
	// HTTPIdleTimeout closes keep-alive connections idle this long (PLAYHEAD_HTTP_IDLE_TIMEOUT).
	// Default 60 s.
	HTTPIdleTimeout time.Duration
	// LogLevel is debug, info, warn or error (PLAYHEAD_LOG_LEVEL). Default info.
	LogLevel string
	// PutRate and PutBurst limit each member's position reports: a sustained rate per second
	// and a burst (PLAYHEAD_PUT_RATE, PLAYHEAD_PUT_BURST). Defaults 1/s and 10, five times what
	// a player sends. A rate of 0 turns the limit off.
	PutRate  float64
	PutBurst int

	// NodeID names this process in job claims (PLAYHEAD_NODE_ID). Default hostname-pid.
	NodeID string
	// StorageDir is the local object store (PLAYHEAD_STORAGE_DIR). Default ./data/objects.
	StorageDir string
	// SpillDir receives the positions a graceful stop could not write before its deadline;
	// they are replayed at the next start (PLAYHEAD_SPILL_DIR). Default ./data/spill.
	SpillDir string
	// Storage is where objects live: local (StorageDir, one machine or a shared disk) or s3
	// (PLAYHEAD_STORAGE). Default local.
	Storage string
	// S3 is the bucket when Storage is s3: PLAYHEAD_S3_ENDPOINT, _REGION, _BUCKET,
	// _ACCESS_KEY_ID, _SECRET_ACCESS_KEY, _PATH_STYLE, _PREFIX (storageFromEnv).
	S3 storage.S3Config
	// SignedURLTTL is how long the links to encoded files stay valid beyond the playback
	// distance of what they point at (media.Links) (PLAYHEAD_SIGNED_URL_TTL). Default 10 min.
	SignedURLTTL time.Duration
	// URLSigningSecret signs Playhead's own object URLs; the same on every API node
	// (PLAYHEAD_URL_SIGNING_SECRET, ≥ 32 bytes). Default: derived from JWTSecret.
	URLSigningSecret string
	// OrphanGrace is the age past which unreferenced objects are removed by the orphan sweep
	// (PLAYHEAD_ORPHAN_GRACE). Default 24 h; longer than an upload's time limit and a job's lease.
	OrphanGrace time.Duration
	// OrphanSweepInterval and OrphanSweepBatch: a sweep pass every interval, listing at most
	// batch objects per folder (PLAYHEAD_ORPHAN_SWEEP_INTERVAL, PLAYHEAD_ORPHAN_SWEEP_BATCH).
	// Defaults 10 min and 10 000.
	OrphanSweepInterval time.Duration
	OrphanSweepBatch    int
	// MaxUploadBytes bounds one upload (PLAYHEAD_MAX_UPLOAD_BYTES). Default 2 GiB.
	MaxUploadBytes int64
	// UploadTimeout is how long one whole upload may take to arrive (PLAYHEAD_UPLOAD_TIMEOUT).
	// Default 1 h.
	UploadTimeout time.Duration
	// UploadIdleTimeout cuts an upload that sends nothing for this long
	// (PLAYHEAD_UPLOAD_IDLE_TIMEOUT). Default 30 s.
	UploadIdleTimeout time.Duration
	// UploadsPerMember and UploadsTotal bound the uploads in progress on one node, of one
	// member and of everyone (PLAYHEAD_UPLOADS_PER_MEMBER, PLAYHEAD_UPLOADS_TOTAL). Defaults 2
	// and 32.
	UploadsPerMember, UploadsTotal int
	// UploadExpiry is how long an unfinished resumable upload lives without a byte stored
	// (PLAYHEAD_UPLOAD_EXPIRY); then its bytes are removed. Default 24 h.
	UploadExpiry time.Duration
	// UploadsUnfinished bounds a member's unfinished resumable uploads
	// (PLAYHEAD_UPLOADS_UNFINISHED). Default 10.
	UploadsUnfinished int
	// UploadRate and UploadBurst limit each member's resumable-upload requests that change an
	// upload (POST, PATCH, DELETE of /v1/uploads): a sustained rate per second and a burst
	// (PLAYHEAD_UPLOAD_RATE, PLAYHEAD_UPLOAD_BURST). Defaults 20/s and 100: a client sends one
	// PATCH a chunk (the upload page's are 8 MiB, 160 MiB/s at the rate) and retries after a
	// broken connection. A rate of 0 turns the limit off.
	UploadRate  float64
	UploadBurst int
	// VideoLimits bound what an upload may decode to (PLAYHEAD_MAX_VIDEO_WIDTH, _HEIGHT,
	// _PIXELS, _FPS, _DURATION; defaults encoder.DefaultLimits: 4096, 4096, 9 437 184, 120,
	// 4 h) and each ffmpeg process's address space (PLAYHEAD_ENCODE_MEMORY_LIMIT, bytes;
	// default 4 GiB, 0 for none).
	VideoLimits encoder.Limits
	// JobLease is a claimed job's lease, the one value the queue, its heartbeats (every third,
	// retried within a twentieth) and its local deadline use (PLAYHEAD_JOB_LEASE). Default 60 s.
	JobLease time.Duration
	// JobPollInterval is the workers' fallback poll (PLAYHEAD_JOB_POLL_INTERVAL). Default 1 s.
	JobPollInterval time.Duration
	// JobMaxAttempts is each job's attempt limit (PLAYHEAD_JOB_MAX_ATTEMPTS). Default 3.
	JobMaxAttempts int
	// JobRetryBase and JobRetryCap shape the full-jitter backoff between attempts
	// (PLAYHEAD_JOB_RETRY_BASE, PLAYHEAD_JOB_RETRY_CAP). Defaults 5 s and 5 min.
	JobRetryBase, JobRetryCap time.Duration
	// EncodeConcurrency is how many encodes run at once on this node
	// (PLAYHEAD_ENCODE_CONCURRENCY). Default 1.
	EncodeConcurrency int
	// EncodeTimeout bounds one ffmpeg HLS encode (PLAYHEAD_ENCODE_TIMEOUT). Default 30 min.
	EncodeTimeout time.Duration
	// EncodePreset is the x264 preset (PLAYHEAD_ENCODE_PRESET). Default veryfast.
	EncodePreset string
	// EncodeMode is how an upload is encoded (PLAYHEAD_ENCODE_MODE): renditions (the
	// default: a group of jobs, the lowest rendition first and alone, the media playable when
	// it is done) or single (one job, one ffmpeg run for every rendition: the least CPU,
	// nothing playable before the whole ladder is done).
	EncodeMode string
	// EncodeRenditionJobs is the most rendition jobs an encode group splits its ladder into
	// (PLAYHEAD_ENCODE_RENDITION_JOBS, at least 2): the lowest rendition alone, the others
	// spread over the rest, one job per rendition at most. Each job decodes the source again.
	// Default 2.
	EncodeRenditionJobs int
	// HLSFormat packages new encodes' segments (PLAYHEAD_HLS_FORMAT): fmp4 (CMAF, the
	// default) or ts (MPEG-TS, for players before iOS 10). Media encoded before keep theirs.
	HLSFormat encoder.Format
	// RetentionCompleted and RetentionDead are how long finished jobs are kept
	// (PLAYHEAD_RETENTION_COMPLETED, PLAYHEAD_RETENTION_DEAD). Defaults 7 and 30 days.
	RetentionCompleted, RetentionDead time.Duration
	// RetentionInterval is how often a node tries to prune (PLAYHEAD_RETENTION_INTERVAL). Default 10 min.
	RetentionInterval time.Duration
	// OutboxRetention is how long the event history is kept (PLAYHEAD_OUTBOX_RETENTION): outbox
	// rows (what GET /v1/events resumes from) and ended webhook deliveries. Default 7 days.
	OutboxRetention time.Duration

	// WatchedRanges is whether the flush records the parts of videos members play, for the
	// audience figures (PLAYHEAD_WATCHED_RANGES). Default true; false records none (the
	// figures then count views and completions only).
	WatchedRanges bool
	// AudienceSchedule is the audience rollup's period (PLAYHEAD_AUDIENCE_INTERVAL, at least
	// 1s). Default every 10 min.
	AudienceSchedule jobqueue.Schedule

	// WebhookAllowPrivate lets webhook endpoints be on loopback and private addresses, at
	// registration and at delivery (PLAYHEAD_WEBHOOK_ALLOW_PRIVATE). Default false; tests only.
	WebhookAllowPrivate bool
	// WebhookConcurrency is how many webhook deliveries run at once on this node
	// (PLAYHEAD_WEBHOOK_CONCURRENCY). Default 4.
	WebhookConcurrency int
	// WebhookTimeout bounds one delivery attempt, connect to answer (PLAYHEAD_WEBHOOK_TIMEOUT).
	// Default 15 s.
	WebhookTimeout time.Duration
	// WebhookMaxAttempts is each delivery's attempt limit before it is DEAD
	// (PLAYHEAD_WEBHOOK_MAX_ATTEMPTS). Default 12.
	WebhookMaxAttempts int
	// WebhookRetryCap caps the backoff between a delivery's attempts, which starts at
	// PLAYHEAD_JOB_RETRY_BASE (PLAYHEAD_WEBHOOK_RETRY_CAP). Default 1 h.
	WebhookRetryCap time.Duration

	// EventsPerMember bounds one member's open GET /v1/events streams on this node
	// (PLAYHEAD_EVENTS_PER_MEMBER). Default 4: a few tabs.
	EventsPerMember int
	// EventsMaxStreams bounds this node's open event streams (PLAYHEAD_EVENTS_MAX_STREAMS).
	// Default 1000.
	EventsMaxStreams int
	// EventsHeartbeat is how often an idle event stream sends a comment line
	// (PLAYHEAD_EVENTS_HEARTBEAT). Default 15 s, under the 30 s idle limit of common proxies.
	EventsHeartbeat time.Duration

	// IngestConcurrency is how many imported videos download at once on this node
	// (PLAYHEAD_INGEST_CONCURRENCY). Default 2: the remote end's limits are unknown.
	IngestConcurrency int
	// IngestAllowPrivate lets the importer fetch loopback and private addresses
	// (PLAYHEAD_INGEST_ALLOW_PRIVATE). Default false; tests only.
	IngestAllowPrivate bool
	// IngestDownloadURL and IngestFallbackURL turn a share link's file id ({id}) into download
	// URLs (PLAYHEAD_INGEST_DOWNLOAD_URL_TEMPLATE, PLAYHEAD_INGEST_FALLBACK_URL_TEMPLATE).
	// Defaults: Google Drive's, as in seed 001.
	IngestDownloadURL, IngestFallbackURL string
	// IngestSheetExportURL turns a Google Sheets link's spreadsheet id ({id}) into the URL its
	// .xlsx is downloaded from (PLAYHEAD_INGEST_SHEET_EXPORT_URL_TEMPLATE).
	IngestSheetExportURL string
	// IngestConnectTimeout, IngestResponseTimeout and IngestIdleTimeout bound a download's
	// connect, the wait for its response headers, and the silences of its body
	// (PLAYHEAD_INGEST_CONNECT_TIMEOUT, PLAYHEAD_INGEST_RESPONSE_TIMEOUT,
	// PLAYHEAD_INGEST_IDLE_TIMEOUT). Defaults 10 s, 30 s, 5 min.
	IngestConnectTimeout, IngestResponseTimeout, IngestIdleTimeout time.Duration
	// IngestTimeout bounds one whole download attempt (PLAYHEAD_INGEST_TIMEOUT). Default 1 h.
	IngestTimeout time.Duration
	// IngestMaxBytes bounds one download (PLAYHEAD_INGEST_MAX_BYTES). Default 5 GiB.
	IngestMaxBytes int64
	// IngestAttempts is an import download job's attempt limit (PLAYHEAD_INGEST_ATTEMPTS).
	// Each attempt is one request; after a 429, a 5xx or a connection failure the job goes
	// back to the queue with backoff, holding no download slot. Default 5.
	IngestAttempts int
}

// roles a node can run.
const (
	roleAll    = "all"
	roleAPI    = "api"
	roleWorker = "worker"
)

// What DATABASE_URL points at (PLAYHEAD_DB_POOLER).
const (
	poolerNone        = "none"
	poolerTransaction = "transaction"
)

// env reads configuration variables, collecting every error so one start-up names them all.
type env struct {
	errs []error
}

func (e *env) str(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

func (e *env) int(name string, def int) int {
	raw := e.str(name, "")
	if raw == "" {
		return def
	}
	n, err := strconv.Atoi(raw)
	if err != nil {
		e.errs = append(e.errs, fmt.Errorf("%s: %q is not an integer", name, raw))
		return def // reported once, not again by the range checks
	}
	return n
}

func (e *env) float(name string, def float64) float64 {
	raw := e.str(name, "")
	if raw == "" {
		return def
	}
	f, err := strconv.ParseFloat(raw, 64)
	if err != nil {
		e.errs = append(e.errs, fmt.Errorf("%s: %q is not a number", name, raw))
		return def
	}
	return f
}

func (e *env) bool(name string, def bool) bool {
	raw := e.str(name, "")
	if raw == "" {
		return def
	}
	b, err := strconv.ParseBool(raw)
	if err != nil {
		e.errs = append(e.errs, fmt.Errorf("%s: %q is not true or false", name, raw))
		return def
	}
	return b
}

func (e *env) duration(name string, def time.Duration) time.Duration {
	raw := e.str(name, "")
	if raw == "" {
		return def
	}
	d, err := time.ParseDuration(raw)
	if err != nil {
		e.errs = append(e.errs, fmt.Errorf("%s: %q is not a duration (e.g. 5s, 250ms)", name, raw))
		return def // reported once, not again by the range checks
	}
	return d
}

func (e *env) check(ok bool, format string, args ...any) {
	if !ok {
		e.errs = append(e.errs, fmt.Errorf(format, args...))
	}
}

// loadConfig reads the environment, lets the flags in args override it, and validates the
// result. The error names every bad variable.
func loadConfig(args []string) (Config, error) {
	var e env
	c := Config{
		Role:           e.str("PLAYHEAD_ROLE", roleAll),
		HTTPAddr:       e.str("PLAYHEAD_HTTP_ADDR", ":8080"),
		MetricsAddr:    e.str("PLAYHEAD_METRICS_ADDR", "127.0.0.1:9464"),
		JWTSecret:      e.str("PLAYHEAD_JWT_SECRET", ""),
		BufferCapacity: e.int("PLAYHEAD_BUFFER_CAPACITY", 10_000),
		FlushBatch:     e.int("PLAYHEAD_FLUSH_BATCH", 1_000),
		FlushInterval:  e.duration("PLAYHEAD_FLUSH_INTERVAL", 5*time.Second),
		WriteMode:      playback.Mode(e.str("PLAYHEAD_PLAYBACK_WRITE_MODE", string(playback.ModeWriteBehind))),
		Completion: media.Completion{
			Ratio: e.float("PLAYHEAD_COMPLETION_RATIO", media.DefaultCompletion.Ratio),
			Tail:  e.duration("PLAYHEAD_COMPLETION_TAIL", media.DefaultCompletion.Tail),
		},
		CacheTTL:         e.duration("PLAYHEAD_CACHE_TTL", 60*time.Second),
		CacheNegativeTTL: e.duration("PLAYHEAD_CACHE_NEGATIVE_TTL", 5*time.Second),
		CacheMaxItems:    e.int("PLAYHEAD_CACHE_MAX_ITEMS", 100_000),
		CacheMaxStale:    e.duration("PLAYHEAD_CACHE_MAX_STALE", 10*time.Minute),
		CacheLoadTimeout: e.duration("PLAYHEAD_CACHE_LOAD_TIMEOUT", 2*time.Second),
		ShutdownTimeout:  e.duration("PLAYHEAD_SHUTDOWN_TIMEOUT", 30*time.Second),
		DBMaxConns:       e.int("PLAYHEAD_DB_MAX_CONNS", 0),
		MaxBodyBytes:     e.int("PLAYHEAD_MAX_BODY_BYTES", 64<<10),
		HTTPReadTimeout:  e.duration("PLAYHEAD_HTTP_READ_TIMEOUT", 10*time.Second),
		HTTPIdleTimeout:  e.duration("PLAYHEAD_HTTP_IDLE_TIMEOUT", 60*time.Second),
		LogLevel:         e.str("PLAYHEAD_LOG_LEVEL", "info"),
		PutRate:          e.float("PLAYHEAD_PUT_RATE", 1),
		PutBurst:         e.int("PLAYHEAD_PUT_BURST", 10),

		NodeID:              e.str("PLAYHEAD_NODE_ID", defaultNodeID()),
		ShutdownDrainDelay:  e.duration("PLAYHEAD_SHUTDOWN_DRAIN_DELAY", 0),
		StorageDir:          e.str("PLAYHEAD_STORAGE_DIR", "./data/objects"),
		SpillDir:            e.str("PLAYHEAD_SPILL_DIR", "./data/spill"),
		Storage:             e.str("PLAYHEAD_STORAGE", storageLocal),
		S3:                  e.s3(),
		SignedURLTTL:        e.duration("PLAYHEAD_SIGNED_URL_TTL", 10*time.Minute),
		URLSigningSecret:    e.str("PLAYHEAD_URL_SIGNING_SECRET", ""),
		OrphanGrace:         e.duration("PLAYHEAD_ORPHAN_GRACE", 24*time.Hour),
		OrphanSweepInterval: e.duration("PLAYHEAD_ORPHAN_SWEEP_INTERVAL", 10*time.Minute),
		OrphanSweepBatch:    e.int("PLAYHEAD_ORPHAN_SWEEP_BATCH", 10_000),
		MaxUploadBytes:      int64(e.int("PLAYHEAD_MAX_UPLOAD_BYTES", 2<<30)),
		UploadTimeout:       e.duration("PLAYHEAD_UPLOAD_TIMEOUT", time.Hour),
		UploadIdleTimeout:   e.duration("PLAYHEAD_UPLOAD_IDLE_TIMEOUT", 30*time.Second),
		UploadsPerMember:    e.int("PLAYHEAD_UPLOADS_PER_MEMBER", 2),
		UploadsTotal:        e.int("PLAYHEAD_UPLOADS_TOTAL", 32),
		UploadExpiry:        e.duration("PLAYHEAD_UPLOAD_EXPIRY", 24*time.Hour),
		UploadsUnfinished:   e.int("PLAYHEAD_UPLOADS_UNFINISHED", 10),
		UploadRate:          e.float("PLAYHEAD_UPLOAD_RATE", 20),
		UploadBurst:         e.int("PLAYHEAD_UPLOAD_BURST", 100),
		VideoLimits: encoder.Limits{
			MaxWidth:     e.int("PLAYHEAD_MAX_VIDEO_WIDTH", encoder.DefaultLimits.MaxWidth),
			MaxHeight:    e.int("PLAYHEAD_MAX_VIDEO_HEIGHT", encoder.DefaultLimits.MaxHeight),
			MaxPixels:    int64(e.int("PLAYHEAD_MAX_VIDEO_PIXELS", int(encoder.DefaultLimits.MaxPixels))),
			MaxFrameRate: e.float("PLAYHEAD_MAX_VIDEO_FPS", encoder.DefaultLimits.MaxFrameRate),
			MaxDuration:  e.duration("PLAYHEAD_MAX_VIDEO_DURATION", encoder.DefaultLimits.MaxDuration),
			MemoryBytes:  int64(e.int("PLAYHEAD_ENCODE_MEMORY_LIMIT", 4<<30)),
		},
		JobLease:            e.duration("PLAYHEAD_JOB_LEASE", 60*time.Second),
		JobPollInterval:     e.duration("PLAYHEAD_JOB_POLL_INTERVAL", time.Second),
		JobMaxAttempts:      e.int("PLAYHEAD_JOB_MAX_ATTEMPTS", 3),
		JobRetryBase:        e.duration("PLAYHEAD_JOB_RETRY_BASE", 5*time.Second),
		JobRetryCap:         e.duration("PLAYHEAD_JOB_RETRY_CAP", 5*time.Minute),
		EncodeConcurrency:   e.int("PLAYHEAD_ENCODE_CONCURRENCY", 1),
		EncodeTimeout:       e.duration("PLAYHEAD_ENCODE_TIMEOUT", 30*time.Minute),
		EncodePreset:        e.str("PLAYHEAD_ENCODE_PRESET", "veryfast"),
		EncodeMode:          e.str("PLAYHEAD_ENCODE_MODE", "renditions"),
		EncodeRenditionJobs: e.int("PLAYHEAD_ENCODE_RENDITION_JOBS", 2),
		HLSFormat:           encoder.Format(e.str("PLAYHEAD_HLS_FORMAT", string(encoder.FormatFMP4))),
		RetentionCompleted:  e.duration("PLAYHEAD_RETENTION_COMPLETED", 7*24*time.Hour),
		RetentionDead:       e.duration("PLAYHEAD_RETENTION_DEAD", 30*24*time.Hour),
		RetentionInterval:   e.duration("PLAYHEAD_RETENTION_INTERVAL", 10*time.Minute),
		OutboxRetention:     e.duration("PLAYHEAD_OUTBOX_RETENTION", 7*24*time.Hour),
		WatchedRanges:       e.bool("PLAYHEAD_WATCHED_RANGES", true),

		WebhookAllowPrivate: e.bool("PLAYHEAD_WEBHOOK_ALLOW_PRIVATE", false),
		WebhookConcurrency:  e.int("PLAYHEAD_WEBHOOK_CONCURRENCY", 4),
		WebhookTimeout:      e.duration("PLAYHEAD_WEBHOOK_TIMEOUT", 15*time.Second),
		WebhookMaxAttempts:  e.int("PLAYHEAD_WEBHOOK_MAX_ATTEMPTS", 12),
		WebhookRetryCap:     e.duration("PLAYHEAD_WEBHOOK_RETRY_CAP", time.Hour),

		EventsPerMember:  e.int("PLAYHEAD_EVENTS_PER_MEMBER", 4),
		EventsMaxStreams: e.int("PLAYHEAD_EVENTS_MAX_STREAMS", 1000),
		EventsHeartbeat:  e.duration("PLAYHEAD_EVENTS_HEARTBEAT", 15*time.Second),

		IngestConcurrency:     e.int("PLAYHEAD_INGEST_CONCURRENCY", 2),
		IngestAllowPrivate:    e.bool("PLAYHEAD_INGEST_ALLOW_PRIVATE", false),
		IngestDownloadURL:     e.str("PLAYHEAD_INGEST_DOWNLOAD_URL_TEMPLATE", ingest.DefaultLinks.Download),
		IngestFallbackURL:     e.str("PLAYHEAD_INGEST_FALLBACK_URL_TEMPLATE", ingest.DefaultLinks.Fallback),
		IngestSheetExportURL:  e.str("PLAYHEAD_INGEST_SHEET_EXPORT_URL_TEMPLATE", ingest.DefaultSheetExport),
		IngestConnectTimeout:  e.duration("PLAYHEAD_INGEST_CONNECT_TIMEOUT", 10*time.Second),
		IngestResponseTimeout: e.duration("PLAYHEAD_INGEST_RESPONSE_TIMEOUT", 30*time.Second),
		IngestIdleTimeout:     e.duration("PLAYHEAD_INGEST_IDLE_TIMEOUT", 5*time.Minute),
		IngestTimeout:         e.duration("PLAYHEAD_INGEST_TIMEOUT", time.Hour),
		IngestMaxBytes:        int64(e.int("PLAYHEAD_INGEST_MAX_BYTES", 5<<30)),
		IngestAttempts:        e.int("PLAYHEAD_INGEST_ATTEMPTS", 5),
	}
	// Both are read after what they default from: an explicit 0 is then refused by validate
	// like any value out of range, where 0 as "unset" quietly ran the default for an operator
	// who asked for something else.
	c.BufferMaxKeys = e.int("PLAYHEAD_BUFFER_MAX_KEYS", 20*c.BufferCapacity)
	c.FlushAt = e.int("PLAYHEAD_FLUSH_AT_KEYS", min(c.FlushBatch, c.BufferMaxKeys))
	var err error
	if c.AudienceSchedule, err = jobqueue.Every(e.duration("PLAYHEAD_AUDIENCE_INTERVAL", 10*time.Minute)); err != nil {
		e.check(false, "PLAYHEAD_AUDIENCE_INTERVAL: %v", err)
	}
	e.database(&c)
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&c.Role, "role", c.Role, "all, api or worker (overrides PLAYHEAD_ROLE)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	return c, c.validate(&e)
}

func (c Config) validate(e *env) error {
	c.validateDatabase(e)
	e.check(c.Role == roleAll || c.Role == roleAPI || c.Role == roleWorker, "PLAYHEAD_ROLE: %q is not all, api or worker", c.Role)
	e.check(len(c.JWTSecret) >= auth.MinSecretBytes, "PLAYHEAD_JWT_SECRET: must be at least %d bytes (make run generates one)", auth.MinSecretBytes)
	e.check(c.BufferCapacity > 0, "PLAYHEAD_BUFFER_CAPACITY: must be positive")
	e.check(c.BufferMaxKeys >= c.BufferCapacity, "PLAYHEAD_BUFFER_MAX_KEYS: must be at least PLAYHEAD_BUFFER_CAPACITY (%d)", c.BufferCapacity)
	e.check(c.FlushBatch > 0, "PLAYHEAD_FLUSH_BATCH: must be positive")
	e.check(c.FlushAt > 0 && c.FlushAt <= c.BufferMaxKeys,
		"PLAYHEAD_FLUSH_AT_KEYS: must be from 1 to PLAYHEAD_BUFFER_MAX_KEYS (%d)", c.BufferMaxKeys)
	e.check(c.FlushInterval > 0, "PLAYHEAD_FLUSH_INTERVAL: must be positive")
	e.check(c.WriteMode.Valid(), "PLAYHEAD_PLAYBACK_WRITE_MODE: %q is not writebehind or sync", c.WriteMode)
	e.check(c.Completion.Ratio >= 0.5 && c.Completion.Ratio <= 1, "PLAYHEAD_COMPLETION_RATIO: must be from 0.5 to 1")
	e.check(c.Completion.Tail >= 0, "PLAYHEAD_COMPLETION_TAIL: must not be negative")
	e.check(c.CacheTTL > 0, "PLAYHEAD_CACHE_TTL: must be positive")
	e.check(c.CacheNegativeTTL > 0, "PLAYHEAD_CACHE_NEGATIVE_TTL: must be positive")
	e.check(c.CacheMaxItems > 0, "PLAYHEAD_CACHE_MAX_ITEMS: must be positive")
	e.check(c.CacheMaxStale > 0, "PLAYHEAD_CACHE_MAX_STALE: must be positive")
	e.check(c.CacheLoadTimeout > 0, "PLAYHEAD_CACHE_LOAD_TIMEOUT: must be positive")
	e.check(c.ShutdownTimeout > 0, "PLAYHEAD_SHUTDOWN_TIMEOUT: must be positive")
	e.check(c.ShutdownDrainDelay >= 0 && c.ShutdownDrainDelay <= c.ShutdownTimeout/2,
		"PLAYHEAD_SHUTDOWN_DRAIN_DELAY: must be from 0 to half of PLAYHEAD_SHUTDOWN_TIMEOUT (the rest is the stop's)")
	e.check(c.DBMaxConns >= 0, "PLAYHEAD_DB_MAX_CONNS: must not be negative")
	e.check(c.MaxBodyBytes >= playback.MaxBodyBytes, "PLAYHEAD_MAX_BODY_BYTES: must be at least %d", playback.MaxBodyBytes)
	e.check(c.NodeID != "", "PLAYHEAD_NODE_ID: must not be empty")
	e.check(c.StorageDir != "", "PLAYHEAD_STORAGE_DIR: must not be empty")
	e.check(c.SpillDir != "", "PLAYHEAD_SPILL_DIR: must not be empty")
	c.validateStorage(e)
	e.check(c.MaxUploadBytes > 0, "PLAYHEAD_MAX_UPLOAD_BYTES: must be positive")
	e.check(c.UploadTimeout > 0 && c.UploadIdleTimeout > 0, "PLAYHEAD_UPLOAD_TIMEOUT/_IDLE_TIMEOUT: must be positive")
	e.check(c.UploadsPerMember >= 1 && c.UploadsTotal >= c.UploadsPerMember,
		"PLAYHEAD_UPLOADS_PER_MEMBER/PLAYHEAD_UPLOADS_TOTAL: need 1 <= per member <= total")
	e.check(c.UploadExpiry > 0, "PLAYHEAD_UPLOAD_EXPIRY: must be positive")
	e.check(c.UploadsUnfinished >= 1, "PLAYHEAD_UPLOADS_UNFINISHED: must be at least 1")
	e.check(c.UploadRate >= 0, "PLAYHEAD_UPLOAD_RATE: must not be negative (0 turns the limit off)")
	e.check(c.UploadBurst >= 1, "PLAYHEAD_UPLOAD_BURST: must be at least 1")
	v := c.VideoLimits
	e.check(v.MaxWidth >= 2 && v.MaxHeight >= 2, "PLAYHEAD_MAX_VIDEO_WIDTH/_HEIGHT: must be at least 2")
	e.check(v.MaxPixels >= 4 && v.MaxPixels <= math.MaxInt32, "PLAYHEAD_MAX_VIDEO_PIXELS: must be from 4 to %d (ffmpeg's -max_pixels)", math.MaxInt32)
	e.check(v.MaxFrameRate > 0, "PLAYHEAD_MAX_VIDEO_FPS: must be positive")
	e.check(v.MaxDuration > 0, "PLAYHEAD_MAX_VIDEO_DURATION: must be positive")
	e.check(v.MemoryBytes == 0 || v.MemoryBytes >= 256<<20, "PLAYHEAD_ENCODE_MEMORY_LIMIT: must be 0 (no limit) or at least 268435456 (256 MiB)")
	e.check(c.JobLease >= 3*time.Millisecond, "PLAYHEAD_JOB_LEASE: must be at least 3ms (heartbeats run every third)")
	e.check(c.JobPollInterval > 0, "PLAYHEAD_JOB_POLL_INTERVAL: must be positive")
	e.check(c.JobMaxAttempts >= 1, "PLAYHEAD_JOB_MAX_ATTEMPTS: must be at least 1")
	e.check(c.JobRetryBase > 0 && c.JobRetryCap >= c.JobRetryBase, "PLAYHEAD_JOB_RETRY_BASE/PLAYHEAD_JOB_RETRY_CAP: need 0 < base <= cap")
	e.check(c.EncodeConcurrency >= 1, "PLAYHEAD_ENCODE_CONCURRENCY: must be at least 1")
	e.check(c.EncodeTimeout > 0, "PLAYHEAD_ENCODE_TIMEOUT: must be positive")
	e.check(c.HLSFormat == encoder.FormatFMP4 || c.HLSFormat == encoder.FormatTS, "PLAYHEAD_HLS_FORMAT: must be fmp4 or ts")
	e.check(c.EncodeMode == "renditions" || c.EncodeMode == "single", "PLAYHEAD_ENCODE_MODE: must be renditions or single")
	e.check(c.EncodeRenditionJobs >= 2, "PLAYHEAD_ENCODE_RENDITION_JOBS: must be at least 2 (the lowest rendition, then the others)")
	e.check(c.RetentionCompleted > 0 && c.RetentionDead > 0 && c.RetentionInterval > 0,
		"PLAYHEAD_RETENTION_COMPLETED/_DEAD/_INTERVAL: must be positive")
	e.check(c.OutboxRetention > 0, "PLAYHEAD_OUTBOX_RETENTION: must be positive")
	e.check(c.HTTPReadTimeout > 0 && c.HTTPIdleTimeout > 0, "PLAYHEAD_HTTP_READ_TIMEOUT/_IDLE_TIMEOUT: must be positive")
	e.check(c.PutRate >= 0, "PLAYHEAD_PUT_RATE: must not be negative (0 turns the limit off)")
	e.check(c.PutBurst >= 1, "PLAYHEAD_PUT_BURST: must be at least 1")
	e.check(c.WebhookConcurrency >= 1, "PLAYHEAD_WEBHOOK_CONCURRENCY: must be at least 1")
	e.check(c.WebhookTimeout > 0, "PLAYHEAD_WEBHOOK_TIMEOUT: must be positive")
	e.check(c.WebhookMaxAttempts >= 1, "PLAYHEAD_WEBHOOK_MAX_ATTEMPTS: must be at least 1")
	e.check(c.WebhookRetryCap >= c.JobRetryBase, "PLAYHEAD_WEBHOOK_RETRY_CAP: must be at least PLAYHEAD_JOB_RETRY_BASE")
	e.check(c.EventsPerMember >= 1 && c.EventsMaxStreams >= 1, "PLAYHEAD_EVENTS_PER_MEMBER/_MAX_STREAMS: must be at least 1")
	e.check(c.EventsHeartbeat > 0, "PLAYHEAD_EVENTS_HEARTBEAT: must be positive")
	e.check(c.IngestConcurrency >= 1, "PLAYHEAD_INGEST_CONCURRENCY: must be at least 1")
	e.check(strings.Contains(c.IngestDownloadURL, "{id}"), "PLAYHEAD_INGEST_DOWNLOAD_URL_TEMPLATE: must contain {id}")
	e.check(c.IngestFallbackURL == "" || strings.Contains(c.IngestFallbackURL, "{id}"), "PLAYHEAD_INGEST_FALLBACK_URL_TEMPLATE: must contain {id} (or be empty)")
	e.check(strings.Contains(c.IngestSheetExportURL, "{id}"), "PLAYHEAD_INGEST_SHEET_EXPORT_URL_TEMPLATE: must contain {id}")
	e.check(c.IngestConnectTimeout > 0 && c.IngestResponseTimeout > 0 && c.IngestIdleTimeout > 0 && c.IngestTimeout > 0,
		"PLAYHEAD_INGEST_CONNECT_TIMEOUT/_RESPONSE_TIMEOUT/_IDLE_TIMEOUT/_TIMEOUT: must be positive")
	e.check(c.IngestMaxBytes > 0, "PLAYHEAD_INGEST_MAX_BYTES: must be positive")
	e.check(c.IngestAttempts >= 1, "PLAYHEAD_INGEST_ATTEMPTS: must be at least 1")
	_, err := parseLogLevel(c.LogLevel)
	e.check(err == nil, "PLAYHEAD_LOG_LEVEL: %q is not debug, info, warn or error", c.LogLevel)
	return errors.Join(e.errs...)
}

// database reads the connection strings and the pooler mode into c.
func (e *env) database(c *Config) {
	c.DatabaseURL = e.str("DATABASE_URL", "")
	c.DBPooler = e.str("PLAYHEAD_DB_POOLER", poolerNone)
	c.DatabaseDirectURL = e.str("PLAYHEAD_DATABASE_DIRECT_URL", c.DatabaseURL)
}

// loadDatabaseConfig reads and validates only the database variables, for playhead migrate:
// the same rules as serve, so that a migration never runs through a transaction pooler.
func loadDatabaseConfig() (Config, error) {
	var e env
	var c Config
	e.database(&c)
	c.validateDatabase(&e)
	return c, errors.Join(e.errs...)
}

// validateDatabase checks the connection strings and the pooler mode: through a transaction
// pooler, the session-bound work needs a direct URL of its own.
func (c Config) validateDatabase(e *env) {
	e.check(c.DatabaseURL != "", "DATABASE_URL is required (make run starts a local cluster and sets it)")
	e.check(c.DBPooler == poolerNone || c.DBPooler == poolerTransaction, "PLAYHEAD_DB_POOLER: %q is not none or transaction", c.DBPooler)
	if c.DatabaseURL != "" {
		_, err := pgx.ParseConfig(c.DatabaseURL)
		e.check(err == nil, "DATABASE_URL: %v", err)
	}
	if c.DatabaseDirectURL != c.DatabaseURL {
		_, err := pgx.ParseConfig(c.DatabaseDirectURL)
		e.check(err == nil, "PLAYHEAD_DATABASE_DIRECT_URL: %v", err)
	}
	e.check(c.DBPooler != poolerTransaction || c.DatabaseDirectURL != c.DatabaseURL,
		"PLAYHEAD_DATABASE_DIRECT_URL: required with PLAYHEAD_DB_POOLER=transaction, and not DATABASE_URL: "+
			"LISTEN, session advisory locks, migrations and the progress reads need a session of their own")
}

func defaultNodeID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "node"
	}
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}
