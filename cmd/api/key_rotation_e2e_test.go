package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/internal/binarytest"
)

// TestKeyRotation_UnderLoad rotates the signing key of a node in the JWKS file mode while
// players report, the way an operator's backend does it (scripts/key-rotation.sh is the same
// with 2 000 players): the new key is published beside the old, the players switch to tokens
// of the new key, the old key is withdrawn. No report is refused while both keys are
// published, nor after the switch; once the node has read the withdrawal, every old-key
// token is refused 401 though each is cached and an hour from its expiry.
func TestKeyRotation_UnderLoad(t *testing.T) {
	const issuer, audience, players = "https://keys.example.test/", "playhead", 40
	dir := t.TempDir()
	file := filepath.Join(dir, "jwks.json")
	oldKey, newKey := rotationKey(t, "old"), rotationKey(t, "new")
	publishKeys(t, file, oldKey)
	s := binarytest.Start(t, map[string]string{
		"PLAYHEAD_OIDC_ISSUER": issuer, "PLAYHEAD_OIDC_AUDIENCE": audience, "PLAYHEAD_JWKS_FILE": file,
		"PLAYHEAD_OIDC_ADMIN_CLAIM": "roles", "PLAYHEAD_OIDC_ADMIN_VALUE": "playhead-admin",
		"PLAYHEAD_PUT_RATE": "0",
	})
	mint := func(k rotationSigner, subject string, extra map[string]any) string {
		tok, err := auth.MintWithKey(k.key, k.kid, auth.KeyClaims{Issuer: issuer, Audience: audience, Subject: subject, TTL: time.Hour, Extra: extra})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	var m struct{ ID int64 }
	out := s.MustDo(t, http.StatusCreated, http.MethodPost, s.URL("/v1/admin/media"),
		mint(oldKey, "rotation-admin", map[string]any{"roles": []string{"playhead-admin"}}),
		map[string]any{"title": "rotation", "duration_ms": binarytest.MediaDurationMS})
	if err := json.Unmarshal(out, &m); err != nil || m.ID <= 0 {
		t.Fatalf("POST /v1/admin/media answered %s (%v)", out, err)
	}

	// Each player reports with the token of the current phase's key, as fast as it is answered.
	var (
		phase    atomic.Int32 // 0: old-key tokens; 1: new-key tokens
		accepted [2]atomic.Int64
		refused  [2]atomic.Int64
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	oldTokens := make([]string, players)
	for i := range players {
		subject := fmt.Sprintf("rotation-player-%d", i)
		tokens := [2]string{mint(oldKey, subject, nil), mint(newKey, subject, nil)}
		oldTokens[i] = tokens[0]
		wg.Go(func() {
			for pos := 1; ; pos++ {
				select {
				case <-stop:
					return
				default:
				}
				p := phase.Load()
				status, body, err := s.Do(http.MethodPut, s.URL("/v1/playback/%d", m.ID), tokens[p], map[string]any{"position_ms": pos * 1000})
				switch {
				case err != nil:
					t.Errorf("player %d: %v", i, err)
					return
				case status == http.StatusNoContent:
					accepted[p].Add(1)
				default:
					refused[p].Add(1)
					t.Errorf("player %d, key %d: %d %s", i, p, status, body)
				}
			}
		})
	}
	t.Cleanup(func() { close(stop); wg.Wait() })
	awaitReports := func(p int32, n int64) {
		t.Helper()
		for from := accepted[p].Load(); accepted[p].Load() < from+n; {
			if t.Failed() {
				t.FailNow()
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	awaitKeys := func(n float64) {
		t.Helper()
		for s.Metric(t, "playhead_jwks_keys") != n {
			if t.Failed() {
				t.FailNow()
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	awaitReports(0, 2*players)
	publishKeys(t, file, oldKey, newKey)
	awaitKeys(2)
	awaitReports(0, 2*players) // both keys published, the players still on the old
	phase.Store(1)
	awaitReports(1, 2*players)
	publishKeys(t, file, newKey)
	awaitKeys(1)
	awaitReports(1, 2*players) // the old key withdrawn, the players on the new

	unknown := refusals(t, s, "unknown_key")
	for i, tok := range oldTokens {
		status, body, err := s.Do(http.MethodGet, s.URL("/v1/playback/"), tok, nil)
		if err != nil || status != http.StatusUnauthorized {
			t.Fatalf("player %d's old-key token after the withdrawal: %d %s (%v), want 401", i, status, body, err)
		}
	}
	if got := refusals(t, s, "unknown_key") - unknown; got != players {
		t.Errorf("unknown_key refusals grew by %v for %d old-key tokens", got, players)
	}
	if r0, r1 := refused[0].Load(), refused[1].Load(); r0+r1 != 0 {
		t.Errorf("reports refused: %d with old-key tokens, %d with new-key tokens; want none", r0, r1)
	}
	t.Logf("reports accepted: %d with the old key, %d with the new", accepted[0].Load(), accepted[1].Load())
}

// rotationSigner is a key pair of the operator's backend.
type rotationSigner struct {
	key crypto.Signer
	kid string
}

func rotationKey(t *testing.T, kid string) rotationSigner {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return rotationSigner{key, kid}
}

// publishKeys writes the public JWKS of keys to file by rename, as an operator rotating keys
// does (the node never reads half a file).
func publishKeys(t *testing.T, file string, keys ...rotationSigner) {
	t.Helper()
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	for _, k := range keys {
		doc, err := auth.PublicJWKS(k.key, k.kid)
		if err != nil {
			t.Fatal(err)
		}
		var one struct{ Keys []json.RawMessage }
		if err := json.Unmarshal(doc, &one); err != nil {
			t.Fatal(err)
		}
		set.Keys = append(set.Keys, one.Keys...)
	}
	raw, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
}
