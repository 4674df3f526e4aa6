package main

import (
	"cmp"
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/encoder"
	"github.com/playhead/playhead/internal/binarytest"
)

// TestConfig_Pooler: a transaction pooler needs a direct URL for what needs a session, and the
// direct URL defaults to DATABASE_URL otherwise.
func TestConfig_Pooler(t *testing.T) {
	const pooled, direct = "postgres://u@127.0.0.1:6432/db", "postgres://u@127.0.0.1:5432/db"
	for _, tc := range []struct {
		name, pooler, directURL string
		wantErr                 string // "" when valid
		wantDirect              string
	}{
		{name: "no pooler, no direct URL", wantDirect: pooled},
		{name: "no pooler, direct URL", directURL: direct, wantDirect: direct},
		{name: "transaction with direct URL", pooler: "transaction", directURL: direct, wantDirect: direct},
		{name: "transaction without direct URL", pooler: "transaction", wantErr: "PLAYHEAD_DATABASE_DIRECT_URL: required"},
		{name: "transaction with the same URL", pooler: "transaction", directURL: pooled, wantErr: "PLAYHEAD_DATABASE_DIRECT_URL: required"},
		{name: "unknown pooler", pooler: "statement", directURL: direct, wantErr: `PLAYHEAD_DB_POOLER: "statement"`},
		{name: "bad direct URL", directURL: "postgres://u@127.0.0.1:notaport/db", wantErr: "PLAYHEAD_DATABASE_DIRECT_URL:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, ok := loadTestConfig(t, map[string]string{
				"DATABASE_URL": pooled, "PLAYHEAD_DB_POOLER": tc.pooler, "PLAYHEAD_DATABASE_DIRECT_URL": tc.directURL,
			}, tc.wantErr)
			if !ok {
				return
			}
			if cfg.DatabaseDirectURL != tc.wantDirect {
				t.Errorf("direct URL %q, want %q", cfg.DatabaseDirectURL, tc.wantDirect)
			}
		})
	}
}

// TestMigrate_PoolerConfig: playhead migrate reads the database variables as serve does, so a
// transaction pooler without a direct URL (goose's session lock and pgx's named statements
// through PgBouncer) or an unknown pooler is refused before anything connects.
func TestMigrate_PoolerConfig(t *testing.T) {
	// Nothing listens on port 1: a migration that tried to connect would fail on that, not on
	// the configuration.
	const pooled = "postgres://u@127.0.0.1:1/db"
	for _, tc := range []struct {
		name, pooler, directURL, wantErr string
	}{
		{"transaction without direct URL", "transaction", "", "PLAYHEAD_DATABASE_DIRECT_URL: required"},
		{"transaction with the same URL", "transaction", pooled, "PLAYHEAD_DATABASE_DIRECT_URL: required"},
		{"unknown pooler", "statement", "postgres://u@127.0.0.1:2/db", `PLAYHEAD_DB_POOLER: "statement"`},
		{"bad direct URL", "", "postgres://u@127.0.0.1:notaport/db", "PLAYHEAD_DATABASE_DIRECT_URL:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("DATABASE_URL", pooled)
			t.Setenv("PLAYHEAD_DB_POOLER", tc.pooler)
			t.Setenv("PLAYHEAD_DATABASE_DIRECT_URL", tc.directURL)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := runMigrate(ctx, nil)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestConfig_FlushAt: PLAYHEAD_FLUSH_AT_KEYS defaults to PLAYHEAD_FLUSH_BATCH (the key bound if
// smaller) and is otherwise taken from 1 to PLAYHEAD_BUFFER_MAX_KEYS; anything else, 0 set
// explicitly included, is refused with an error naming the variable.
func TestConfig_FlushAt(t *testing.T) {
	const name = "PLAYHEAD_FLUSH_AT_KEYS"
	for _, tc := range []struct {
		caseName                 string
		batch, maxKeys, capacity string // "" leaves the variable unset
		flushAt                  string
		want                     int
		wantErr                  string // "" when valid
	}{
		{caseName: "unset: the batch size", want: 1_000},
		{caseName: "unset, batch above the key bound: the bound", capacity: "100", maxKeys: "300", batch: "500", want: 300},
		{caseName: "above the batch", flushAt: "50000", want: 50_000},
		{caseName: "the key bound", flushAt: "200000", want: 200_000},
		{caseName: "above the key bound", flushAt: "200001", wantErr: name + ": must be from 1 to PLAYHEAD_BUFFER_MAX_KEYS (200000)"},
		{caseName: "above an explicit key bound", capacity: "100", maxKeys: "300", flushAt: "301", wantErr: name + ": must be from 1"},
		{caseName: "zero", flushAt: "0", wantErr: name + ": must be from 1"},
		{caseName: "negative", flushAt: "-5", wantErr: name + ": must be from 1"},
		{caseName: "not a number", flushAt: "lots", wantErr: name + `: "lots" is not an integer`},
	} {
		t.Run(tc.caseName, func(t *testing.T) {
			cfg, ok := loadTestConfig(t, map[string]string{
				"PLAYHEAD_BUFFER_CAPACITY": tc.capacity, "PLAYHEAD_BUFFER_MAX_KEYS": tc.maxKeys,
				"PLAYHEAD_FLUSH_BATCH": tc.batch, name: tc.flushAt,
			}, tc.wantErr)
			if !ok {
				return
			}
			if cfg.FlushAt != tc.want {
				t.Errorf("FlushAt %d, want %d", cfg.FlushAt, tc.want)
			}
		})
	}
}

// TestConfig_BufferMaxKeys: the key bound defaults to 20 × the capacity, and an explicit 0 is
// refused like any value below the capacity instead of quietly meaning the default.
func TestConfig_BufferMaxKeys(t *testing.T) {
	const name = "PLAYHEAD_BUFFER_MAX_KEYS"
	for _, tc := range []struct {
		caseName, capacity, maxKeys string // "" leaves the variable unset
		want                        int
		wantErr                     string // "" when valid
	}{
		{caseName: "unset: 20 × the default capacity", want: 200_000},
		{caseName: "unset: 20 × an explicit capacity", capacity: "100", want: 2_000},
		{caseName: "the capacity", capacity: "100", maxKeys: "100", want: 100},
		{caseName: "below the capacity", capacity: "100", maxKeys: "99", wantErr: name + ": must be at least PLAYHEAD_BUFFER_CAPACITY (100)"},
		{caseName: "zero", maxKeys: "0", wantErr: name + ": must be at least"},
		{caseName: "not a number", maxKeys: "many", wantErr: name + `: "many" is not an integer`},
	} {
		t.Run(tc.caseName, func(t *testing.T) {
			cfg, ok := loadTestConfig(t, map[string]string{
				"PLAYHEAD_BUFFER_CAPACITY": tc.capacity, name: tc.maxKeys, "PLAYHEAD_FLUSH_AT_KEYS": "",
			}, tc.wantErr)
			if !ok {
				return
			}
			if cfg.BufferMaxKeys != tc.want {
				t.Errorf("BufferMaxKeys %d, want %d", cfg.BufferMaxKeys, tc.want)
			}
		})
	}
}

// loadTestConfig runs loadConfig with a valid DATABASE_URL and secret, no pooler, and env on
// top of them ("" leaves a variable unset). It fails t unless the error contains wantErr, or
// there is no error when wantErr is "". ok is true when there is a Config to check.
func loadTestConfig(t *testing.T, env map[string]string, wantErr string) (_ Config, ok bool) {
	t.Helper()
	base := map[string]string{
		"DATABASE_URL":                 "postgres://u@127.0.0.1:5432/db",
		"PLAYHEAD_JWT_SECRET":          binarytest.Secret,
		"PLAYHEAD_DB_POOLER":           "",
		"PLAYHEAD_DATABASE_DIRECT_URL": "",
	}
	maps.Copy(base, env)
	for k, v := range base {
		t.Setenv(k, v)
	}
	cfg, err := loadConfig(nil)
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("error %v, want one containing %q", err, wantErr)
		}
		return Config{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return cfg, true
}

// TestConfig_HLSFormat: new encodes are fMP4 unless PLAYHEAD_HLS_FORMAT says ts; anything else
// stops the start with the variable named.
func TestConfig_HLSFormat(t *testing.T) {
	const name = "PLAYHEAD_HLS_FORMAT"
	for _, tc := range []struct {
		value   string
		want    encoder.Format
		wantErr string
	}{
		{value: "", want: encoder.FormatFMP4},
		{value: "fmp4", want: encoder.FormatFMP4},
		{value: "ts", want: encoder.FormatTS},
		{value: "TS", wantErr: name + ": must be fmp4 or ts"},
		{value: "cmaf", wantErr: name + ": must be fmp4 or ts"},
	} {
		t.Run(cmp.Or(tc.value, "unset"), func(t *testing.T) {
			cfg, ok := loadTestConfig(t, map[string]string{name: tc.value}, tc.wantErr)
			if ok && cfg.HLSFormat != tc.want {
				t.Errorf("HLSFormat %q, want %q", cfg.HLSFormat, tc.want)
			}
		})
	}
}

// TestConfig_EncodeRenditionJobs: an encode group splits its ladder into 2 rendition jobs
// unless PLAYHEAD_ENCODE_RENDITION_JOBS says more; fewer than 2, or not a number, stops the
// start with the variable named.
func TestConfig_EncodeRenditionJobs(t *testing.T) {
	const name = "PLAYHEAD_ENCODE_RENDITION_JOBS"
	for _, tc := range []struct {
		value   string
		want    int
		wantErr string
	}{
		{value: "", want: 2},
		{value: "2", want: 2},
		{value: "5", want: 5},
		{value: "1", wantErr: name + ": must be at least 2"},
		{value: "0", wantErr: name + ": must be at least 2"},
		{value: "two", wantErr: name},
	} {
		t.Run(cmp.Or(tc.value, "unset"), func(t *testing.T) {
			cfg, ok := loadTestConfig(t, map[string]string{name: tc.value}, tc.wantErr)
			if ok && cfg.EncodeRenditionJobs != tc.want {
				t.Errorf("EncodeRenditionJobs %d, want %d", cfg.EncodeRenditionJobs, tc.want)
			}
		})
	}
}

// TestConfig_CORSOrigins: unset, no origin (no CORS); a list is read as browsers send origins;
// an entry that is not an origin stops the start, naming the variable and the entry.
func TestConfig_CORSOrigins(t *testing.T) {
	const name = "PLAYHEAD_CORS_ORIGINS"
	for _, tc := range []struct {
		value   string
		want    []string
		wantErr string
	}{
		{value: ""},
		{value: "https://www.School.example, http://127.0.0.1:8081", want: []string{"https://www.school.example", "http://127.0.0.1:8081"}},
		{value: "*", wantErr: name + `: "*": not an http or https origin`},
		{value: "https://ok.example,https://www.school.example/", wantErr: name + `: "https://www.school.example/": an origin has no user, path`},
		{value: "https://www.school.example:443", wantErr: name + `: "https://www.school.example:443": a browser leaves the default port out of Origin: write https://www.school.example`},
	} {
		t.Run(cmp.Or(tc.value, "unset"), func(t *testing.T) {
			cfg, ok := loadTestConfig(t, map[string]string{name: tc.value}, tc.wantErr)
			if ok && strings.Join(cfg.CORSOrigins, " ") != strings.Join(tc.want, " ") {
				t.Errorf("CORSOrigins %q, want %q", cfg.CORSOrigins, tc.want)
			}
		})
	}
}
