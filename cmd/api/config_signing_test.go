package main

import (
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/media"
)

// TestConfig_URLSigningKeys: PLAYHEAD_URL_SIGNING_KEYS lists id:secret keys, the first signing,
// and legacy for the legacy key (PLAYHEAD_URL_SIGNING_SECRET or the JWT secret's derivation);
// unset, the legacy key alone signs, as before keys had ids. A bad list stops the start with
// the variable named and no secret quoted.
func TestConfig_URLSigningKeys(t *testing.T) {
	const (
		name    = "PLAYHEAD_URL_SIGNING_KEYS"
		secretA = "key-a-secret-key-a-secret-key-a-secret"
		secretB = "key-b-secret-key-b-secret-key-b-secret"
		legacyS = "legacy-url-secret-legacy-url-secret-00"
	)
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    []string // the keys' ids, in order ("" for legacy)
		wantErr string
	}{
		{name: "unset", env: map[string]string{name: ""}, want: []string{""}},
		{name: "one key", env: map[string]string{name: "a:" + secretA}, want: []string{"a"}},
		{name: "rotation", env: map[string]string{name: " b:" + secretB + " , a:" + secretA}, want: []string{"b", "a"}},
		{name: "away from legacy", env: map[string]string{name: "a:" + secretA + ",legacy", "PLAYHEAD_URL_SIGNING_SECRET": legacyS}, want: []string{"a", ""}},
		{name: "legacy signing", env: map[string]string{name: "legacy,a:" + secretA}, want: []string{"", "a"}},
		{name: "keys without any secret", env: map[string]string{name: "a:" + secretA, "PLAYHEAD_JWT_SECRET": "", "PLAYHEAD_OIDC_ISSUER": "http://localhost:1/", "PLAYHEAD_OIDC_AUDIENCE": "native"}, want: []string{"a"}},
		{name: "legacy without any secret", env: map[string]string{name: "a:" + secretA + ",legacy", "PLAYHEAD_JWT_SECRET": "", "PLAYHEAD_OIDC_ISSUER": "http://localhost:1/", "PLAYHEAD_OIDC_AUDIENCE": "native"}, wantErr: name + ": legacy is"},
		{name: "short secret", env: map[string]string{name: "a:" + secretA[:31]}, wantErr: name + ": the secret of a must be at least 32 bytes"},
		{name: "secret without an id", env: map[string]string{name: secretA}, wantErr: name + ": each entry is legacy or id:secret"},
		{name: "odd id", env: map[string]string{name: "a/b:" + secretA}, wantErr: name + ": each entry is legacy or id:secret"},
		{name: "legacy with a secret", env: map[string]string{name: "legacy:" + secretA}, wantErr: name + ": each entry is legacy or id:secret"},
		{name: "empty entry", env: map[string]string{name: "a:" + secretA + ","}, wantErr: name + ": each entry is legacy or id:secret"},
		{name: "id twice", env: map[string]string{name: "a:" + secretA + ",a:" + secretB}, wantErr: name + `: media: URL signing key id "a": given twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, ok := loadTestConfig(t, tc.env, tc.wantErr)
			if !ok {
				return
			}
			keys, err := cfg.signingKeys()
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, k := range keys {
				ids = append(ids, k.ID)
			}
			if strings.Join(ids, ",") != strings.Join(tc.want, ",") || len(ids) != len(tc.want) {
				t.Errorf("key ids %q, want %q", ids, tc.want)
			}
		})
	}
}

// TestConfig_URLSigningKeysQuoteNoSecret: whatever is wrong with PLAYHEAD_URL_SIGNING_KEYS,
// its error quotes none of the secrets in it, nor a secret pasted where an entry should be.
func TestConfig_URLSigningKeysQuoteNoSecret(t *testing.T) {
	const (
		secretA = "key-a-secret-key-a-secret-key-a-secret"
		short   = "short-secret-of-b"
	)
	for _, keys := range []string{
		secretA,
		"a:" + secretA + "," + secretA,
		"a:" + secretA + ",b:" + short,
		"a:" + secretA + ",a:" + secretA,
		"a b:" + secretA,
		"a:" + secretA + ",legacy,legacy",
		"legacy:" + secretA,
	} {
		_, err := Config{URLSigningKeys: keys, JWTSecret: binarytest.Secret}.signingKeys()
		if err == nil {
			t.Errorf("%q: accepted", keys)
			continue
		}
		for _, secret := range []string{secretA, short, binarytest.Secret} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("%q: the error %q quotes a secret", keys, err)
			}
		}
	}
}

// TestConfig_URLSigningLegacyKeyKeepsItsLinks: a node configured with keys and legacy verifies
// a link signed by a node of the single-secret configuration (PLAYHEAD_URL_SIGNING_SECRET or
// the JWT secret's derivation), the links given out before the keys were introduced.
func TestConfig_URLSigningLegacyKeyKeepsItsLinks(t *testing.T) {
	const object = "hls/1/tok/master.m3u8"
	for name, env := range map[string]map[string]string{
		"derived":  {},
		"explicit": {"PLAYHEAD_URL_SIGNING_SECRET": "legacy-url-secret-legacy-url-secret-00"},
	} {
		t.Run(name, func(t *testing.T) {
			env["PLAYHEAD_URL_SIGNING_KEYS"] = ""
			old, _ := loadTestConfig(t, env, "")
			before := mustLinks(t, old)
			link := before.Signer.URL(1, object, time.Now().Add(time.Minute))
			env["PLAYHEAD_URL_SIGNING_KEYS"] = "k2:new-url-secret-new-url-secret-new-url-0,legacy"
			rotated, _ := loadTestConfig(t, env, "")
			_, q, _ := strings.Cut(link, "?")
			if _, err := mustLinks(t, rotated).Signer.Verify(object, q, time.Now()); err != nil {
				t.Errorf("a link of the single-secret node on the rotated node: %v", err)
			}
		})
	}
}

func mustLinks(t *testing.T, cfg Config) *media.Links {
	t.Helper()
	links, err := objectLinks(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return links
}
