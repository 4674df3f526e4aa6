package main

import (
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/oidctest"
)

// TestIdentity_ForgedKidFloodAtTheProvider sends floods of tokens with forged kids (the
// provider's issuer and audience, an attacker's key) to two nodes reading the real provider's
// keys by discovery. Counted in the provider's own log, those to the first make at most one
// read of its /keys per auth.UnknownKeyRefetch beyond the nodes' scheduled reads; each is
// refused 401 and counted as unknown_key. With the provider stopped, a flood to the second is
// refused 401 too, never 500, and its one attempt to read the keys is counted in
// playhead_jwks_refresh_failures_total, the metric of the PlayheadIdentityProviderUnreachable
// alert; a token of the key it read keeps working.
func TestIdentity_ForgedKidFloodAtTheProvider(t *testing.T) {
	viewer := oidctest.User{ID: "auth0|flood-viewer", Username: "viewer", Password: "pw-viewer"}
	p := oidctest.Start(t, oidctest.Options{Users: []oidctest.User{viewer}, RedirectURIs: []string{"http://127.0.0.1:1/callback"}})
	env := map[string]string{"PLAYHEAD_OIDC_ISSUER": p.Issuer, "PLAYHEAD_OIDC_AUDIENCE": p.ClientID}
	s, down := binarytest.Start(t, env), binarytest.Start(t, env)
	s.MustDo(t, http.StatusOK, http.MethodGet, s.URL("/v1/playback/"), p.SignIn(t, viewer.Username, viewer.Password), nil)
	unused := p.SignIn(t, viewer.Username, viewer.Password)

	attacker, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	forged := 0
	flood := func(s *binarytest.Server, n int) {
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
	scheduled := func() int {
		return int(keyReads(t, s, "refresh_attempts", "schedule") + keyReads(t, down, "refresh_attempts", "schedule"))
	}
	keys, before, unknown := p.Requests("/keys"), scheduled(), refusals(t, s, "unknown_key")
	flood(s, 200)
	flood(s, 200)
	reads := p.Requests("/keys") - keys - (scheduled() - before)
	if most := 1 + int(time.Since(start)/auth.UnknownKeyRefetch); reads > most {
		t.Errorf("400 forged kids in %v made the provider serve /keys %d times beyond the schedule, want at most %d (one per %v)",
			time.Since(start).Round(time.Millisecond), reads, most, auth.UnknownKeyRefetch)
	}
	if got := refusals(t, s, "unknown_key") - unknown; got != 400 {
		t.Errorf("unknown_key refusals grew by %v for 400 forged kids", got)
	}

	p.Stop()
	unknown, failures := refusals(t, down, "unknown_key"), keyReads(t, down, "refresh_failures", "unknown_kid")
	flood(down, 200)
	if got := refusals(t, down, "unknown_key") - unknown; got != 200 {
		t.Errorf("with the provider down, unknown_key refusals grew by %v for 200 forged kids", got)
	}
	if got := keyReads(t, down, "refresh_failures", "unknown_kid") - failures; got != 1 {
		t.Errorf("with the provider down, 200 forged kids made %v failed reads of its keys, want 1", got)
	}
	// Never verified before, so not from the cache: the key read before the outage checks it.
	down.MustDo(t, http.StatusOK, http.MethodGet, down.URL("/v1/playback/"), unused, nil)
	t.Logf("400 forged kids with the provider up: %d reads of its /keys beyond the schedule", reads)
}

// keyReads reads playhead_jwks_<counter>_total{trigger} (refresh_attempts or
// refresh_failures) off the node's /metrics.
func keyReads(t *testing.T, s *binarytest.Server, counter, trigger string) float64 {
	t.Helper()
	return s.Sample(t, fmt.Sprintf("playhead_jwks_%s_total{trigger=%q}", counter, trigger))
}
