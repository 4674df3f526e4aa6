package main

import (
	"encoding/json"
	"maps"
	"net/http"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/pgtest"
)

// TestIdentity_FirstSightWithTheDatabaseDown: a provider token whose subject the node has not
// seen needs the database to become a member. With the database refusing connections, and
// with it hung (connections open, nothing answered), such a token is answered 503 with
// Retry-After and the members lookup's message, never 401 (the token is fine) nor 500, and
// never held (the hung lookup ends at PLAYHEAD_CACHE_LOAD_TIMEOUT; without that bound the
// request waited for as long as the database did).
func TestIdentity_FirstSightWithTheDatabaseDown(t *testing.T) {
	p := newTokenProvider(t)
	proxy, viaProxy := pgtest.Proxied(t, pgtest.URL(t))
	env := map[string]string{"DATABASE_URL": viaProxy, "PLAYHEAD_ROLE": "api", "PLAYHEAD_CACHE_LOAD_TIMEOUT": "500ms"}
	maps.Copy(env, p.env())
	s := binarytest.Start(t, env)
	get := func(subject string) (int, http.Header, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, s.URL("/v1/playback/"), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+sign(t, jwt.SigningMethodRS256, p.key, providerClaims(subject), nil))
		resp, err := s.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct{ Error string }
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, resp.Header, body.Error
	}
	if status, _, msg := get("auth0|before"); status != http.StatusOK {
		t.Fatalf("with the database up: %d %s", status, msg)
	}
	const want = "members cannot be looked up now; retry later"
	check := func(state, subject string) {
		t.Helper()
		status, header, msg := get(subject)
		if status != http.StatusServiceUnavailable || header.Get("Retry-After") == "" || msg != want {
			t.Errorf("a new subject with the database %s: %d, Retry-After %q, %q; want 503, a Retry-After and %q", state, status, header.Get("Retry-After"), msg, want)
		}
	}
	proxy.Refuse(true)
	proxy.ResetAll()
	check("refusing connections", "auth0|refused")
	proxy.Refuse(false)
	proxy.Partition()
	defer proxy.Heal()
	check("hung", "auth0|hung")
}
