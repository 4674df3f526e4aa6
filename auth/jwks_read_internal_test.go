package auth

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
)

// A JWKS read keeps its signing keys whatever else it holds: a key of a curve the library
// lacks, a malformed key and an encryption key are skipped, one by one, and the signing key
// beside them is installed (a provider publishing one odd key must not leave a node without
// keys), while an encryption key under its own kid never verifies.
func TestInstall_SkipsKeysItCannotUse(t *testing.T) {
	doc := rsaJWKS(t)
	var set struct{ Keys []map[string]any }
	if err := json.Unmarshal(doc, &set); err != nil {
		t.Fatal(err)
	}
	enc := map[string]any{}
	for name, v := range set.Keys[0] {
		enc[name] = v
	}
	enc["kid"], enc["use"] = "enc", "enc"
	delete(enc, "alg")
	delete(set.Keys[0], "use") // a signing key need not say so
	odd := []string{
		`{"kty":"OKP","crv":"Ed448","kid":"ed448","x":"X9dEm1m0Yf0s54fsYWrUah2hNCSFpw4fig6nXYDpZ3jt8SR2m0bHBhvWeD3x5Q9s0foavq_oJWGA"}`,
		`{"kty":"EC","crv":"secp256k1","kid":"k1","x":"WfnzS2Qk8Zq0u1Kx8aQeM8w4t3X6v2j1bqXo9sGQ1Wk","y":"Y2Q1c2d0ZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmY"}`,
		`{"kty":"RSA","kid":"malformed","n":"!!!","e":"AQAB"}`,
		string(must(json.Marshal(enc))),
		string(must(json.Marshal(set.Keys[0]))),
	}
	k, err := NewKeySet(KeysConfig{URL: "http://127.0.0.1:1/"})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.install([]byte(`{"keys":[` + strings.Join(odd, ",") + `]}`)); err != nil {
		t.Fatalf("a JWKS with a signing key among odd ones: %v", err)
	}
	if kids := k.kids.Load().kids; len(kids) != 1 || kids["rs"] == "" {
		t.Fatalf("kids held %v, want rs alone", kids)
	}
	if err := k.install([]byte(`{"keys":[` + strings.Join(odd[:4], ",") + `]}`)); err == nil || k.Keys() != 1 {
		t.Fatalf("a JWKS without a usable signing key: %v, %d keys held (want an error and the key read before)", err, k.Keys())
	}
}

// A JWKS URL over https may redirect to another https URL, never down to http.
func TestGet_RefusesARedirectToHTTP(t *testing.T) {
	doc := rsaJWKS(t)
	serve := func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(doc) }
	plain := httptest.NewServer(http.HandlerFunc(serve))
	defer plain.Close()
	secure := httptest.NewTLSServer(http.HandlerFunc(serve))
	defer secure.Close()
	for _, c := range []struct {
		to   string
		want bool
	}{{secure.URL, true}, {plain.URL, false}} {
		redirect := httptest.NewTLSServer(http.RedirectHandler(c.to+"/keys", http.StatusFound))
		k, err := NewKeySet(KeysConfig{URL: redirect.URL, Client: redirect.Client()})
		if err != nil {
			t.Fatal(err)
		}
		_, err = k.refresh(context.Background(), "schedule")
		redirect.Close()
		if got := err == nil && k.Keys() == 1; got != c.want {
			t.Errorf("https redirected to %s: read %v (%v, %d keys), want %v", c.to, got, err, k.Keys(), c.want)
		}
	}
}

// rsaJWKS returns a JWKS that publishes a new RSA key under the kid "rs".
func rsaJWKS(t *testing.T) []byte {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return must(PublicJWKS(key, "rs"))
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// A JWKS over maxJWKSBytes is refused, from a URL and from a file, even a valid one (a valid
// document followed by spaces): a provider's 50 MiB answer is not read to its end.
func TestRead_RefusesAnOversizedJWKS(t *testing.T) {
	doc := rsaJWKS(t)
	const huge = 50 << 20
	var written atomic.Int64
	served := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		defer close(served)
		n, _ := w.Write(doc)
		written.Add(int64(n))
		spaces := []byte(strings.Repeat(" ", 64<<10))
		for written.Load() < huge {
			n, err := w.Write(spaces)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	file := t.TempDir() + "/jwks.json"
	if err := os.WriteFile(file, append(doc, strings.Repeat(" ", maxJWKSBytes)...), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []KeysConfig{{URL: srv.URL}, {File: file}} {
		k, err := NewKeySet(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := k.refresh(context.Background(), "schedule"); err == nil || k.Keys() != 0 {
			t.Errorf("%+v: a JWKS over %d bytes: %v, %d keys held, want refused", cfg, maxJWKSBytes, err, k.Keys())
		}
	}
	srv.CloseClientConnections()
	<-served
	if n := written.Load(); n >= huge {
		t.Errorf("the node read all %d bytes of the answer", n)
	}
}

// An https issuer's discovery document naming an http jwks_uri is refused; an https one is
// read.
func TestDiscover_AnHTTPSIssuerKeepsItsKeysOnHTTPS(t *testing.T) {
	doc := rsaJWKS(t)
	keys := func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(doc) }
	plain := httptest.NewServer(http.HandlerFunc(keys))
	defer plain.Close()
	secure := httptest.NewTLSServer(http.HandlerFunc(keys))
	defer secure.Close()
	for _, c := range []struct {
		jwks string
		want bool
	}{{secure.URL + "/keys", true}, {plain.URL + "/keys", false}} {
		var issuer string
		idp := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_ = json.NewEncoder(w).Encode(map[string]string{"issuer": issuer, "jwks_uri": c.jwks})
		}))
		issuer = idp.URL + "/"
		k, err := NewKeySet(KeysConfig{Issuer: issuer, Client: idp.Client()})
		if err != nil {
			t.Fatal(err)
		}
		_, err = k.refresh(context.Background(), "schedule")
		idp.Close()
		if got := err == nil && k.Keys() == 1; got != c.want {
			t.Errorf("https issuer, jwks_uri %s: read %v (%v), want %v", c.jwks, got, err, c.want)
		}
	}
}
