package oidctest

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func claims(t *testing.T, token string) (header, body map[string]any) {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a compact JWS: %q", token)
	}
	for i, dst := range []*map[string]any{&header, &body} {
		raw, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			t.Fatal(err)
		}
	}
	return header, body
}

func jwksKids(t *testing.T, p *Provider) []string {
	t.Helper()
	resp, err := http.Get(p.JWKSURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var set struct {
		Keys []struct {
			Kid string `json:"kid"`
		} `json:"keys"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		t.Fatal(err)
	}
	var kids []string
	for _, k := range set.Keys {
		kids = append(kids, k.Kid)
	}
	return kids
}

// The provider signs in a user with a string subject, and a restart publishes a new key.
func TestProvider_SignInAndRestart(t *testing.T) {
	p := Start(t, Options{
		Users:        []User{{ID: "auth0|6571a-9f", Username: "viewer", Password: "pw-viewer"}},
		RedirectURIs: []string{"http://127.0.0.1:1/signin"},
	})
	header, body := claims(t, p.SignIn(t, "viewer", "pw-viewer"))
	if body["iss"] != p.Issuer || body["sub"] != "auth0|6571a-9f" || header["alg"] != "RS256" {
		t.Fatalf("token header %v body %v, want RS256 from %s for auth0|6571a-9f", header, body, p.Issuer)
	}
	if aud, _ := body["aud"].([]any); len(aud) != 1 || aud[0] != ClientID {
		t.Fatalf("aud %v, want [%s]", body["aud"], ClientID)
	}
	if _, err := p.signIn("viewer", "wrong"); err == nil {
		t.Fatal("sign-in with a wrong password succeeded")
	}
	before := jwksKids(t, p)
	if len(before) != 1 || before[0] != header["kid"] {
		t.Fatalf("JWKS kids %v, want the token's %v", before, header["kid"])
	}
	if n := p.Requests("/keys"); n != 1 {
		t.Fatalf("the provider counted %d requests for /keys, want 1", n)
	}
	p.Restart(t)
	after := jwksKids(t, p)
	if len(after) != 1 || after[0] == before[0] {
		t.Fatalf("JWKS kids after a restart %v, want one new key (was %v)", after, before)
	}
	if n := p.Requests("/keys"); n != 2 {
		t.Fatalf("the provider counted %d requests for /keys over both starts, want 2", n)
	}
	p.Stop()
	if _, err := http.Get(p.JWKSURL); err == nil {
		t.Fatal("the provider still answers after Stop")
	}
}
