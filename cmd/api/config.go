package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/encoder"
	"github.com/playhead/playhead/httpserver"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/playback"
	"github.com/playhead/playhead/storage"
)

// Config is the whole operator interface: every field comes from one environment variable (a
// few from several), read and validated once at start-up. What each variable means, its type
// and its default are registered once, in settingGroups (settings.go); `playhead config` and
// docs/operations/configuration.md print them from there. The comments below name the
// variables only.
type Config struct {
	DatabaseURL       string // DATABASE_URL
	DatabaseDirectURL string // PLAYHEAD_DATABASE_DIRECT_URL
	DBPooler          string // PLAYHEAD_DB_POOLER: poolerNone or poolerTransaction
	Role              string // PLAYHEAD_ROLE, or the flag --role
	HTTPAddr          string // PLAYHEAD_HTTP_ADDR
	MetricsAddr       string // PLAYHEAD_METRICS_ADDR
	JWTSecret         string // PLAYHEAD_JWT_SECRET; "" with a provider's keys (Identity)
	// Identity is the identity provider whose tokens are accepted besides the secret's.
	Identity IdentityConfig
	// SignInClientID is PLAYHEAD_OIDC_CLIENT_ID: the pages' public client at the provider;
	// "" shows no "Sign in" (signin.go).
	SignInClientID string
	// ErasureFreshToken is PLAYHEAD_ERASURE_FRESH_TOKEN: the oldest token DELETE /v1/me takes.
	ErasureFreshToken time.Duration

	BufferCapacity int           // PLAYHEAD_BUFFER_CAPACITY
	BufferMaxKeys  int           // PLAYHEAD_BUFFER_MAX_KEYS
	FlushBatch     int           // PLAYHEAD_FLUSH_BATCH
	FlushAt        int           // PLAYHEAD_FLUSH_AT_KEYS
	FlushInterval  time.Duration // PLAYHEAD_FLUSH_INTERVAL
	WriteMode      playback.Mode // PLAYHEAD_PLAYBACK_WRITE_MODE
	// Completion is PLAYHEAD_COMPLETION_RATIO and PLAYHEAD_COMPLETION_TAIL.
	Completion media.Completion

	CacheTTL         time.Duration // PLAYHEAD_CACHE_TTL
	CacheNegativeTTL time.Duration // PLAYHEAD_CACHE_NEGATIVE_TTL
	CacheMaxStale    time.Duration // PLAYHEAD_CACHE_MAX_STALE
	CacheLoadTimeout time.Duration // PLAYHEAD_CACHE_LOAD_TIMEOUT
	CacheMaxItems    int           // PLAYHEAD_CACHE_MAX_ITEMS

	ShutdownTimeout    time.Duration // PLAYHEAD_SHUTDOWN_TIMEOUT
	ShutdownDrainDelay time.Duration // PLAYHEAD_SHUTDOWN_DRAIN_DELAY, part of ShutdownTimeout
	// DBMaxConns is PLAYHEAD_DB_MAX_CONNS; 0 lets poolConns size the pool by role.
	DBMaxConns      int
	MaxBodyBytes    int           // PLAYHEAD_MAX_BODY_BYTES
	HTTPReadTimeout time.Duration // PLAYHEAD_HTTP_READ_TIMEOUT
	HTTPIdleTimeout time.Duration // PLAYHEAD_HTTP_IDLE_TIMEOUT
	// CORSOrigins is PLAYHEAD_CORS_ORIGINS, parsed (httpserver.ParseOrigins); none: no CORS.
	CORSOrigins []string
	LogLevel    string  // PLAYHEAD_LOG_LEVEL
	PutRate     float64 // PLAYHEAD_PUT_RATE; 0 turns the limit off
	PutBurst    int     // PLAYHEAD_PUT_BURST

	NodeID     string // PLAYHEAD_NODE_ID
	StorageDir string // PLAYHEAD_STORAGE_DIR
	SpillDir   string // PLAYHEAD_SPILL_DIR
	Storage    string // PLAYHEAD_STORAGE: storageLocal or storageS3
	// S3 is the bucket when Storage is s3: the PLAYHEAD_S3_* variables (env.s3).
	S3           storage.S3Config
	SignedURLTTL time.Duration // PLAYHEAD_SIGNED_URL_TTL
	// URLSigningSecret is PLAYHEAD_URL_SIGNING_SECRET; "" derives it from JWTSecret
	// (signingSecret).
	URLSigningSecret string
	// URLSigningKeys is PLAYHEAD_URL_SIGNING_KEYS, "id:secret,…" and legacy for the legacy
	// key; "" is legacy alone (signingKeys).
	URLSigningKeys      string
	OrphanGrace         time.Duration // PLAYHEAD_ORPHAN_GRACE
	OrphanSweepInterval time.Duration // PLAYHEAD_ORPHAN_SWEEP_INTERVAL
	OrphanSweepBatch    int           // PLAYHEAD_ORPHAN_SWEEP_BATCH

	MaxUploadBytes    int64         // PLAYHEAD_MAX_UPLOAD_BYTES
	UploadTimeout     time.Duration // PLAYHEAD_UPLOAD_TIMEOUT
	UploadIdleTimeout time.Duration // PLAYHEAD_UPLOAD_IDLE_TIMEOUT
	UploadsPerMember  int           // PLAYHEAD_UPLOADS_PER_MEMBER
	UploadsTotal      int           // PLAYHEAD_UPLOADS_TOTAL
	UploadExpiry      time.Duration // PLAYHEAD_UPLOAD_EXPIRY
	UploadsUnfinished int           // PLAYHEAD_UPLOADS_UNFINISHED
	UploadRate        float64       // PLAYHEAD_UPLOAD_RATE; 0 turns the limit off
	UploadBurst       int           // PLAYHEAD_UPLOAD_BURST
	// VideoLimits are PLAYHEAD_MAX_VIDEO_WIDTH, _HEIGHT, _PIXELS, _FPS, _DURATION and
	// PLAYHEAD_ENCODE_MEMORY_LIMIT (0: none).
	VideoLimits encoder.Limits

	JobLease        time.Duration // PLAYHEAD_JOB_LEASE
	JobPollInterval time.Duration // PLAYHEAD_JOB_POLL_INTERVAL
	JobMaxAttempts  int           // PLAYHEAD_JOB_MAX_ATTEMPTS
	JobRetryBase    time.Duration // PLAYHEAD_JOB_RETRY_BASE
	JobRetryCap     time.Duration // PLAYHEAD_JOB_RETRY_CAP
	// JobsFair is PLAYHEAD_JOBS_FAIR: the media kinds' jobs take turns by owner.
	JobsFair bool

	EncodeConcurrency   int            // PLAYHEAD_ENCODE_CONCURRENCY
	EncodeMaxRunning    int            // PLAYHEAD_ENCODE_MAX_RUNNING; 0: no cluster-wide limit
	EncodeTimeout       time.Duration  // PLAYHEAD_ENCODE_TIMEOUT
	EncodePreset        string         // PLAYHEAD_ENCODE_PRESET
	EncodeMode          string         // PLAYHEAD_ENCODE_MODE: renditions or single
	EncodeRenditionJobs int            // PLAYHEAD_ENCODE_RENDITION_JOBS
	HLSFormat           encoder.Format // PLAYHEAD_HLS_FORMAT

	RetentionCompleted time.Duration // PLAYHEAD_RETENTION_COMPLETED
	RetentionDead      time.Duration // PLAYHEAD_RETENTION_DEAD
	RetentionInterval  time.Duration // PLAYHEAD_RETENTION_INTERVAL
	OutboxRetention    time.Duration // PLAYHEAD_OUTBOX_RETENTION
	// HistoryRetention is PLAYHEAD_HISTORY_RETENTION; 0 keeps the viewing history for ever.
	HistoryRetention time.Duration

	WatchedRanges bool // PLAYHEAD_WATCHED_RANGES
	// AudienceSchedule is every PLAYHEAD_AUDIENCE_INTERVAL.
	AudienceSchedule jobqueue.Schedule
	// QualityInterval is how often playback-quality sums are written (PLAYHEAD_QUALITY_INTERVAL).
	QualityInterval time.Duration
	// QualityMaxMedia bounds the media a node holds quality sums for (PLAYHEAD_QUALITY_MAX_MEDIA).
	QualityMaxMedia int

	WebhookAllowPrivate bool          // PLAYHEAD_WEBHOOK_ALLOW_PRIVATE
	WebhookConcurrency  int           // PLAYHEAD_WEBHOOK_CONCURRENCY
	WebhookMaxRunning   int           // PLAYHEAD_WEBHOOK_MAX_RUNNING; 0: no cluster-wide limit
	WebhookTimeout      time.Duration // PLAYHEAD_WEBHOOK_TIMEOUT
	WebhookMaxAttempts  int           // PLAYHEAD_WEBHOOK_MAX_ATTEMPTS
	WebhookRetryCap     time.Duration // PLAYHEAD_WEBHOOK_RETRY_CAP

	// XAPI is the xAPI settings (PLAYHEAD_XAPI_*); its Endpoint empty: xAPI off.
	XAPI xapiConfig

	EventsPerMember  int           // PLAYHEAD_EVENTS_PER_MEMBER
	EventsMaxStreams int           // PLAYHEAD_EVENTS_MAX_STREAMS
	EventsHeartbeat  time.Duration // PLAYHEAD_EVENTS_HEARTBEAT

	IngestConcurrency     int           // PLAYHEAD_INGEST_CONCURRENCY
	IngestMaxRunning      int           // PLAYHEAD_INGEST_MAX_RUNNING; 0: no cluster-wide limit
	IngestAllowPrivate    bool          // PLAYHEAD_INGEST_ALLOW_PRIVATE
	IngestDownloadURL     string        // PLAYHEAD_INGEST_DOWNLOAD_URL_TEMPLATE
	IngestFallbackURL     string        // PLAYHEAD_INGEST_FALLBACK_URL_TEMPLATE
	IngestSheetExportURL  string        // PLAYHEAD_INGEST_SHEET_EXPORT_URL_TEMPLATE
	IngestConnectTimeout  time.Duration // PLAYHEAD_INGEST_CONNECT_TIMEOUT
	IngestResponseTimeout time.Duration // PLAYHEAD_INGEST_RESPONSE_TIMEOUT
	IngestIdleTimeout     time.Duration // PLAYHEAD_INGEST_IDLE_TIMEOUT
	IngestTimeout         time.Duration // PLAYHEAD_INGEST_TIMEOUT
	IngestMaxBytes        int64         // PLAYHEAD_INGEST_MAX_BYTES
	IngestAttempts        int           // PLAYHEAD_INGEST_ATTEMPTS
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

// env reads configuration variables through the settings registry (settingGroups), collecting
// every error so one start-up names them all.
type env struct {
	// lookup reads one variable: os.LookupEnv, or a test's.
	lookup func(name string) (string, bool)
	errs   []error
}

// value is the text of the setting name: the variable, else its fallbacks, else its registered
// default; "" for none. A variable that is not registered, or read as another type than
// registered, panics: a setting exists in the registry or not at all, so every start (and the
// tests that load the configuration) stops on it.
func (e *env) value(name string, typ settingType) string {
	s, ok := settingIndex[name]
	if !ok {
		panic(fmt.Sprintf("configuration: %s is read but not registered in settingGroups (settings.go)", name))
	}
	if s.typ != typ {
		panic(fmt.Sprintf("configuration: %s is registered as %s and read as %s", name, s.typ, typ))
	}
	for _, n := range append([]string{name}, s.fallbacks...) {
		if v, ok := e.lookup(n); ok && v != "" {
			return v
		}
	}
	return s.def
}

func (e *env) str(name string) string { return e.value(name, typeString) }

func (e *env) int(name string) int { return e.intOr(name, 0) }

// origins reads a comma-separated list of origins (httpserver.ParseOrigins); an entry that is
// not one is reported with the variable's name.
func (e *env) origins(name string) []string {
	origins, err := httpserver.ParseOrigins(e.str(name))
	if err != nil {
		e.errs = append(e.errs, fmt.Errorf("%s: %w", name, err))
	}
	return origins
}

// intOr reads an integer setting whose default loadConfig computes from other settings (def),
// as its registered shown default says.
func (e *env) intOr(name string, def int) int {
	return readSetting(e, name, typeInt, def, strconv.Atoi, "an integer")
}

func (e *env) bytes(name string) int64 {
	return readSetting(e, name, typeBytes, 0, func(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) }, "an integer")
}

func (e *env) float(name string) float64 {
	return readSetting(e, name, typeNumber, 0, func(s string) (float64, error) { return strconv.ParseFloat(s, 64) }, "a number")
}

func (e *env) bool(name string) bool {
	return readSetting(e, name, typeBool, false, strconv.ParseBool, "true or false")
}

func (e *env) duration(name string) time.Duration {
	return readSetting(e, name, typeDuration, 0, parseDuration, "a duration (e.g. 5s, 250ms, 540d)")
}

// parseDuration reads a duration as time.ParseDuration does, or a whole number of days
// ("540d"): retentions are set in days, and Go's largest unit is the hour.
func parseDuration(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n < 0 || n > math.MaxInt64/int64(24*time.Hour) {
			return 0, fmt.Errorf("%q is not a whole number of days", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}

// readSetting parses the setting name of type typ; def is its value when it has no text at all
// (no registered default: the zero value, or one loadConfig computes). A text that does not
// parse is reported, naming the variable and what it should be, and the registered default
// (else def) is returned: the error is reported once, not again by the range checks.
func readSetting[T any](e *env, name string, typ settingType, def T, parse func(string) (T, error), want string) T {
	raw := e.value(name, typ)
	if raw == "" {
		return def
	}
	v, err := parse(raw)
	if err == nil {
		return v
	}
	e.errs = append(e.errs, fmt.Errorf("%s: %q is not %s", name, raw, want))
	if v, err := parse(settingIndex[name].def); err == nil {
		return v
	}
	return def
}

func (e *env) check(ok bool, format string, args ...any) {
	if !ok {
		e.errs = append(e.errs, fmt.Errorf(format, args...))
	}
}

// loadConfig reads the environment, lets the flags in args override it, and validates the
// result. The error names every bad variable.
func loadConfig(args []string) (Config, error) {
	e := env{lookup: os.LookupEnv}
	return e.config(args)
}

// config reads every setting through e, in the order their defaults need.
func (e *env) config(args []string) (Config, error) {
	c := Config{
		Role:              e.str("PLAYHEAD_ROLE"),
		HTTPAddr:          e.str("PLAYHEAD_HTTP_ADDR"),
		MetricsAddr:       e.str("PLAYHEAD_METRICS_ADDR"),
		JWTSecret:         e.str("PLAYHEAD_JWT_SECRET"),
		Identity:          e.identity(),
		SignInClientID:    e.str("PLAYHEAD_OIDC_CLIENT_ID"),
		ErasureFreshToken: e.duration("PLAYHEAD_ERASURE_FRESH_TOKEN"),
		BufferCapacity:    e.int("PLAYHEAD_BUFFER_CAPACITY"),
		FlushBatch:        e.int("PLAYHEAD_FLUSH_BATCH"),
		FlushInterval:     e.duration("PLAYHEAD_FLUSH_INTERVAL"),
		WriteMode:         playback.Mode(e.str("PLAYHEAD_PLAYBACK_WRITE_MODE")),
		Completion: media.Completion{
			Ratio: e.float("PLAYHEAD_COMPLETION_RATIO"),
			Tail:  e.duration("PLAYHEAD_COMPLETION_TAIL"),
			// The resume thresholds (the minimum; the completion point is the maximum).
			MinRatio:    e.float("PLAYHEAD_RESUME_MIN_RATIO"),
			Min:         e.duration("PLAYHEAD_RESUME_MIN"),
			MinDuration: e.duration("PLAYHEAD_RESUME_MIN_DURATION"),
		},
		CacheTTL:         e.duration("PLAYHEAD_CACHE_TTL"),
		CacheNegativeTTL: e.duration("PLAYHEAD_CACHE_NEGATIVE_TTL"),
		CacheMaxItems:    e.int("PLAYHEAD_CACHE_MAX_ITEMS"),
		CacheMaxStale:    e.duration("PLAYHEAD_CACHE_MAX_STALE"),
		CacheLoadTimeout: e.duration("PLAYHEAD_CACHE_LOAD_TIMEOUT"),
		ShutdownTimeout:  e.duration("PLAYHEAD_SHUTDOWN_TIMEOUT"),
		DBMaxConns:       e.int("PLAYHEAD_DB_MAX_CONNS"),
		MaxBodyBytes:     int(e.bytes("PLAYHEAD_MAX_BODY_BYTES")),
		HTTPReadTimeout:  e.duration("PLAYHEAD_HTTP_READ_TIMEOUT"),
		HTTPIdleTimeout:  e.duration("PLAYHEAD_HTTP_IDLE_TIMEOUT"),
		LogLevel:         e.str("PLAYHEAD_LOG_LEVEL"),
		PutRate:          e.float("PLAYHEAD_PUT_RATE"),
		PutBurst:         e.int("PLAYHEAD_PUT_BURST"),

		NodeID:              cmp.Or(e.str("PLAYHEAD_NODE_ID"), defaultNodeID()),
		ShutdownDrainDelay:  e.duration("PLAYHEAD_SHUTDOWN_DRAIN_DELAY"),
		StorageDir:          e.str("PLAYHEAD_STORAGE_DIR"),
		SpillDir:            e.str("PLAYHEAD_SPILL_DIR"),
		Storage:             e.str("PLAYHEAD_STORAGE"),
		S3:                  e.s3(),
		SignedURLTTL:        e.duration("PLAYHEAD_SIGNED_URL_TTL"),
		URLSigningSecret:    e.str("PLAYHEAD_URL_SIGNING_SECRET"),
		URLSigningKeys:      e.str("PLAYHEAD_URL_SIGNING_KEYS"),
		OrphanGrace:         e.duration("PLAYHEAD_ORPHAN_GRACE"),
		OrphanSweepInterval: e.duration("PLAYHEAD_ORPHAN_SWEEP_INTERVAL"),
		OrphanSweepBatch:    e.int("PLAYHEAD_ORPHAN_SWEEP_BATCH"),
		MaxUploadBytes:      e.bytes("PLAYHEAD_MAX_UPLOAD_BYTES"),
		UploadTimeout:       e.duration("PLAYHEAD_UPLOAD_TIMEOUT"),
		UploadIdleTimeout:   e.duration("PLAYHEAD_UPLOAD_IDLE_TIMEOUT"),
		UploadsPerMember:    e.int("PLAYHEAD_UPLOADS_PER_MEMBER"),
		UploadsTotal:        e.int("PLAYHEAD_UPLOADS_TOTAL"),
		UploadExpiry:        e.duration("PLAYHEAD_UPLOAD_EXPIRY"),
		UploadsUnfinished:   e.int("PLAYHEAD_UPLOADS_UNFINISHED"),
		UploadRate:          e.float("PLAYHEAD_UPLOAD_RATE"),
		UploadBurst:         e.int("PLAYHEAD_UPLOAD_BURST"),
		VideoLimits: encoder.Limits{
			MaxWidth:     e.int("PLAYHEAD_MAX_VIDEO_WIDTH"),
			MaxHeight:    e.int("PLAYHEAD_MAX_VIDEO_HEIGHT"),
			MaxPixels:    int64(e.int("PLAYHEAD_MAX_VIDEO_PIXELS")),
			MaxFrameRate: e.float("PLAYHEAD_MAX_VIDEO_FPS"),
			MaxDuration:  e.duration("PLAYHEAD_MAX_VIDEO_DURATION"),
			MemoryBytes:  e.bytes("PLAYHEAD_ENCODE_MEMORY_LIMIT"),
		},
		JobLease:            e.duration("PLAYHEAD_JOB_LEASE"),
		JobPollInterval:     e.duration("PLAYHEAD_JOB_POLL_INTERVAL"),
		JobMaxAttempts:      e.int("PLAYHEAD_JOB_MAX_ATTEMPTS"),
		JobRetryBase:        e.duration("PLAYHEAD_JOB_RETRY_BASE"),
		JobRetryCap:         e.duration("PLAYHEAD_JOB_RETRY_CAP"),
		JobsFair:            e.bool("PLAYHEAD_JOBS_FAIR"),
		EncodeConcurrency:   e.int("PLAYHEAD_ENCODE_CONCURRENCY"),
		EncodeMaxRunning:    e.int("PLAYHEAD_ENCODE_MAX_RUNNING"),
		EncodeTimeout:       e.duration("PLAYHEAD_ENCODE_TIMEOUT"),
		EncodePreset:        e.str("PLAYHEAD_ENCODE_PRESET"),
		EncodeMode:          e.str("PLAYHEAD_ENCODE_MODE"),
		EncodeRenditionJobs: e.int("PLAYHEAD_ENCODE_RENDITION_JOBS"),
		HLSFormat:           encoder.Format(e.str("PLAYHEAD_HLS_FORMAT")),
		RetentionCompleted:  e.duration("PLAYHEAD_RETENTION_COMPLETED"),
		RetentionDead:       e.duration("PLAYHEAD_RETENTION_DEAD"),
		RetentionInterval:   e.duration("PLAYHEAD_RETENTION_INTERVAL"),
		OutboxRetention:     e.duration("PLAYHEAD_OUTBOX_RETENTION"),
		HistoryRetention:    e.duration("PLAYHEAD_HISTORY_RETENTION"),
		WatchedRanges:       e.bool("PLAYHEAD_WATCHED_RANGES"),
		QualityInterval:     e.duration("PLAYHEAD_QUALITY_INTERVAL"),
		QualityMaxMedia:     e.int("PLAYHEAD_QUALITY_MAX_MEDIA"),

		WebhookAllowPrivate: e.bool("PLAYHEAD_WEBHOOK_ALLOW_PRIVATE"),
		WebhookConcurrency:  e.int("PLAYHEAD_WEBHOOK_CONCURRENCY"),
		WebhookMaxRunning:   e.int("PLAYHEAD_WEBHOOK_MAX_RUNNING"),
		WebhookTimeout:      e.duration("PLAYHEAD_WEBHOOK_TIMEOUT"),
		WebhookMaxAttempts:  e.int("PLAYHEAD_WEBHOOK_MAX_ATTEMPTS"),
		WebhookRetryCap:     e.duration("PLAYHEAD_WEBHOOK_RETRY_CAP"),
		XAPI:                readXAPI(e),

		EventsPerMember:  e.int("PLAYHEAD_EVENTS_PER_MEMBER"),
		EventsMaxStreams: e.int("PLAYHEAD_EVENTS_MAX_STREAMS"),
		EventsHeartbeat:  e.duration("PLAYHEAD_EVENTS_HEARTBEAT"),

		IngestConcurrency:     e.int("PLAYHEAD_INGEST_CONCURRENCY"),
		IngestMaxRunning:      e.int("PLAYHEAD_INGEST_MAX_RUNNING"),
		IngestAllowPrivate:    e.bool("PLAYHEAD_INGEST_ALLOW_PRIVATE"),
		IngestDownloadURL:     e.str("PLAYHEAD_INGEST_DOWNLOAD_URL_TEMPLATE"),
		IngestFallbackURL:     e.str("PLAYHEAD_INGEST_FALLBACK_URL_TEMPLATE"),
		IngestSheetExportURL:  e.str("PLAYHEAD_INGEST_SHEET_EXPORT_URL_TEMPLATE"),
		IngestConnectTimeout:  e.duration("PLAYHEAD_INGEST_CONNECT_TIMEOUT"),
		IngestResponseTimeout: e.duration("PLAYHEAD_INGEST_RESPONSE_TIMEOUT"),
		IngestIdleTimeout:     e.duration("PLAYHEAD_INGEST_IDLE_TIMEOUT"),
		IngestTimeout:         e.duration("PLAYHEAD_INGEST_TIMEOUT"),
		IngestMaxBytes:        e.bytes("PLAYHEAD_INGEST_MAX_BYTES"),
		IngestAttempts:        e.int("PLAYHEAD_INGEST_ATTEMPTS"),
	}
	c.CORSOrigins = e.origins("PLAYHEAD_CORS_ORIGINS")
	// Both are read after what they default from: an explicit 0 is then refused by validate
	// like any value out of range, where 0 as "unset" quietly ran the default for an operator
	// who asked for something else.
	c.BufferMaxKeys = e.intOr("PLAYHEAD_BUFFER_MAX_KEYS", 20*c.BufferCapacity)
	c.FlushAt = e.intOr("PLAYHEAD_FLUSH_AT_KEYS", min(c.FlushBatch, c.BufferMaxKeys))
	var err error
	if c.AudienceSchedule, err = jobqueue.Every(e.duration("PLAYHEAD_AUDIENCE_INTERVAL")); err != nil {
		e.check(false, "PLAYHEAD_AUDIENCE_INTERVAL: %v", err)
	}
	e.database(&c)
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&c.Role, "role", c.Role, "all, api or worker (overrides PLAYHEAD_ROLE)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	return c, c.validate(e)
}

func (c Config) validate(e *env) error {
	c.validateDatabase(e)
	e.check(c.Role == roleAll || c.Role == roleAPI || c.Role == roleWorker, "PLAYHEAD_ROLE: %q is not all, api or worker", c.Role)
	c.validateIdentity(e)
	c.validateSignIn(e)
	e.check(c.ErasureFreshToken >= time.Second, "PLAYHEAD_ERASURE_FRESH_TOKEN: must be at least 1s")
	e.check(c.QualityInterval > 0, "PLAYHEAD_QUALITY_INTERVAL: must be positive")
	e.check(c.QualityMaxMedia > 0, "PLAYHEAD_QUALITY_MAX_MEDIA: must be positive")
	e.check(c.BufferCapacity > 0, "PLAYHEAD_BUFFER_CAPACITY: must be positive")
	e.check(c.BufferMaxKeys >= c.BufferCapacity, "PLAYHEAD_BUFFER_MAX_KEYS: must be at least PLAYHEAD_BUFFER_CAPACITY (%d)", c.BufferCapacity)
	e.check(c.FlushBatch > 0, "PLAYHEAD_FLUSH_BATCH: must be positive")
	e.check(c.FlushAt > 0 && c.FlushAt <= c.BufferMaxKeys,
		"PLAYHEAD_FLUSH_AT_KEYS: must be from 1 to PLAYHEAD_BUFFER_MAX_KEYS (%d)", c.BufferMaxKeys)
	e.check(c.FlushInterval > 0, "PLAYHEAD_FLUSH_INTERVAL: must be positive")
	e.check(c.WriteMode.Valid(), "PLAYHEAD_PLAYBACK_WRITE_MODE: %q is not writebehind or sync", c.WriteMode)
	e.check(c.Completion.Ratio >= 0.5 && c.Completion.Ratio <= 1, "PLAYHEAD_COMPLETION_RATIO: must be from 0.5 to 1")
	e.check(c.Completion.Tail >= 0, "PLAYHEAD_COMPLETION_TAIL: must not be negative")
	e.check(c.Completion.MinRatio >= 0 && c.Completion.MinRatio <= 0.5, "PLAYHEAD_RESUME_MIN_RATIO: must be from 0 to 0.5")
	e.check(c.Completion.Min >= 0, "PLAYHEAD_RESUME_MIN: must not be negative")
	e.check(c.Completion.MinDuration >= 0, "PLAYHEAD_RESUME_MIN_DURATION: must not be negative")
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
	e.check(c.EncodeMaxRunning >= 0, "PLAYHEAD_ENCODE_MAX_RUNNING: must not be negative (0: no limit)")
	e.check(c.IngestMaxRunning >= 0, "PLAYHEAD_INGEST_MAX_RUNNING: must not be negative (0: no limit)")
	e.check(c.WebhookMaxRunning >= 0, "PLAYHEAD_WEBHOOK_MAX_RUNNING: must not be negative (0: no limit)")
	e.check(c.EncodeTimeout > 0, "PLAYHEAD_ENCODE_TIMEOUT: must be positive")
	e.check(c.HLSFormat == encoder.FormatFMP4 || c.HLSFormat == encoder.FormatTS, "PLAYHEAD_HLS_FORMAT: must be fmp4 or ts")
	e.check(c.EncodeMode == "renditions" || c.EncodeMode == "single", "PLAYHEAD_ENCODE_MODE: must be renditions or single")
	e.check(c.EncodeRenditionJobs >= 2, "PLAYHEAD_ENCODE_RENDITION_JOBS: must be at least 2 (the lowest rendition, then the others)")
	e.check(c.RetentionCompleted > 0 && c.RetentionDead > 0 && c.RetentionInterval > 0,
		"PLAYHEAD_RETENTION_COMPLETED/_DEAD/_INTERVAL: must be positive")
	e.check(c.OutboxRetention > 0, "PLAYHEAD_OUTBOX_RETENTION: must be positive")
	e.check(c.HistoryRetention == 0 || c.HistoryRetention >= time.Hour,
		"PLAYHEAD_HISTORY_RETENTION: must be 0 (off) or at least 1h (rows are found by the hour of their last report)")
	e.check(c.HTTPReadTimeout > 0 && c.HTTPIdleTimeout > 0, "PLAYHEAD_HTTP_READ_TIMEOUT/_IDLE_TIMEOUT: must be positive")
	e.check(c.PutRate >= 0, "PLAYHEAD_PUT_RATE: must not be negative (0 turns the limit off)")
	e.check(c.PutBurst >= 1, "PLAYHEAD_PUT_BURST: must be at least 1")
	e.check(c.WebhookConcurrency >= 1, "PLAYHEAD_WEBHOOK_CONCURRENCY: must be at least 1")
	e.check(c.WebhookTimeout > 0, "PLAYHEAD_WEBHOOK_TIMEOUT: must be positive")
	e.check(c.WebhookMaxAttempts >= 1, "PLAYHEAD_WEBHOOK_MAX_ATTEMPTS: must be at least 1")
	e.check(c.WebhookRetryCap >= c.JobRetryBase, "PLAYHEAD_WEBHOOK_RETRY_CAP: must be at least PLAYHEAD_JOB_RETRY_BASE")
	c.XAPI.validate(e)
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
	c.DatabaseURL = e.str("DATABASE_URL")
	c.DBPooler = e.str("PLAYHEAD_DB_POOLER")
	c.DatabaseDirectURL = cmp.Or(e.str("PLAYHEAD_DATABASE_DIRECT_URL"), c.DatabaseURL)
}

// loadDatabaseConfig reads and validates only the database variables, for playhead migrate:
// the same rules as serve, so that a migration never runs through a transaction pooler.
func loadDatabaseConfig() (Config, error) {
	e := env{lookup: os.LookupEnv}
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
