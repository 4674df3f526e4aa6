package auth_test

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/auth"
)

func TestKeys_Algorithms(t *testing.T) {
	rs, es, ed := newRSA(t, "rs"), newEC(t, "es"), newEd(t, "ed")
	b := setup(t, newJWKSServer(t, rs.jwk(t), es.jwk(t), ed.jwk(t)), nil, 0)
	for _, s := range []signer{rs, es, ed} {
		id, err := b.v.Verify(s.mint(t, "auth0|"+s.kid, nil))
		if err != nil {
			t.Fatalf("%s: %v", s.kid, err)
		}
		if id.Subject != "auth0|"+s.kid || id.Issuer != testIssuer || id.MemberID < 1<<40 || id.Admin || id.IssuedAt.IsZero() {
			t.Fatalf("%s: identity %+v", s.kid, id)
		}
	}
	// PS256 with the RSA key of a JWK that names no alg.
	noAlg := map[string]any{}
	_ = json.Unmarshal(rs.jwk(t), &noAlg)
	delete(noAlg, "alg")
	noAlg["kid"] = "rs-any"
	raw, _ := json.Marshal(noAlg)
	b.server.publish(rs.jwk(t), raw)
	ps := jwt.NewWithClaims(jwt.SigningMethodPS256, claims(time.Hour))
	ps.Header["kid"] = "rs-any"
	token, err := ps.SignedString(rs.key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.v.Verify(token); err != nil {
		t.Fatalf("PS256 with a key without alg: %v", err)
	}
	// The same token under the kid whose JWK says RS256: the key's own alg must match.
	ps.Header["kid"] = "rs"
	token, _ = ps.SignedString(rs.key)
	b.mustRefuse(t, token, "bad_signature")
}

func claims(ttl time.Duration) jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{"iss": testIssuer, "aud": testAudience, "sub": "s", "iat": now.Unix(), "exp": now.Add(ttl).Unix()}
}

func TestKeys_Refusals(t *testing.T) {
	rs := newRSA(t, "rs")
	b := setup(t, newJWKSServer(t, rs.jwk(t)), secret, 0)
	pub := rs.key.Public().(*rsa.PublicKey)
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: must(x509.MarshalPKIXPublicKey(pub))})
	now := time.Now()
	signed := func(method jwt.SigningMethod, key any, c jwt.MapClaims, header map[string]any) string {
		tok := jwt.NewWithClaims(method, c)
		tok.Header["kid"] = "rs"
		for k, v := range header {
			tok.Header[k] = v
		}
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	with := func(k string, v any) jwt.MapClaims { c := claims(time.Hour); c[k] = v; return c }
	attacker := newRSA(t, "attacker")
	attackerJWKS := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		t.Error("the attacker's jku was fetched")
		_, _ = w.Write(must(auth.PublicJWKS(attacker.key, "rs")))
	}))
	defer attackerJWKS.Close()
	var attackerJWK map[string]any
	_ = json.Unmarshal(attacker.jwk(t), &attackerJWK)
	attackerJWK["kid"] = "rs"
	for _, c := range []struct{ name, token, reason string }{
		{"alg none", signed(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claims(time.Hour), nil), "algorithm"},
		{"HS256 with the public key's PEM", signed(jwt.SigningMethodHS256, pemBytes, with("sub", "1"), nil), "bad_signature"},
		{"HS256 with the public key's n", signed(jwt.SigningMethodHS256, pub.N.Bytes(), with("sub", "1"), nil), "bad_signature"},
		{"HS512", signed(jwt.SigningMethodHS512, secret, with("sub", "1"), nil), "algorithm"},
		{"RS384", signed(jwt.SigningMethodRS384, rs.key, claims(time.Hour), nil), "algorithm"},
		{"wrong issuer", signed(jwt.SigningMethodRS256, rs.key, with("iss", "https://evil.example/"), nil), "issuer"},
		{"wrong audience", signed(jwt.SigningMethodRS256, rs.key, with("aud", "other"), nil), "audience"},
		{"audience missing", func() string {
			c := claims(time.Hour)
			delete(c, "aud")
			return signed(jwt.SigningMethodRS256, rs.key, c, nil)
		}(), "missing_claim"},
		{"expired", signed(jwt.SigningMethodRS256, rs.key, with("exp", now.Add(-time.Minute).Unix()), nil), "expired"},
		{"exp as a string", signed(jwt.SigningMethodRS256, rs.key, with("exp", fmt.Sprint(now.Add(time.Hour).Unix())), nil), "malformed"},
		{"exp past any time", signed(jwt.SigningMethodRS256, rs.key, with("exp", 1e300), nil), "expired"},
		{"iss without its trailing slash", signed(jwt.SigningMethodRS256, rs.key, with("iss", strings.TrimSuffix(testIssuer, "/")), nil), "issuer"},
		{"iss as an array", signed(jwt.SigningMethodRS256, rs.key, with("iss", []string{testIssuer}), nil), "malformed"},
		{"exp missing", func() string {
			c := claims(time.Hour)
			delete(c, "exp")
			return signed(jwt.SigningMethodRS256, rs.key, c, nil)
		}(), "missing_claim"},
		{"nbf ahead", signed(jwt.SigningMethodRS256, rs.key, with("nbf", now.Add(time.Minute).Unix()), nil), "not_yet_valid"},
		{"iat ahead", signed(jwt.SigningMethodRS256, rs.key, with("iat", now.Add(time.Minute).Unix()), nil), "not_yet_valid"},
		{"signed by another key under the known kid", signed(jwt.SigningMethodRS256, attacker.key, claims(time.Hour), nil), "bad_signature"},
		{"jku at the attacker's JWKS", signed(jwt.SigningMethodRS256, attacker.key, claims(time.Hour), map[string]any{"jku": attackerJWKS.URL, "x5u": attackerJWKS.URL}), "bad_signature"},
		{"jwk header holding the attacker's key", signed(jwt.SigningMethodRS256, attacker.key, claims(time.Hour), map[string]any{"jwk": attackerJWK}), "bad_signature"},
		// A header naming alg twice in two letter cases: the mode is picked by one reading and
		// the token checked by the other, and each refuses what the other would take.
		{"Alg HS256 beside alg RS256, signed with the secret", rawSigned(`{"alg":"RS256","kid":"rs","Alg":"HS256"}`, jwt.SigningMethodHS256, secret, with("sub", "1")), "bad_signature"},
		{"Alg RS256 beside alg HS256, signed with the key", rawSigned(`{"alg":"HS256","kid":"rs","Alg":"RS256"}`, jwt.SigningMethodRS256, rs.key, claims(time.Hour)), "bad_signature"},
		{"crit naming an extension", signed(jwt.SigningMethodRS256, rs.key, with("exp-x", 1), map[string]any{"crit": []string{"exp-x"}}), "malformed"},
		{"subject missing", func() string {
			c := claims(time.Hour)
			delete(c, "sub")
			return signed(jwt.SigningMethodRS256, rs.key, c, nil)
		}(), "subject"},
		{"subject 256 bytes", signed(jwt.SigningMethodRS256, rs.key, with("sub", strings.Repeat("s", 256)), nil), "subject"},
		{"16 KiB", signed(jwt.SigningMethodRS256, rs.key, with("pad", strings.Repeat("x", 16<<10)), nil), "too_long"},
		{"not a JWT", "a.b.c", "malformed"},
	} {
		t.Run(c.name, func(t *testing.T) { b.mustRefuse(t, c.token, c.reason) })
	}
	// Within the leeway, nbf and iat ahead pass; a 255-byte subject passes; aud may be an
	// array holding the audience among others.
	for _, c := range []jwt.MapClaims{with("nbf", now.Add(20*time.Second).Unix()), with("iat", now.Add(20*time.Second).Unix()), with("sub", strings.Repeat("s", 255)),
		with("aud", []string{"another-api", testAudience})} {
		if _, err := b.v.Verify(signed(jwt.SigningMethodRS256, rs.key, c, nil)); err != nil {
			t.Errorf("%v: %v", c, err)
		}
	}
	// The secret's tokens still pass beside the keys'.
	if id, err := b.v.Verify(must(auth.Mint(secret, 5, false, time.Hour))); err != nil || id.MemberID != 5 {
		t.Fatalf("secret token: %+v, %v", id, err)
	}
}

// rawSigned signs claims under a header written as is (jwt.Token would re-encode it).
func rawSigned(header string, method jwt.SigningMethod, key any, c jwt.MapClaims) string {
	body := base64.RawURLEncoding.EncodeToString([]byte(header)) + "." + base64.RawURLEncoding.EncodeToString(must(json.Marshal(c)))
	return body + "." + base64.RawURLEncoding.EncodeToString(must(method.Sign(body, key)))
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// A flood of forged kids reads the JWKS once per interval, not once per token; a kid newly
// published is found by the first token carrying it.
func TestKeys_UnknownKidFlood(t *testing.T) {
	rs := newRSA(t, "rs")
	b := setup(t, newJWKSServer(t, rs.jwk(t)), nil, 1000)
	if got := b.server.requests.Load(); got != 1 {
		t.Fatalf("requests after start = %d, want 1", got)
	}
	next := newRSA(t, "next")
	b.server.publish(rs.jwk(t), next.jwk(t))
	if _, err := b.v.Verify(next.mint(t, "a", nil)); err != nil {
		t.Fatalf("a token of a newly published kid: %v", err)
	}
	if got := b.server.requests.Load(); got != 2 {
		t.Fatalf("requests after the new kid = %d, want 2", got)
	}
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			forged := newEC(t, fmt.Sprintf("../../etc/passwd'; DROP TABLE members;--%d", i))
			if _, err := b.v.Verify(forged.mint(t, "a", nil)); apperr.CodeOf(err) != apperr.Unauthenticated {
				t.Errorf("forged kid: %v", err)
			}
		})
	}
	wg.Wait()
	if got := b.server.requests.Load(); got != 2 {
		t.Fatalf("requests after 200 forged kids = %d, want still 2 (one refetch per %v)", got, auth.UnknownKeyRefetch)
	}
	if got := b.refusals(t, "unknown_key"); got != 200 {
		t.Fatalf("unknown_key refusals = %v, want 200", got)
	}
}

// While the provider is down, tokens of keys already read keep working, a new kid is refused
// 401 and counted.
func TestKeys_ProviderDown(t *testing.T) {
	rs := newRSA(t, "rs")
	b := setup(t, newJWKSServer(t, rs.jwk(t)), nil, 0)
	b.server.down.Store(true)
	for range 3 {
		if _, err := b.v.Verify(rs.mint(t, "a", nil)); err != nil {
			t.Fatalf("a known key while the provider is down: %v", err)
		}
	}
	b.mustRefuse(t, newRSA(t, "new").mint(t, "a", nil), "unknown_key")
	if got := counter(t, b.reg, "playhead_jwks_refresh_failures_total", "trigger", "unknown_kid"); got != 1 {
		t.Fatalf("failed unknown-kid reads = %v, want 1", got)
	}
	// The failed read dropped nothing.
	if _, err := b.v.Verify(rs.mint(t, "b", nil)); err != nil {
		t.Fatalf("a known key after a failed read: %v", err)
	}
}

// A node started while its provider is down refuses the provider's tokens 401 (not 500), and
// takes them once a read succeeds.
func TestKeys_StartWithProviderDown(t *testing.T) {
	rs := newRSA(t, "rs")
	server := newJWKSServer(t, rs.jwk(t))
	server.down.Store(true)
	reg := prometheus.NewRegistry()
	metrics := auth.NewMetrics(reg)
	keys := must(auth.NewKeySet(auth.KeysConfig{URL: server.URL, Metrics: metrics}))
	_ = keys.Start(context.Background())
	defer func() { _ = keys.Stop(context.Background()) }()
	v := must(auth.New(auth.Config{Keys: keys, Issuer: testIssuer, Audience: testAudience, Subjects: &subjects{}, Metrics: metrics}))
	token := rs.mint(t, "a", nil)
	_, err := v.Verify(token)
	if apperr.CodeOf(err) != apperr.Unauthenticated {
		t.Fatalf("before any read: %v, want unauthenticated", err)
	}
	if got := counter(t, reg, "playhead_auth_refusals_total", "reason", "no_keys"); got != 1 {
		t.Fatalf("no_keys refusals = %v", got)
	}
	server.down.Store(false)
	<-keys.Loaded() // the loop's retry, backing off from 1s
	if _, err := v.Verify(token); err != nil {
		t.Fatalf("after the provider came back: %v", err)
	}
}

func TestKeys_Subjects(t *testing.T) {
	rs := newRSA(t, "rs")
	b := setup(t, newJWKSServer(t, rs.jwk(t)), nil, 1000)
	token := rs.mint(t, "google-oauth2|1", nil)
	for range 3 {
		if _, err := b.v.Verify(token); err != nil {
			t.Fatal(err)
		}
	}
	if b.subjects.calls != 1 {
		t.Fatalf("subject lookups for one token verified 3 times = %d, want 1 (the cache answers)", b.subjects.calls)
	}
	b.subjects.err = apperr.Errorf(apperr.Unauthenticated, "erased")
	b.mustRefuse(t, rs.mint(t, "other", nil), "subject")
	b.subjects.err = fmt.Errorf("lookup: %w", errors.New("connection refused"))
	if _, err := b.v.Verify(rs.mint(t, "third", nil)); apperr.CodeOf(err) != apperr.Unavailable {
		t.Fatalf("a subject lookup that failed: %v, want unavailable (503)", err)
	}
}

func TestKeys_AdminClaim(t *testing.T) {
	rs := newRSA(t, "rs")
	server := newJWKSServer(t, rs.jwk(t))
	for _, c := range []struct {
		claim string
		extra map[string]any
		admin bool
	}{
		{"roles", map[string]any{"roles": []any{"viewer", "playhead-admin"}}, true},
		{"roles", map[string]any{"roles": []any{"viewer"}}, false},
		{"roles", map[string]any{"roles": "playhead-admin"}, true},
		{"roles", map[string]any{"roles": "playhead-admin-not"}, false},
		{"scope", map[string]any{"scope": "openid playhead-admin profile"}, true},
		{"scope", map[string]any{"scope": "openid profile"}, false},
		{"scp", map[string]any{"scp": "playhead-admin"}, true},
		{"preferred_username", map[string]any{"preferred_username": "mallory playhead-admin"}, false},
		{"roles", map[string]any{"roles": "viewer playhead-admin"}, false},
		{"realm_access.roles", map[string]any{"realm_access": map[string]any{"roles": []any{"playhead-admin"}}}, true},
		{"realm_access.roles", map[string]any{"realm_access": map[string]any{"roles": []any{"x"}}}, false},
		{"realm_access.roles", map[string]any{"realm_access": "playhead-admin"}, false},
		{"https://example.com/roles", map[string]any{"https://example.com/roles": []any{"playhead-admin"}}, true},
		{"https://example.com/roles", map[string]any{"https://example": map[string]any{"com/roles": []any{"playhead-admin"}}}, true},
		{"groups", map[string]any{"groups": []any{1, true, nil}}, false},
		{"roles", map[string]any{"roles": []any{[]any{"playhead-admin"}}}, false},
		{"roles", map[string]any{"roles": map[string]any{"playhead-admin": true}}, false},
		{"roles", map[string]any{"roles": 1}, false},
		{"roles", map[string]any{"roles": []any{"Playhead-Admin", " playhead-admin", "playhead-admin-ish"}}, false},
		{"scope", map[string]any{"scope": "openid\tplayhead-admin"}, false},
		{"realm_access.roles", map[string]any{"realm_access": []any{map[string]any{"roles": []any{"playhead-admin"}}}}, false},
	} {
		v := must(auth.New(auth.Config{Keys: setup(t, server, nil, 0).keys, Issuer: testIssuer, Audience: testAudience,
			Subjects: &subjects{}, AdminClaim: c.claim, AdminValue: "playhead-admin"}))
		id, err := v.Verify(rs.mint(t, "a", c.extra))
		if err != nil || id.Admin != c.admin {
			t.Errorf("%s in %v: admin %v (%v), want %v", c.claim, c.extra, id.Admin, err, c.admin)
		}
	}
}

func TestKeys_Discovery(t *testing.T) {
	rs := newRSA(t, "rs")
	jwks := newJWKSServer(t, rs.jwk(t))
	var issuer string
	named := issuer
	op := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/.well-known/openid-configuration" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": named, "jwks_uri": jwks.URL})
	}))
	defer op.Close()
	issuer = op.URL + "/"
	for _, c := range []struct {
		named string
		ok    bool
	}{{issuer, true}, {"https://evil.example/", false}} {
		named = c.named
		keys := must(auth.NewKeySet(auth.KeysConfig{Issuer: issuer}))
		v := must(auth.New(auth.Config{Keys: keys, Issuer: issuer, Audience: testAudience, Subjects: &subjects{}}))
		tok := must(auth.MintWithKey(rs.key, rs.kid, auth.KeyClaims{Issuer: issuer, Audience: testAudience, Subject: "a", TTL: time.Hour}))
		// Not started: the token's own read (the first unknown-kid read) discovers the keys.
		_, err := v.Verify(tok)
		if (err == nil) != c.ok {
			t.Errorf("discovery naming issuer %q: %v", c.named, err)
		}
	}
}

// A JWKS file replaced by rename rotates the keys: the new key's first token reads it.
func TestKeys_File(t *testing.T) {
	old, next := newEC(t, "old"), newEd(t, "next")
	path := filepath.Join(t.TempDir(), "jwks.json")
	write := func(signers ...signer) {
		var keys []json.RawMessage
		for _, s := range signers {
			keys = append(keys, s.jwk(t))
		}
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, must(json.Marshal(map[string]any{"keys": keys})), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write(old)
	keys := must(auth.NewKeySet(auth.KeysConfig{File: path}))
	_ = keys.Start(context.Background())
	defer func() { _ = keys.Stop(context.Background()) }()
	<-keys.Loaded()
	v := must(auth.New(auth.Config{Keys: keys, Issuer: testIssuer, Audience: testAudience, Subjects: &subjects{}}))
	if _, err := v.Verify(old.mint(t, "a", nil)); err != nil {
		t.Fatal(err)
	}
	write(old, next)
	if _, err := v.Verify(next.mint(t, "a", nil)); err != nil {
		t.Fatalf("the new key after the file changed: %v", err)
	}
}
