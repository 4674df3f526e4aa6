package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
)

func newApp(t *testing.T) (*fiber.App, *Handler) {
	t.Helper()
	h, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	h.Register(app)
	return app, h
}

func get(t *testing.T, app *fiber.App, method, path string, header map[string]string) (*http.Response, string) {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := app.Test(req, -1)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

func TestPagesAndAssets(t *testing.T) {
	app, _ := newApp(t)
	for _, tc := range []struct {
		path, contentType, contains string
	}{
		{"/", "text/html; charset=utf-8", `src="/static/js/home.mjs"`},
		{"/watch/42", "text/html; charset=utf-8", `src="/static/js/watch.mjs"`},
		{"/course?c=Go", "text/html; charset=utf-8", `src="/static/js/course.mjs"`},
		{"/imports", "text/html; charset=utf-8", `src="/static/js/imports.mjs"`},
		{"/jobs", "text/html; charset=utf-8", `src="/static/js/jobs.mjs"`},
		{"/insights", "text/html; charset=utf-8", `src="/static/js/insights.mjs"`},
		{"/signin/callback?code=x&state=y", "text/html; charset=utf-8", `src="/static/js/signin.mjs"`},
		{"/signin.json", "application/json", `{"enabled":false}`},
		{"/static/css/app.css", "text/css; charset=utf-8", ".player"},
		{"/static/js/watch.mjs", "text/javascript; charset=utf-8", "from './player-sdk.mjs'"},
		// The player SDK (sdk/js), embedded from its one source.
		{"/static/js/player-sdk.mjs", "text/javascript; charset=utf-8", "keepalive"},
		{"/static/favicon.svg", "image/svg+xml", "<svg"},
	} {
		resp, body := get(t, app, http.MethodGet, tc.path, nil)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != tc.contentType || !strings.Contains(body, tc.contains) {
			t.Errorf("GET %s: %d %q, body has %q: %v; want 200 %q", tc.path, resp.StatusCode, resp.Header.Get("Content-Type"),
				tc.contains, strings.Contains(body, tc.contains), tc.contentType)
		}
		csp := resp.Header.Get("Content-Security-Policy")
		for _, want := range []string{"script-src 'self'", "media-src 'self' blob:", "img-src 'self'", "default-src 'none'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("GET %s: Content-Security-Policy %q lacks %q", tc.path, csp, want)
			}
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("GET %s: X-Content-Type-Options %q, Referrer-Policy %q; want nosniff, no-referrer", tc.path,
				resp.Header.Get("X-Content-Type-Options"), resp.Header.Get("Referrer-Policy"))
		}
	}
	for _, path := range []string{"/watch/0", "/watch/-3", "/watch/abc", "/static/nope.js", "/static/", "/static/../pages/index.html"} {
		if resp, _ := get(t, app, http.MethodGet, path, nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, resp.StatusCode)
		}
	}
	if resp, body := get(t, app, http.MethodHead, "/", nil); resp.StatusCode != http.StatusOK || body != "" {
		t.Errorf("HEAD /: %d with a %d-byte body, want 200 and none", resp.StatusCode, len(body))
	}
}

func TestETagRevalidation(t *testing.T) {
	app, _ := newApp(t)
	resp, _ := get(t, app, http.MethodGet, "/static/css/app.css", nil)
	etag := resp.Header.Get("ETag")
	if etag == "" || resp.Header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("GET app.css: ETag %q, Cache-Control %q; want an ETag and no-cache", etag, resp.Header.Get("Cache-Control"))
	}
	for _, match := range []string{etag, `"other", ` + etag, "W/" + etag, "*"} {
		if resp, body := get(t, app, http.MethodGet, "/static/css/app.css", map[string]string{"If-None-Match": match}); resp.StatusCode != http.StatusNotModified || body != "" {
			t.Errorf("If-None-Match %s: %d with %d bytes, want 304 and none", match, resp.StatusCode, len(body))
		}
	}
	if resp, _ := get(t, app, http.MethodGet, "/static/css/app.css", map[string]string{"If-None-Match": `"stale"`}); resp.StatusCode != http.StatusOK {
		t.Errorf("a stale ETag: %d, want 200", resp.StatusCode)
	}
}

// TestReferencesResolve checks that every /static/ path the pages name, and every module a
// script imports, is embedded. Only hls.js (vendor/, copied in by `make web`) may be absent.
func TestReferencesResolve(t *testing.T) {
	_, h := newApp(t)
	ref := regexp.MustCompile(`(?:src|href)="/static/([^"]+)"`)
	imp := regexp.MustCompile(`from '\./([^']+)'`)
	for name, page := range h.pages {
		for _, m := range ref.FindAllStringSubmatch(string(page.body), -1) {
			if _, ok := h.static[m[1]]; !ok && !strings.HasPrefix(m[1], "vendor/") {
				t.Errorf("%s refers to /static/%s, which is not embedded", name, m[1])
			}
		}
	}
	for name, a := range h.static {
		if !strings.HasPrefix(name, "js/") {
			continue
		}
		for _, m := range imp.FindAllStringSubmatch(string(a.body), -1) {
			if _, ok := h.static["js/"+m[1]]; !ok {
				t.Errorf("%s imports ./%s, which is not embedded", name, m[1])
			}
		}
	}
	if !h.HasHLS() {
		t.Logf("hls.js is not embedded in this build (run `make web`): the player would fall back to native HLS")
	}
}

// With S3 storage the pages fetch segments (hls.js, by XHR), thumbnails and native HLS media
// from the object store's origin: the policy allows that origin there and nowhere else.
func TestContentSecurityPolicy_AllowsTheObjectStore(t *testing.T) {
	const store = "https://media.example-bucket.s3.eu-west-1.amazonaws.com"
	h, err := New(Config{MediaOrigins: []string{store}})
	if err != nil {
		t.Fatal(err)
	}
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	h.Register(app)
	resp, _ := get(t, app, http.MethodGet, "/watch/42", nil)
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"connect-src 'self' " + store + ";", "media-src 'self' blob: data: " + store + ";", "img-src 'self' " + store + ";",
		"script-src 'self';", "worker-src 'self';"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
		}
	}
	for _, bad := range []string{"", "https://a.example; script-src *", "https://a.example 'unsafe-inline'"} {
		if _, err := New(Config{MediaOrigins: []string{bad}}); err == nil {
			t.Errorf("New(%q) accepted an origin that would change the policy", bad)
		}
	}
}
