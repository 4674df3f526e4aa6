package httpserver_test

import (
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/httpserver"
)

func TestParseOrigins(t *testing.T) {
	got, err := httpserver.ParseOrigins(" https://www.School.example ,http://127.0.0.1:8081,, https://www.school.example,https://[::1]:8443")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"https://www.school.example", "http://127.0.0.1:8081", "https://[::1]:8443"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("ParseOrigins: %q, want %q", got, want)
	}
	if got, err := httpserver.ParseOrigins(""); err != nil || len(got) != 0 {
		t.Errorf("ParseOrigins(\"\"): %q %v, want none", got, err)
	}
	for _, bad := range []string{
		"*", "https://*.school.example", "null", "www.school.example", "ftp://school.example", "https://school.example/",
		"https://school.example/app", "https://school.example?x", "https://school.example#top", "https://user@school.example",
		"https://school.example:443", "http://school.example:80", "https://school.example:", "https://school.example:99999",
		"https://school.example:08080", "https://école.example", "https://school .example", "https://", "https:school.example",
		"https://school%2eexample",
	} {
		if _, err := httpserver.ParseOrigins("https://ok.example," + bad); err == nil || !strings.Contains(err.Error(), "write ") {
			t.Errorf("ParseOrigins(%q): %v, want an error saying how to write an origin", bad, err)
		}
	}
}

// corsServer serves, over loopback, an app with CORS for origins and the routes a preflight
// must not be answered by for an unlisted origin: a GET and a PUT that need a token, and an
// OPTIONS of its own (tus's discovery).
func corsServer(t *testing.T, origins []string) string {
	t.Helper()
	app := httpserver.New(httpserver.Config{CORSOrigins: origins})
	needToken := func(c *fiber.Ctx) error {
		if c.Get(fiber.HeaderAuthorization) != "Bearer good" {
			return apperr.Errorf(apperr.Unauthenticated, "missing or invalid token")
		}
		return c.SendStatus(fiber.StatusNoContent)
	}
	httpserver.Get(app, "/v1/thing", needToken)
	app.Put("/v1/thing", needToken)
	app.Options("/v1/uploads", needToken)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.Shutdown() })
	return "http://" + ln.Addr().String()
}

func corsRequest(t *testing.T, method, url string, header map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// TestCORS_AllowList: a listed origin's preflight is answered 204 without a token, and its
// requests carry its origin back, whatever their status; no other origin gets a CORS header,
// and its requests are answered as without CORS.
func TestCORS_AllowList(t *testing.T) {
	const school = "https://www.school.example"
	base := corsServer(t, []string{school, "http://127.0.0.1:8081"})
	preflight := func(origin, method string) map[string]string {
		return map[string]string{"Origin": origin, "Access-Control-Request-Method": method,
			"Access-Control-Request-Headers": "authorization,content-type"}
	}

	t.Run("Preflight", func(t *testing.T) {
		for _, method := range []string{"PUT", "GET", "OPTIONS"} {
			for _, path := range []string{"/v1/thing", "/v1/uploads", "/objects/hls/1/x.m3u8"} {
				resp := corsRequest(t, "OPTIONS", base+path, preflight(school, method))
				h := resp.Header
				if resp.StatusCode != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != school {
					t.Errorf("preflight %s %s: %d, allow-origin %q; want 204 %s", method, path, resp.StatusCode, h.Get("Access-Control-Allow-Origin"), school)
				}
				for name, want := range map[string]string{"Access-Control-Allow-Methods": method, "Access-Control-Allow-Headers": "Authorization",
					"Access-Control-Max-Age": "7200", "Vary": "Origin"} {
					if !strings.Contains(h.Get(name), want) {
						t.Errorf("preflight %s %s: %s %q, want it to hold %q", method, path, name, h.Get(name), want)
					}
				}
				for _, h2 := range []string{"Content-Type", "Last-Event-ID", "Upload-Offset", "Tus-Resumable"} {
					if !strings.Contains(h.Get("Access-Control-Allow-Headers"), h2) {
						t.Errorf("preflight: Access-Control-Allow-Headers %q lacks %s", h.Get("Access-Control-Allow-Headers"), h2)
					}
				}
				if h.Get("Access-Control-Allow-Credentials") != "" {
					t.Errorf("preflight: Access-Control-Allow-Credentials %q, want none", h.Get("Access-Control-Allow-Credentials"))
				}
			}
		}
		// A method no route takes is not allowed: the preflight is the route's.
		if resp := corsRequest(t, "OPTIONS", base+"/v1/thing", preflight(school, "TRACE")); resp.StatusCode == http.StatusNoContent ||
			resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("preflight TRACE: %d, allow-origin %q; want no CORS", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
		}
	})

	t.Run("Requests", func(t *testing.T) {
		for _, c := range []struct {
			method, path, token string
			status              int
		}{{"GET", "/v1/thing", "good", 204}, {"PUT", "/v1/thing", "", 401}, {"GET", "/v1/thing", "bad", 401},
			{"OPTIONS", "/v1/uploads", "good", 204}, {"GET", "/nowhere", "", 404}} {
			resp := corsRequest(t, c.method, base+c.path, map[string]string{"Origin": school, "Authorization": "Bearer " + c.token})
			h := resp.Header
			if resp.StatusCode != c.status || h.Get("Access-Control-Allow-Origin") != school || !strings.Contains(h.Get("Vary"), "Origin") {
				t.Errorf("%s %s with token %q: %d, allow-origin %q, vary %q; want %d %s Origin", c.method, c.path, c.token,
					resp.StatusCode, h.Get("Access-Control-Allow-Origin"), h.Get("Vary"), c.status, school)
			}
			if !strings.Contains(h.Get("Access-Control-Expose-Headers"), "Retry-After") || !strings.Contains(h.Get("Access-Control-Expose-Headers"), "Location") {
				t.Errorf("%s %s: Access-Control-Expose-Headers %q, want Retry-After and Location", c.method, c.path, h.Get("Access-Control-Expose-Headers"))
			}
			if h.Get("Access-Control-Allow-Methods") != "" {
				t.Errorf("%s %s: an actual request got Access-Control-Allow-Methods", c.method, c.path)
			}
		}
	})

	t.Run("UnlistedOrigins", func(t *testing.T) {
		for _, origin := range []string{
			"https://evil.example", "null", "https://www.school.example.evil.com", "https://evil-www.school.example",
			"https://www.school.exampl", "https://www.school.example:443", "https://www.school.example/", "http://www.school.example",
			"HTTPS://WWW.SCHOOL.EXAMPLE", "https://www.School.example", "*", "http://127.0.0.1:80810",
			"https://www.school.example, https://evil.example",
		} {
			resp := corsRequest(t, "OPTIONS", base+"/v1/thing", preflight(origin, "PUT"))
			if resp.StatusCode != http.StatusMethodNotAllowed || hasCORSHeader(resp.Header) {
				t.Errorf("preflight from %q: %d %v; want the route's 405 with no CORS header", origin, resp.StatusCode, resp.Header)
			}
			resp = corsRequest(t, "OPTIONS", base+"/v1/uploads", preflight(origin, "POST"))
			if resp.StatusCode != http.StatusUnauthorized || hasCORSHeader(resp.Header) {
				t.Errorf("preflight of tus's OPTIONS from %q: %d; want its own 401 with no CORS header", origin, resp.StatusCode)
			}
			for token, status := range map[string]int{"good": 204, "bad": 401} {
				resp = corsRequest(t, "PUT", base+"/v1/thing", map[string]string{"Origin": origin, "Authorization": "Bearer " + token})
				if resp.StatusCode != status || hasCORSHeader(resp.Header) || !strings.Contains(resp.Header.Get("Vary"), "Origin") {
					t.Errorf("PUT from %q with token %s: %d %v; want %d, Vary: Origin and no CORS header", origin, token, resp.StatusCode, resp.Header, status)
				}
			}
		}
	})

	t.Run("NoOriginsNoHeaders", func(t *testing.T) {
		off := corsServer(t, nil)
		for _, method := range []string{"OPTIONS", "GET"} {
			resp := corsRequest(t, method, off+"/v1/thing", map[string]string{"Origin": school, "Authorization": "Bearer good",
				"Access-Control-Request-Method": "GET"})
			if hasCORSHeader(resp.Header) || resp.Header.Get("Vary") != "" {
				t.Errorf("%s without CORS origins: %v; want no CORS header and no Vary", method, resp.Header)
			}
		}
	})
}

func hasCORSHeader(h http.Header) bool {
	for name := range h {
		if strings.HasPrefix(name, "Access-Control-") {
			return true
		}
	}
	return false
}
