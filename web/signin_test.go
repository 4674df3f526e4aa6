package web

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
)

// A configured provider: /signin.json names it (issuer, public client id, audience, nothing
// secret), and the policy lets the pages call its origin, in connect-src only: scripts, frames
// and forms stay this origin's (or none).
func TestSignIn_ConfiguredProvider(t *testing.T) {
	signIn := SignIn{Issuer: "http://localhost:41234/", ClientID: "native", Audience: "native"}
	h, err := New(Config{MediaOrigins: []string{"https://store.example"}, SignIn: &signIn})
	if err != nil {
		t.Fatal(err)
	}
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	h.Register(app)

	resp, body := get(t, app, http.MethodGet, "/signin.json", nil)
	var got map[string]any
	if err := json.Unmarshal([]byte(body), &got); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /signin.json: %d %s (%v)", resp.StatusCode, body, err)
	}
	want := map[string]any{"enabled": true, "issuer": signIn.Issuer, "client_id": "native", "audience": "native"}
	if len(got) != len(want) {
		t.Errorf("GET /signin.json: %s, want exactly %v", body, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("GET /signin.json: %s = %v, want %v", k, got[k], v)
		}
	}

	for _, path := range []string{"/", "/signin/callback", "/watch/1", "/signin.json"} {
		resp, _ := get(t, app, http.MethodGet, path, nil)
		csp := resp.Header.Get("Content-Security-Policy")
		for _, want := range []string{"connect-src 'self' https://store.example http://localhost:41234;", "script-src 'self';",
			"img-src 'self' https://store.example;", "form-action 'none'", "frame-ancestors 'none'", "default-src 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("GET %s: Content-Security-Policy %q lacks %q", path, csp, want)
			}
		}
		if strings.Count(csp, "localhost:41234") != 1 {
			t.Errorf("GET %s: Content-Security-Policy %q names the provider outside connect-src", path, csp)
		}
	}
}

// No provider: /signin.json says so, and the policy names no origin but the pages' own.
func TestSignIn_NoProvider(t *testing.T) {
	app, _ := newApp(t)
	resp, body := get(t, app, http.MethodGet, "/signin.json", nil)
	if resp.StatusCode != http.StatusOK || body != `{"enabled":false}` {
		t.Errorf("GET /signin.json: %d %s, want 200 {\"enabled\":false}", resp.StatusCode, body)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src 'self';") {
		t.Errorf("Content-Security-Policy %q: connect-src names another origin", csp)
	}
}

// An issuer that is not an http(s) URL, or that would add to the policy, stops the start, as
// does a provider without a client id or an audience.
func TestSignIn_RefusesABadProvider(t *testing.T) {
	for _, s := range []SignIn{
		{Issuer: "", ClientID: "c", Audience: "a"},
		{Issuer: "localhost:1234", ClientID: "c", Audience: "a"},
		{Issuer: "javascript:alert(1)", ClientID: "c", Audience: "a"},
		{Issuer: "https://idp.example/; script-src *", ClientID: "c", Audience: "a"},
		{Issuer: "https://idp.example/ 'unsafe-inline'", ClientID: "c", Audience: "a"},
		{Issuer: "https://user:pw@idp.example/", ClientID: "c", Audience: "a"},
		{Issuer: "https://idp.example/", Audience: "a"},
		{Issuer: "https://idp.example/", ClientID: "c"},
	} {
		if _, err := New(Config{SignIn: &s}); err == nil {
			t.Errorf("New with sign-in %+v: accepted", s)
		}
	}
}
