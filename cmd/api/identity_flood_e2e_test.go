package main

import (
	"bufio"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/oidctest"
)

// TestIdentity_ForgedKidFloodAtTheProvider sends floods of tokens with forged kids (the
// provider's issuer and audience, an attacker's key) to a node reading the real provider's
// keys by discovery. Counted in the provider's own log, they make at most one read of its
// /keys per auth.UnknownKeyRefetch beyond the node's scheduled reads; each is refused 401 and
// counted as unknown_key. With the provider stopped, a flood is refused 401 too, never 500,
// and a token of its known key keeps working.
func TestIdentity_ForgedKidFloodAtTheProvider(t *testing.T) {
	viewer := oidctest.User{ID: "auth0|flood-viewer", Username: "viewer", Password: "pw-viewer"}
	p := oidctest.Start(t, oidctest.Options{Users: []oidctest.User{viewer}, RedirectURIs: []string{"http://127.0.0.1:1/callback"}})
	s := binarytest.Start(t, map[string]string{"PLAYHEAD_OIDC_ISSUER": p.Issuer, "PLAYHEAD_OIDC_AUDIENCE": p.ClientID})
	s.MustDo(t, http.StatusOK, http.MethodGet, s.URL("/v1/playback/"), p.SignIn(t, viewer.Username, viewer.Password), nil)
	unused := p.SignIn(t, viewer.Username, viewer.Password)

	attacker, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	forged := 0
	flood := func(n int) {
		t.Helper()
		tokens := make([]string, n)
		for i := range tokens {
			forged++
			tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"iss": p.Issuer, "aud": p.ClientID, "sub": viewer.ID,
				"iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()})
			tok.Header["kid"] = fmt.Sprintf("forged-%d", forged)
			if tokens[i], err = tok.SignedString(attacker); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		for i, tok := range tokens {
			wg.Go(func() {
				status, body, err := s.Do(http.MethodGet, s.URL("/v1/playback/"), tok, nil)
				if err != nil || status != http.StatusUnauthorized {
					t.Errorf("forged kid %d: %d %s (%v), want 401", i, status, body, err)
				}
			})
		}
		wg.Wait()
	}

	start := time.Now()
	keys, scheduled, unknown := p.Requests("/keys"), keyReads(t, s, "schedule"), refusals(t, s, "unknown_key")
	flood(200)
	flood(200)
	reads := p.Requests("/keys") - keys - int(keyReads(t, s, "schedule")-scheduled)
	if most := 1 + int(time.Since(start)/auth.UnknownKeyRefetch); reads > most {
		t.Errorf("400 forged kids in %v made the provider serve /keys %d times beyond the schedule, want at most %d (one per %v)",
			time.Since(start).Round(time.Millisecond), reads, most, auth.UnknownKeyRefetch)
	}
	if got := refusals(t, s, "unknown_key") - unknown; got != 400 {
		t.Errorf("unknown_key refusals grew by %v for 400 forged kids", got)
	}

	p.Stop()
	unknown = refusals(t, s, "unknown_key")
	flood(200)
	if got := refusals(t, s, "unknown_key") - unknown; got != 200 {
		t.Errorf("with the provider down, unknown_key refusals grew by %v for 200 forged kids", got)
	}
	// Never verified before, so not from the cache: the key read before the outage checks it.
	s.MustDo(t, http.StatusOK, http.MethodGet, s.URL("/v1/playback/"), unused, nil)
	t.Logf("400 forged kids with the provider up: %d reads of its /keys beyond the schedule", reads)
}

// keyReads reads playhead_jwks_refresh_attempts_total{trigger} off the node's /metrics.
func keyReads(t *testing.T, s *binarytest.Server, trigger string) float64 {
	t.Helper()
	prefix := fmt.Sprintf("playhead_jwks_refresh_attempts_total{trigger=%q} ", trigger)
	sc := bufio.NewScanner(strings.NewReader(s.Metrics(t)))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("no %s… on /metrics", prefix)
	return 0
}
