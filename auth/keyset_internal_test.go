package auth

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestLifetime(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		header http.Header
		want   time.Duration
	}{
		{http.Header{}, DefaultKeysRefresh},
		{http.Header{"Cache-Control": {"public, max-age=600"}}, 10 * time.Minute},
		{http.Header{"Cache-Control": {"no-cache, max-age=0"}}, MinKeysRefresh},
		{http.Header{"Cache-Control": {"max-age=604800"}}, MaxKeysRefresh},
		{http.Header{"Expires": {now.Add(20 * time.Minute).Format(http.TimeFormat)}}, 20 * time.Minute},
		{http.Header{"Expires": {now.Add(-time.Hour).Format(http.TimeFormat)}}, MinKeysRefresh},
	} {
		if got := lifetime(c.header, now); got != c.want {
			t.Errorf("lifetime(%v) = %v, want %v", c.header, got, c.want)
		}
	}
}

// An HMAC key in a JWKS is dropped: a JWKS never supplies a secret, and one holding nothing
// else is refused, keeping the keys read before.
func TestInstall_DropsHMACKeys(t *testing.T) {
	doc := rsaJWKS(t)
	oct := `{"kty":"oct","kid":"oct","alg":"HS256","k":"c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA"}`
	withOct := strings.Replace(string(doc), `"keys": [`, `"keys": [`+oct+",", 1)
	k, err := NewKeySet(KeysConfig{URL: "http://127.0.0.1:1/"})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.install([]byte(withOct)); err != nil {
		t.Fatal(err)
	}
	if k.Keys() != 1 {
		t.Fatalf("keys of a JWKS with an RSA and an oct key = %d, want 1", k.Keys())
	}
	if err := k.install([]byte(`{"keys":[` + oct + `]}`)); err == nil || k.Keys() != 1 {
		t.Fatalf("a JWKS of an oct key alone: %v, %d keys held", err, k.Keys())
	}
}
