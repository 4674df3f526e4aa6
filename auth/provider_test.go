package auth_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/auth"
)

const (
	testIssuer   = "https://id.example.test/"
	testAudience = "playhead"
)

// signer is a key pair of the test's provider.
type signer struct {
	key crypto.Signer
	kid string
}

func newRSA(t testing.TB, kid string) signer {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return signer{k, kid}
}

func newEC(t testing.TB, kid string) signer {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return signer{k, kid}
}

func newEd(t testing.TB, kid string) signer {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return signer{k, kid}
}

// mint signs a token for subject with the usual claims, and extra over them.
func (s signer) mint(t testing.TB, subject string, extra map[string]any) string {
	t.Helper()
	tok, err := auth.MintWithKey(s.key, s.kid, auth.KeyClaims{Issuer: testIssuer, Audience: testAudience, Subject: subject, TTL: time.Hour, Extra: extra})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// jwk is the public JWK of s.
func (s signer) jwk(t testing.TB) json.RawMessage {
	t.Helper()
	doc, err := auth.PublicJWKS(s.key, s.kid)
	if err != nil {
		t.Fatal(err)
	}
	var set struct{ Keys []json.RawMessage }
	if err := json.Unmarshal(doc, &set); err != nil {
		t.Fatal(err)
	}
	return set.Keys[0]
}

// jwksServer serves a JWKS on loopback and counts the requests it answers.
type jwksServer struct {
	*httptest.Server
	mu           sync.Mutex
	keys         []json.RawMessage
	cacheControl string
	down         atomic.Bool
	requests     atomic.Int64
}

func newJWKSServer(t testing.TB, keys ...json.RawMessage) *jwksServer {
	s := &jwksServer{keys: keys}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		if s.down.Load() {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.cacheControl != "" {
			w.Header().Set("Cache-Control", s.cacheControl)
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": s.keys})
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) publish(keys ...json.RawMessage) {
	s.mu.Lock()
	s.keys = keys
	s.mu.Unlock()
}

// subjects maps subjects to member ids in memory, counting its calls; err, when set, is
// returned instead.
type subjects struct {
	mu    sync.Mutex
	ids   map[string]int64
	calls int
	err   error
}

func (s *subjects) Member(_ context.Context, issuer, subject string, _ time.Time) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.err != nil {
		return 0, s.err
	}
	if s.ids == nil {
		s.ids = map[string]int64{}
	}
	key := issuer + "\x00" + subject
	if _, ok := s.ids[key]; !ok {
		s.ids[key] = int64(len(s.ids)) + 1<<40
	}
	return s.ids[key], nil
}

// bed is a verifier in JWKS URL mode (and secret mode) against a jwksServer.
type bed struct {
	v        *auth.Verifier
	keys     *auth.KeySet
	server   *jwksServer
	subjects *subjects
	reg      *prometheus.Registry
}

// setup starts a key set on server and waits for its first read; with secret, the
// verifier takes HS256 tokens too.
func setup(t testing.TB, server *jwksServer, secret []byte, cacheItems int) *bed {
	t.Helper()
	b := &bed{server: server, subjects: &subjects{}, reg: prometheus.NewRegistry()}
	metrics := auth.NewMetrics(b.reg)
	var err error
	b.keys, err = auth.NewKeySet(auth.KeysConfig{URL: server.URL, Issuer: testIssuer, Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.keys.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.keys.Stop(context.Background()) })
	<-b.keys.Loaded()
	b.v, err = auth.New(auth.Config{Secret: secret, Keys: b.keys, Issuer: testIssuer, Audience: testAudience,
		Subjects: b.subjects, AdminClaim: "roles", AdminValue: "playhead-admin", CacheItems: cacheItems, Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// refusals reads playhead_auth_refusals_total{reason}.
func (b *bed) refusals(t testing.TB, reason string) float64 {
	t.Helper()
	return counter(t, b.reg, "playhead_auth_refusals_total", "reason", reason)
}

func counter(t testing.TB, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					if m.GetCounter() != nil {
						return m.GetCounter().GetValue()
					}
					return m.GetGauge().GetValue()
				}
			}
			if label == "" {
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no metric %s{%s=%q}", name, label, value)
	return 0
}

// mustRefuse checks that token is refused 401 with reason counted.
func (b *bed) mustRefuse(t *testing.T, token, reason string) {
	t.Helper()
	before := b.refusals(t, reason)
	id, err := b.v.Verify(token)
	if err == nil {
		t.Fatalf("accepted: %+v", id)
	}
	if apperr.CodeOf(err) != apperr.Unauthenticated {
		t.Fatalf("err = %v, want unauthenticated", err)
	}
	if got := b.refusals(t, reason); got != before+1 {
		t.Fatalf("refusals{reason=%q} = %v after %v (err %v)", reason, got, before, err)
	}
}
