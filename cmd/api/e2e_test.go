package main

// End-to-end tests of the binary's commands: the real binary (built once by TestMain through
// internal/binarytest), real PostgreSQL, real HTTP over loopback. Timeouts only bound how long
// a test waits before giving up; no test asserts how fast anything is.

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/pgtest"
)

// TestServe_RejectsBadConfiguration checks that invalid variables stop the process with
// status 1 and an error naming each of them.
func TestServe_RejectsBadConfiguration(t *testing.T) {
	p := binarytest.Run(t, map[string]string{
		"DATABASE_URL":             "postgres://127.0.0.1:1/none?sslmode=disable", // never reached
		"PLAYHEAD_JWT_SECRET":      "too-short",
		"PLAYHEAD_FLUSH_INTERVAL":  "banana",
		"PLAYHEAD_BUFFER_MAX_KEYS": "20000",
		"PLAYHEAD_FLUSH_AT_KEYS":   "20001", // more than the buffer may hold: it would never trigger
		"PLAYHEAD_HTTP_ADDR":       "127.0.0.1:0",
		"PLAYHEAD_METRICS_ADDR":    "127.0.0.1:0",
	}, "serve")
	if code := p.Wait(t, binarytest.ExitTimeout); code != 1 {
		t.Errorf("exit status %d, want 1", code)
	}
	stderr := p.Stderr.String()
	for _, name := range []string{"PLAYHEAD_FLUSH_INTERVAL", "PLAYHEAD_JWT_SECRET", "PLAYHEAD_FLUSH_AT_KEYS"} {
		if !strings.Contains(stderr, name) {
			t.Errorf("stderr does not name %s:\n%s", name, stderr)
		}
	}
}

// TestServe_FlushAtKeysReachesTheBuffer: serve hands PLAYHEAD_FLUSH_AT_KEYS to the playback
// buffer (the buffer's own tests cannot see the wiring): with a batch of 1 and the trigger at
// 3 keys, two reported keys are held unwritten (the batch size would have flushed each at
// once), and the third writes all three, one row per statement.
func TestServe_FlushAtKeysReachesTheBuffer(t *testing.T) {
	s := binarytest.Start(t, map[string]string{"PLAYHEAD_PUT_RATE": "0", "PLAYHEAD_FLUSH_INTERVAL": "1h",
		"PLAYHEAD_FLUSH_BATCH": "1", "PLAYHEAD_FLUSH_AT_KEYS": "3"})
	mediaID := s.CreateMedia(t, binarytest.Token(t, 1, true), "e2e flush at keys")
	url := s.URL("/v1/playback/%d", mediaID)
	report := func(member int64) {
		s.MustDo(t, http.StatusNoContent, http.MethodPut, url, binarytest.Token(t, member, false), map[string]any{"position_ms": 5_000})
	}
	held := func() float64 { return s.Metric(t, "playhead_playback_buffer_held_keys") }
	flushes := func() float64 { return s.Metric(t, "playhead_playback_buffer_flush_rows_count") }
	report(2)
	report(3)
	// Either outcome ends the wait: the flusher holding both keys, or a flush (the trigger
	// on the batch size of 1 writes the first key as soon as the flusher receives it).
	waitFor(t, time.Minute, "2 keys held or a flush", func() bool { return held() == 2 || flushes() > 0 }, s)
	if n := flushes(); n != 0 {
		t.Fatalf("%v flushes with 2 keys held, want none before PLAYHEAD_FLUSH_AT_KEYS (3) keys", n)
	}
	report(4)
	waitFor(t, time.Minute, "the write of the three keys in 3 flushes", func() bool { return flushes() == 3 && held() == 0 }, s)
	if rows := s.Metric(t, "playhead_playback_buffer_flush_rows_sum"); rows != 3 {
		t.Errorf("%v rows in 3 statements, want 3 (PLAYHEAD_FLUSH_BATCH 1)", rows)
	}
	if stored := binarytest.StoredPositions(t, s.DBURL); len(stored) != 3 {
		t.Errorf("%d rows stored, want 3: %v", len(stored), stored)
	}
}

// TestServe_FailedBuildClosesWhatItOpened: a component that cannot be built after the pool is
// open (a storage directory that is a file) stops the start-up with an error that names its
// setting, and what was opened is closed, not a panic.
func TestServe_FailedBuildClosesWhatItOpened(t *testing.T) {
	notADir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notADir, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := binarytest.Run(t, map[string]string{
		"DATABASE_URL":          pgtest.URL(t),
		"PLAYHEAD_JWT_SECRET":   binarytest.Secret,
		"PLAYHEAD_STORAGE_DIR":  notADir,
		"PLAYHEAD_SPILL_DIR":    t.TempDir(),
		"PLAYHEAD_HTTP_ADDR":    binarytest.FreeAddr(t),
		"PLAYHEAD_METRICS_ADDR": binarytest.FreeAddr(t),
	}, "serve")
	if code := p.Wait(t, binarytest.ExitTimeout); code != 1 {
		t.Errorf("exit status %d, want 1", code)
	}
	stderr := p.Stderr.String()
	if !strings.Contains(stderr, "PLAYHEAD_STORAGE_DIR") || strings.Contains(stderr, "panic") {
		t.Errorf("stderr should name PLAYHEAD_STORAGE_DIR and hold no panic:\n%s", stderr)
	}
}

// TestServe_MetricsExposed checks that /metrics on the metrics address carries the figures the
// dashboards use, that the public address does not serve it, and that both answer /healthz.
func TestServe_MetricsExposed(t *testing.T) {
	s := binarytest.Start(t, nil)
	admin := binarytest.Token(t, 1, true)
	mediaID := s.CreateMedia(t, admin, "e2e metrics")
	member := binarytest.Token(t, 42, false)
	url := s.URL("/v1/playback/%d", mediaID)
	s.MustDo(t, http.StatusNoContent, http.MethodPut, url, member, map[string]any{"position_ms": 61_000})
	out := s.MustDo(t, http.StatusOK, http.MethodGet, url, member, nil)
	var got struct {
		PositionMS int32 `json:"position_ms"`
	}
	if err := json.Unmarshal(out, &got); err != nil || got.PositionMS != 61_000 {
		t.Errorf("GET after PUT 61000: %s (%v), want position_ms 61000", out, err)
	}

	metrics := s.Metrics(t)
	for _, name := range []string{
		"playhead_playback_buffer_depth",
		"playhead_playback_buffer_capacity",
		"playhead_playback_buffer_offered_total",
		"playhead_playback_buffer_lost_total",
		"playhead_playback_buffer_retry_held_keys",
		"playhead_playback_buffer_retry_oldest_age_seconds",
		"playhead_playback_buffer_coalesced_total",
		"playhead_playback_buffer_flush_duration_seconds",
		"playhead_playback_buffer_flush_rows",
		"playhead_playback_buffer_flush_failures_total",
		"playhead_media_cache_hits_total",
		"playhead_media_cache_misses_total",
		"playhead_media_cache_evictions_total",
		"playhead_http_requests_total",
		"playhead_http_request_duration_seconds",
		"playhead_db_pool_acquired_conns",
		"playhead_db_pool_idle_conns",
		"playhead_db_pool_total_conns",
		"playhead_db_pool_max_conns",
		"playhead_db_pool_acquires_total",
		"playhead_db_pool_acquire_duration_seconds",
		"playhead_db_pool_empty_acquires_total",
	} {
		if !strings.Contains(metrics, "\n# TYPE "+name+" ") {
			t.Errorf("/metrics has no metric %s", name)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", metrics)
	}

	s.MustDo(t, http.StatusNotFound, http.MethodGet, s.URL("/metrics"), "", nil)
	s.MustDo(t, http.StatusOK, http.MethodGet, s.URL("/healthz"), "", nil)
	s.MustDo(t, http.StatusOK, http.MethodGet, s.MetricsURL+"/healthz", "", nil)
}

// TestToken_PrintsVerifiableTokens checks `playhead token`: one verifiable token per line for
// consecutive members, and a refusal without the secret.
func TestToken_PrintsVerifiableTokens(t *testing.T) {
	p := binarytest.Run(t, map[string]string{"PLAYHEAD_JWT_SECRET": binarytest.Secret}, "token", "--member", "5", "--count", "3", "--admin")
	if code := p.Wait(t, binarytest.ExitTimeout); code != 0 {
		t.Fatalf("playhead token: exit status %d, want 0", code)
	}
	lines := strings.Fields(p.Stdout.String())
	if len(lines) != 3 {
		t.Fatalf("playhead token --count 3 printed %d tokens, want 3:\n%s", len(lines), p.Stdout)
	}
	verifier, err := auth.NewVerifier([]byte(binarytest.Secret), 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, tok := range lines {
		id, err := verifier.Verify(tok)
		if err != nil {
			t.Errorf("token %d does not verify: %v", i+1, err)
			continue
		}
		if id.MemberID != int64(5+i) || !id.Admin || !id.Expires.After(time.Now()) {
			t.Errorf("token %d is for %+v, want member %d, admin, expiring later", i+1, id, 5+i)
		}
	}

	noSecret := binarytest.Run(t, nil, "token", "--member", "5")
	if code := noSecret.Wait(t, binarytest.ExitTimeout); code != 1 {
		t.Errorf("playhead token without PLAYHEAD_JWT_SECRET: exit status %d, want 1", code)
	}
	if !strings.Contains(noSecret.Stderr.String(), "PLAYHEAD_JWT_SECRET") {
		t.Errorf("playhead token without the secret does not name PLAYHEAD_JWT_SECRET:\n%s", noSecret.Stderr)
	}
	if out := noSecret.Stdout.String(); out != "" {
		t.Errorf("playhead token without the secret printed %q", out)
	}
}
