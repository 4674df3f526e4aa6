package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/playback"
)

// Config is the whole operator interface: every field comes from one PLAYHEAD_* (or
// DATABASE_URL) environment variable, documented in the README's table.
type Config struct {
	// DatabaseURL is the PostgreSQL connection string (DATABASE_URL). Required.
	DatabaseURL string
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
	// FlushBatch flushes once this many distinct keys are held (PLAYHEAD_FLUSH_BATCH). Default 1 000.
	FlushBatch int
	// FlushInterval flushes at least this often (PLAYHEAD_FLUSH_INTERVAL). Default 5 s.
	FlushInterval time.Duration
	// WriteMode is writebehind or sync (PLAYHEAD_PLAYBACK_WRITE_MODE). Default writebehind.
	WriteMode playback.Mode
	// CacheTTL and CacheNegativeTTL bound how long found and missing media are trusted
	// (PLAYHEAD_CACHE_TTL, PLAYHEAD_CACHE_NEGATIVE_TTL). Defaults 60 s and 5 s.
	CacheTTL, CacheNegativeTTL time.Duration
	// CacheMaxItems bounds the media cache (PLAYHEAD_CACHE_MAX_ITEMS). Default 100 000.
	CacheMaxItems int
	// ShutdownTimeout is the whole budget of a graceful stop (PLAYHEAD_SHUTDOWN_TIMEOUT). Default 30 s.
	ShutdownTimeout time.Duration
	// DBMaxConns caps the pool (PLAYHEAD_DB_MAX_CONNS). Default 0: pgx's default, max(4, cores).
	DBMaxConns int
	// MaxBodyBytes bounds request bodies read into memory (PLAYHEAD_MAX_BODY_BYTES). Default 64 KiB.
	MaxBodyBytes int
	// LogLevel is debug, info, warn or error (PLAYHEAD_LOG_LEVEL). Default info.
	LogLevel string
}

// roles a node can run.
const (
	roleAll = "all"
	roleAPI = "api"
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
		DatabaseURL:      e.str("DATABASE_URL", ""),
		Role:             e.str("PLAYHEAD_ROLE", roleAll),
		HTTPAddr:         e.str("PLAYHEAD_HTTP_ADDR", ":8080"),
		MetricsAddr:      e.str("PLAYHEAD_METRICS_ADDR", "127.0.0.1:9464"),
		JWTSecret:        e.str("PLAYHEAD_JWT_SECRET", ""),
		BufferCapacity:   e.int("PLAYHEAD_BUFFER_CAPACITY", 10_000),
		FlushBatch:       e.int("PLAYHEAD_FLUSH_BATCH", 1_000),
		FlushInterval:    e.duration("PLAYHEAD_FLUSH_INTERVAL", 5*time.Second),
		WriteMode:        playback.Mode(e.str("PLAYHEAD_PLAYBACK_WRITE_MODE", string(playback.ModeWriteBehind))),
		CacheTTL:         e.duration("PLAYHEAD_CACHE_TTL", 60*time.Second),
		CacheNegativeTTL: e.duration("PLAYHEAD_CACHE_NEGATIVE_TTL", 5*time.Second),
		CacheMaxItems:    e.int("PLAYHEAD_CACHE_MAX_ITEMS", 100_000),
		ShutdownTimeout:  e.duration("PLAYHEAD_SHUTDOWN_TIMEOUT", 30*time.Second),
		DBMaxConns:       e.int("PLAYHEAD_DB_MAX_CONNS", 0),
		MaxBodyBytes:     e.int("PLAYHEAD_MAX_BODY_BYTES", 64<<10),
		LogLevel:         e.str("PLAYHEAD_LOG_LEVEL", "info"),
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&c.Role, "role", c.Role, "all or api (overrides PLAYHEAD_ROLE)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	return c, c.validate(&e)
}

func (c Config) validate(e *env) error {
	e.check(c.DatabaseURL != "", "DATABASE_URL is required (make run starts a local cluster and sets it)")
	e.check(c.Role == roleAll || c.Role == roleAPI, "PLAYHEAD_ROLE: %q is not all or api (the worker role arrives with the media pipeline)", c.Role)
	e.check(len(c.JWTSecret) >= auth.MinSecretBytes, "PLAYHEAD_JWT_SECRET: must be at least %d bytes (make run generates one)", auth.MinSecretBytes)
	e.check(c.BufferCapacity > 0, "PLAYHEAD_BUFFER_CAPACITY: must be positive")
	e.check(c.FlushBatch > 0, "PLAYHEAD_FLUSH_BATCH: must be positive")
	e.check(c.FlushInterval > 0, "PLAYHEAD_FLUSH_INTERVAL: must be positive")
	e.check(c.WriteMode.Valid(), "PLAYHEAD_PLAYBACK_WRITE_MODE: %q is not writebehind or sync", c.WriteMode)
	e.check(c.CacheTTL > 0, "PLAYHEAD_CACHE_TTL: must be positive")
	e.check(c.CacheNegativeTTL > 0, "PLAYHEAD_CACHE_NEGATIVE_TTL: must be positive")
	e.check(c.CacheMaxItems > 0, "PLAYHEAD_CACHE_MAX_ITEMS: must be positive")
	e.check(c.ShutdownTimeout > 0, "PLAYHEAD_SHUTDOWN_TIMEOUT: must be positive")
	e.check(c.DBMaxConns >= 0, "PLAYHEAD_DB_MAX_CONNS: must not be negative")
	e.check(c.MaxBodyBytes >= playback.MaxBodyBytes, "PLAYHEAD_MAX_BODY_BYTES: must be at least %d", playback.MaxBodyBytes)
	_, err := parseLogLevel(c.LogLevel)
	e.check(err == nil, "PLAYHEAD_LOG_LEVEL: %q is not debug, info, warn or error", c.LogLevel)
	return errors.Join(e.errs...)
}
