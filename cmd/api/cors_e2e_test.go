package main

import (
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/playhead/playhead/internal/binarytest"
)

// TestCORS_NodeAnswers is CORS through the binary, as a page on a listed origin meets it: the
// object server's files (playlists, an fMP4 rendition read by byte ranges, a thumbnail) and
// the API's errors (401, 403, 404, 429) all name the origin, expose what the page must read
// (Retry-After, Content-Range) and vary by Origin, so that a page can read why it was refused
// and no shared cache hands one origin's answer to another; origins a browser sends for other
// sites that look like the listed one (a trailing dot, a punycode look-alike, another port)
// and an unlisted Origin beside the listed one get no CORS header; the player pages' CSP is
// the same from any origin.
func TestCORS_NodeAnswers(t *testing.T) {
	const school = "https://www.school.example"
	env := pipelineEnv("all", "cors", t.TempDir(), t.TempDir(), "ultrafast")
	env["PLAYHEAD_CORS_ORIGINS"] = school
	// One report at once, then a 429 for the next.
	env["PLAYHEAD_PUT_RATE"], env["PLAYHEAD_PUT_BURST"] = "0.001", "1"
	s := binarytest.Start(t, env)
	owner := binarytest.Token(t, 301, false)
	id, _ := readyUpload(t, s, owner, "CORS clip", "PRIVATE")
	v := mediaOf(t, s, owner, id)

	get := func(t *testing.T, method, url string, header http.Header) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, vs := range header {
			req.Header[k] = vs
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, body
	}
	fromSchool := func(extra ...string) http.Header {
		h := http.Header{"Origin": {school}}
		for i := 0; i+1 < len(extra); i += 2 {
			h.Set(extra[i], extra[i+1])
		}
		return h
	}
	// listed checks an answer to the listed origin: it names the origin, exposes the header
	// the page must read, never allows credentials, and varies by Origin.
	listed := func(t *testing.T, what string, resp *http.Response, status int, exposed string) {
		t.Helper()
		h := resp.Header
		if resp.StatusCode != status || h.Get("Access-Control-Allow-Origin") != school || h.Get("Access-Control-Allow-Credentials") != "" ||
			!strings.Contains(h.Get("Vary"), "Origin") || !strings.Contains(h.Get("Access-Control-Expose-Headers"), exposed) {
			t.Errorf("%s: %d, allow-origin %q, credentials %q, vary %q, exposed %q; want %d naming %s, exposing %s, Vary: Origin",
				what, resp.StatusCode, h.Get("Access-Control-Allow-Origin"), h.Get("Access-Control-Allow-Credentials"), h.Get("Vary"),
				h.Get("Access-Control-Expose-Headers"), status, school, exposed)
		}
	}

	t.Run("Objects", func(t *testing.T) {
		resp, master := get(t, "GET", s.HTTPURL+v.HLSURL, fromSchool())
		listed(t, "the master playlist", resp, 200, "Retry-After")
		variant := firstURI(t, s.HTTPURL+v.HLSURL, master)
		resp, playlist := get(t, "GET", variant, fromSchool())
		listed(t, "the rendition's playlist", resp, 200, "Retry-After")
		m := regexp.MustCompile(`#EXT-X-MAP:URI="([^"]+)"`).FindSubmatch(playlist)
		if m == nil {
			t.Fatalf("the rendition's playlist names no fMP4 file:\n%s", playlist)
		}
		base, err := url.Parse(variant)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := url.Parse(string(m[1]))
		if err != nil {
			t.Fatal(err)
		}
		mp4 := base.ResolveReference(ref).String()
		resp, _ = get(t, "GET", mp4, fromSchool("Range", "bytes=0-99"))
		listed(t, "a byte range of the rendition", resp, 206, "Content-Range")
		resp, _ = get(t, "GET", s.HTTPURL+v.ThumbnailURL, fromSchool("Range", "bytes=10-19"))
		listed(t, "a byte range of the thumbnail", resp, 206, "Content-Range")
		// A file whose signature does not hold, and the chapters of a media that has none.
		resp, _ = get(t, "GET", s.HTTPURL+strings.Replace(v.ThumbnailURL, "sig=", "sig=0", 1), fromSchool())
		listed(t, "a forged signature", resp, 403, "Retry-After")
		chapters := s.HTTPURL + strings.Replace(v.HLSURL, "master.m3u8", "chapters.json", 1)
		resp, _ = get(t, "GET", chapters, fromSchool())
		if resp.StatusCode != 403 && resp.StatusCode != 404 {
			t.Errorf("chapters.json on the master's signature: %d, want 403 or 404", resp.StatusCode)
		}
		listed(t, "chapters.json refused", resp, resp.StatusCode, "Retry-After")
	})

	t.Run("Errors", func(t *testing.T) {
		playback := s.URL("/v1/playback/%d", id)
		resp, _ := get(t, "GET", playback, fromSchool())
		listed(t, "no token", resp, 401, "Retry-After")
		resp, _ = get(t, "GET", s.URL("/v1/nowhere"), fromSchool("Authorization", "Bearer "+owner))
		listed(t, "an unknown route", resp, 404, "Retry-After")
		resp, _ = get(t, "GET", s.URL("/v1/playback/%d", id+1000), fromSchool("Authorization", "Bearer "+owner))
		listed(t, "a media that does not exist", resp, 404, "Retry-After")
		resp, _ = get(t, "OPTIONS", s.URL("/v1/nowhere"), fromSchool("Access-Control-Request-Method", "GET"))
		listed(t, "the preflight of an unknown route", resp, 204, "")
		put := func() *http.Response {
			req, err := http.NewRequest("PUT", playback, strings.NewReader(`{"position_ms": 1000}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Origin", school)
			req.Header.Set("Authorization", "Bearer "+owner)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp
		}
		listed(t, "a report", put(), 204, "Retry-After")
		resp = put()
		listed(t, "a report over the limit", resp, 429, "Retry-After")
		if resp.Header.Get("Retry-After") == "" {
			t.Errorf("a 429 without Retry-After")
		}
	})

	t.Run("LookAlikes", func(t *testing.T) {
		for _, origins := range [][]string{
			{"https://www.school.example."}, {"https://www.xn--schol-jua.example"}, {"https://www.school.example:444"},
			{"https://evil.example", school}, {school + "/watch"},
		} {
			for _, method := range []string{"GET", "OPTIONS"} {
				h := http.Header{"Origin": origins, "Access-Control-Request-Method": {"GET"}, "Authorization": {"Bearer " + owner}}
				resp, _ := get(t, method, s.URL("/v1/playback/%d", id), h)
				if acao := resp.Header.Get("Access-Control-Allow-Origin"); acao != "" || !strings.Contains(resp.Header.Get("Vary"), "Origin") {
					t.Errorf("%s from %q: allow-origin %q, vary %q; want none and Vary: Origin", method, origins, acao, resp.Header.Get("Vary"))
				}
			}
		}
	})

	t.Run("PagesCSP", func(t *testing.T) {
		for _, path := range []string{"/", "/watch/1"} {
			plain, _ := get(t, "GET", s.URL("%s", path), nil)
			cross, _ := get(t, "GET", s.URL("%s", path), fromSchool())
			if csp := plain.Header.Get("Content-Security-Policy"); csp == "" || cross.Header.Get("Content-Security-Policy") != csp {
				t.Errorf("GET %s: CSP %q, from %s %q; want the same, not empty", path, csp, school, cross.Header.Get("Content-Security-Policy"))
			}
		}
	})
}
