package main

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/internal/binarytest"
)

// The hostile suite's identity provider: tokens of its key are accepted beside the secret's.
const (
	hostileIssuer   = "https://id.hostile.test/"
	hostileAudience = "playhead-hostile"
	hostileKID      = "hostile-key-1"
)

// tokenProvider serves a JWKS of one RSA key on loopback and counts the requests it gets.
type tokenProvider struct {
	srv      *httptest.Server
	key      *rsa.PrivateKey
	jwks     []byte
	requests atomic.Int64
}

func newTokenProvider(t *testing.T) *tokenProvider {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	jwks, err := auth.PublicJWKS(key, hostileKID)
	if err != nil {
		t.Fatal(err)
	}
	p := &tokenProvider{key: key, jwks: jwks}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		p.requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(p.jwks)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// env is the node's Identity settings for p, beside the secret binarytest sets.
func (p *tokenProvider) env() map[string]string {
	return map[string]string{
		"PLAYHEAD_OIDC_ISSUER": hostileIssuer, "PLAYHEAD_OIDC_AUDIENCE": hostileAudience, "PLAYHEAD_JWKS_URL": p.srv.URL,
		"PLAYHEAD_OIDC_ADMIN_CLAIM": "roles", "PLAYHEAD_OIDC_ADMIN_VALUE": "playhead-admin",
	}
}

// claims are a valid provider token's, for subject.
func providerClaims(subject string) jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{"iss": hostileIssuer, "aud": hostileAudience, "sub": subject, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
}

// sign signs claims with key under method, with header's entries (kid first: hostileKID).
func sign(t *testing.T, method jwt.SigningMethod, key any, claims jwt.MapClaims, header map[string]any) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	tok.Header["kid"] = hostileKID
	for k, v := range header {
		tok.Header[k] = v
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// publicJWK is key's public JWK under hostileKID, as a token's jwk header would carry it.
func publicJWK(t *testing.T, key *rsa.PrivateKey) map[string]any {
	t.Helper()
	doc, err := auth.PublicJWKS(key, hostileKID)
	if err != nil {
		t.Fatal(err)
	}
	var set struct{ Keys []map[string]any }
	if err := json.Unmarshal(doc, &set); err != nil {
		t.Fatal(err)
	}
	return set.Keys[0]
}

// refusals reads playhead_auth_refusals_total{reason} off the node's /metrics.
func refusals(t *testing.T, s *binarytest.Server, reason string) float64 {
	t.Helper()
	return s.Sample(t, fmt.Sprintf("playhead_auth_refusals_total{reason=%q}", reason))
}

// hostileTokens sends the token attacks to a member route and an admin route: every one
// answers 401 with a JSON error (and is counted by reason), the provider's JWKS is read at
// most once more for every forged kid together, and no header makes the node fetch anything.
// It returns the number of cases.
func (f *hostileFixture) hostileTokens(t *testing.T) int {
	t.Helper()
	p := f.provider
	n := 0
	send := func(target, token string, want ...int) {
		t.Helper()
		n++
		f.check(t, hostileCase{class: classAuth, method: http.MethodGet, target: target, header: bearer(token), want: want})
	}
	// The provider's own tokens: a string subject is a member, the roles claim an admin.
	send("/v1/playback/", sign(t, jwt.SigningMethodRS256, p.key, providerClaims("auth0|hostile-viewer"), nil), http.StatusOK)
	send("/v1/admin/jobs", sign(t, jwt.SigningMethodRS256, p.key, providerClaims("auth0|hostile-viewer"), nil), http.StatusForbidden)
	adminClaims := providerClaims("auth0|hostile-admin")
	adminClaims["roles"] = []string{"viewer", "playhead-admin"}
	send("/v1/admin/jobs", sign(t, jwt.SigningMethodRS256, p.key, adminClaims, nil), http.StatusOK)

	attacker := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		t.Error("hostile tokens: the node fetched a URL a token's header named")
	}))
	defer attacker.Close()
	attackerKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	attackerJWK := publicJWK(t, attackerKey)
	pub, err := x509.MarshalPKIXPublicKey(&p.key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})
	with := func(k string, v any) jwt.MapClaims { c := providerClaims("auth0|hostile-viewer"); c[k] = v; return c }
	admin := with("roles", []string{"playhead-admin"})
	now := time.Now()
	other := newTokenProvider(t) // another issuer's keys
	otherClaims := providerClaims("auth0|hostile-viewer")
	otherClaims["iss"] = "https://other.hostile.test/"
	attacks := []struct{ name, token, reason string }{
		{"alg none", sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, admin, nil), "algorithm"},
		{"HS256 keyed with the provider's public key (PEM)", sign(t, jwt.SigningMethodHS256, pubPEM, admin, nil), "bad_signature"},
		{"HS256 keyed with the provider's public key (DER)", sign(t, jwt.SigningMethodHS256, pub, admin, nil), "bad_signature"},
		{"HS256 keyed with the provider's modulus n", sign(t, jwt.SigningMethodHS256, p.key.N.Bytes(), admin, nil), "bad_signature"},
		{"HS256 keyed with the provider's JWKS", sign(t, jwt.SigningMethodHS256, p.jwks, admin, nil), "bad_signature"},
		{"jku and x5u at the attacker's JWKS", sign(t, jwt.SigningMethodRS256, attackerKey, admin, map[string]any{"jku": attacker.URL, "x5u": attacker.URL}), "bad_signature"},
		{"jwk header with the attacker's key", sign(t, jwt.SigningMethodRS256, attackerKey, admin, map[string]any{"jwk": attackerJWK}), "bad_signature"},
		{"x5c header", sign(t, jwt.SigningMethodRS256, attackerKey, admin, map[string]any{"x5c": []string{"MIIB"}}), "bad_signature"},
		{"crit naming an extension", sign(t, jwt.SigningMethodRS256, p.key, with("exp-x", 1), map[string]any{"crit": []string{"exp-x"}}), "malformed"},
		{"wrong issuer", sign(t, jwt.SigningMethodRS256, p.key, with("iss", "https://evil.hostile.test/"), nil), "issuer"},
		{"wrong audience", sign(t, jwt.SigningMethodRS256, p.key, with("aud", []string{"another-api"}), nil), "audience"},
		{"expired", sign(t, jwt.SigningMethodRS256, p.key, with("exp", now.Add(-time.Minute).Unix()), nil), "expired"},
		{"nbf ahead beyond the leeway", sign(t, jwt.SigningMethodRS256, p.key, with("nbf", now.Add(5*time.Minute).Unix()), nil), "not_yet_valid"},
		{"iat ahead beyond the leeway", sign(t, jwt.SigningMethodRS256, p.key, with("iat", now.Add(5*time.Minute).Unix()), nil), "not_yet_valid"},
		{"subject of 256 bytes", sign(t, jwt.SigningMethodRS256, p.key, with("sub", strings.Repeat("s", 256)), nil), "subject"},
		{"another issuer's valid token", sign(t, jwt.SigningMethodRS256, other.key, otherClaims, map[string]any{"kid": "other-issuer-key"}), "unknown_key"},
	}
	// Over the server's header buffer the request never reaches auth (431); auth's own bound
	// (auth.MaxTokenBytes, 8 KiB) stands behind it for a larger buffer.
	send("/v1/playback/", sign(t, jwt.SigningMethodRS256, p.key, with("pad", strings.Repeat("x", 16<<10)), nil), http.StatusRequestHeaderFieldsTooLarge)
	for _, a := range attacks {
		before := refusals(t, f.s, a.reason)
		send("/v1/playback/", a.token, http.StatusUnauthorized)
		send("/v1/admin/jobs", a.token, http.StatusUnauthorized)
		if got := refusals(t, f.s, a.reason); got != before+2 {
			t.Errorf("hostile tokens: %s: refusals{reason=%q} went from %v to %v, want +2", a.name, a.reason, before, got)
		}
	}
	// Forged kids: path and SQL characters, and a flood of 200 at once. The JWKS is read at
	// most once for all of them (auth.UnknownKeyRefetch), and each is refused as unknown_key.
	reads, unknown := p.requests.Load(), refusals(t, f.s, "unknown_key")
	for _, kid := range []string{"../../../../etc/passwd", "..%2f..%2fkeys", "1' OR '1'='1", "x\"; DROP TABLE members; --", "\x00", strings.Repeat("k", 1024)} {
		send("/v1/playback/", sign(t, jwt.SigningMethodRS256, p.key, providerClaims("auth0|hostile-viewer"), map[string]any{"kid": kid}), http.StatusUnauthorized)
	}
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			tok := sign(t, jwt.SigningMethodRS256, attackerKey, admin, map[string]any{"kid": fmt.Sprintf("forged-%d", i)})
			status, body, err := f.s.Do(http.MethodGet, f.s.URL("/v1/playback/"), tok, nil)
			if err != nil || status != http.StatusUnauthorized {
				t.Errorf("hostile tokens: forged kid %d: %d %s (%v)", i, status, body, err)
			}
		})
	}
	wg.Wait()
	n += 200
	if got := p.requests.Load() - reads; got > 1 {
		t.Errorf("hostile tokens: 206 forged kids read the JWKS %d times, want at most 1 per %v", got, auth.UnknownKeyRefetch)
	}
	if got := refusals(t, f.s, "unknown_key") - unknown; got != 206 {
		t.Errorf("hostile tokens: unknown_key refusals grew by %v, want 206", got)
	}
	return n
}
