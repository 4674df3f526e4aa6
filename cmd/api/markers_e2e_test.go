package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/testvideo"
	"github.com/playhead/playhead/media"
)

// putVTT sends body as text/vtt to url with token and returns the status and answer.
func putVTT(t *testing.T, url, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "text/vtt")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(out)
}

// parseMaster runs markers/testdata/master_parsers.mjs (hls-parser strict, m3u8-parser) on a
// master playlist and returns what they read.
func parseMaster(t *testing.T, master string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "master.m3u8")
	if err := os.WriteFile(file, []byte(master), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("node", filepath.Join(repoRoot, "markers", "testdata", "master_parsers.mjs"), file).CombinedOutput()
	if err != nil {
		t.Fatalf("a parser refused the master playlist: %v %s (node and npm ci come with make deps / make web)\n%s", err, out, master)
	}
	return strings.TrimSpace(string(out))
}

// TestMarkersChapters_ThroughTheBinary: on a real encode, the owner marks the intro and the
// credits and sets chapters as JSON, then as a WebVTT chapters file; GET /v1/media/{id} shows
// them; the master playlist the player is given names the chapters JSON in an
// EXT-X-SESSION-DATA com.apple.hls.chapters line that hls-parser (strict) and m3u8-parser
// accept; the JSON at the signed URL is Apple's format, with a hostile title (U+2028 and an
// HLS tag) kept inside its JSON string and out of the playlist. Wrong spans and chapters are
// 422 with nothing written; another member gets 404 and changes nothing; an admin may set them;
// a duration below the credits' end is 422, markers on a media of unknown duration 409.
func TestMarkersChapters_ThroughTheBinary(t *testing.T) {
	s := binarytest.Start(t, pipelineEnv("all", "markers", t.TempDir(), t.TempDir(), "ultrafast"))
	owner := binarytest.Token(t, 491, false)
	stranger := binarytest.Token(t, 492, false)
	admin := binarytest.Token(t, 493, true)
	src := testvideo.MP4(t, t.TempDir(), testvideo.Spec{Seconds: 6, Width: 320, Height: 240})
	id := s.Upload(t, owner, binarytest.Upload{Path: src, Title: "marked", Visibility: "PUBLIC"})
	v := waitMedia(t, s, owner, id, media.StatusReady)

	markers := s.URL("/v1/media/%d/markers", id)
	chapters := s.URL("/v1/media/%d/chapters", id)
	s.MustDo(t, http.StatusOK, http.MethodPut, markers, owner, map[string]any{
		"intro": map[string]int64{"start_ms": 0, "end_ms": 1500}, "credits": map[string]int64{"start_ms": 5000, "end_ms": 6000}})
	for name, body := range map[string]any{
		"start after end":    map[string]any{"intro": map[string]int64{"start_ms": 2000, "end_ms": 1000}},
		"start equal to end": map[string]any{"intro": map[string]int64{"start_ms": 1000, "end_ms": 1000}},
		"negative":           map[string]any{"credits": map[string]int64{"start_ms": -1, "end_ms": 1000}},
		"past the duration":  map[string]any{"credits": map[string]int64{"start_ms": 5000, "end_ms": 60_000}},
		"credits from 0":     map[string]any{"credits": map[string]int64{"start_ms": 0, "end_ms": 6000}},
	} {
		status, out, err := s.Do(http.MethodPut, markers, owner, body)
		if err != nil || status != http.StatusUnprocessableEntity || !strings.Contains(string(out), `"error"`) {
			t.Errorf("markers %s: %d %s %v, want 422 with an error", name, status, out, err)
		}
	}
	s.MustDo(t, http.StatusNotFound, http.MethodPut, markers, stranger, map[string]any{"intro": nil})

	hostile := "Evil\u2028#EXT-X-STREAM-INF:BANDWIDTH=1\nhttp://evil/x.m3u8"
	for name, body := range map[string]any{
		"twice the same start": []map[string]any{{"start_ms": 0, "title": "a"}, {"start_ms": 0, "title": "b"}},
		"past the duration":    []map[string]any{{"start_ms": 7000, "title": "a"}},
		"empty title":          []map[string]any{{"start_ms": 0, "title": " "}},
		"hostile title":        []map[string]any{{"start_ms": 0, "title": hostile}},
		"a title of 201":       []map[string]any{{"start_ms": 0, "title": strings.Repeat("é", 201)}},
		"not a list":           map[string]any{"start_ms": 0},
	} {
		status, out, err := s.Do(http.MethodPut, chapters, owner, body)
		if err != nil || status != http.StatusUnprocessableEntity && status != http.StatusBadRequest || !strings.Contains(string(out), `"error"`) {
			t.Errorf("chapters %s: %d %s %v, want 422 or 400 with an error", name, status, out, err)
		}
	}
	s.MustDo(t, http.StatusNotFound, http.MethodPut, chapters, stranger, []map[string]any{{"start_ms": 0, "title": "mine"}})
	s.MustDo(t, http.StatusOK, http.MethodPut, chapters, owner, []map[string]any{
		{"start_ms": 3000, "title": "Middle"}, {"start_ms": 0, "title": "  Opening  "}})
	view := string(s.MustDo(t, http.StatusOK, http.MethodGet, s.URL("/v1/media/%d", id), stranger, nil))
	for _, want := range []string{`"intro":{"start_ms":0,"end_ms":1500}`, `"credits":{"start_ms":5000,"end_ms":6000}`,
		`"chapters":[{"start_ms":0,"title":"Opening"},{"start_ms":3000,"title":"Middle"}]`} {
		if !strings.Contains(view, want) {
			t.Errorf("GET /v1/media/%d lacks %s:\n%s", id, want, view)
		}
	}

	// A WebVTT chapters file replaces the list: markup dropped, a title's lines joined. A title
	// with U+2028 in a cue is refused like one sent as JSON.
	if status, out := putVTT(t, chapters, owner, "WEBVTT\n\n00:00.000 --> 00:02.000\n<b>Intro</b>\n\n00:02.000 --> 00:04.500\nPart &amp; one\nmore\n\n00:04.500 --> 00:06.000\nCredits roll\n"); status != http.StatusOK {
		t.Fatalf("PUT chapters text/vtt: %d %s", status, out)
	}
	if status, out := putVTT(t, chapters, owner, "WEBVTT\n\n00:00.000 --> 00:02.000\nA\u2028#EXTM3U\n"); status != http.StatusUnprocessableEntity {
		t.Errorf("PUT chapters text/vtt with U+2028: %d %s, want 422", status, out)
	}
	if status, out := putVTT(t, chapters, owner, "1\n00:00:00,000 --> 00:00:01,000\nsrt\n"); status != http.StatusUnprocessableEntity {
		t.Errorf("PUT chapters text/vtt that is SRT: %d %s, want 422", status, out)
	}
	// The admin sets the credits of another member's media.
	s.MustDo(t, http.StatusOK, http.MethodPut, markers, admin, map[string]any{
		"intro": map[string]int64{"start_ms": 0, "end_ms": 2000}, "credits": map[string]int64{"start_ms": 4500, "end_ms": 6000}})

	master := string(s.MustDo(t, http.StatusOK, http.MethodGet, s.URL("%s", v.HLSURL), "", nil))
	entry := regexp.MustCompile(`(?m)^#EXT-X-SESSION-DATA:DATA-ID="com\.apple\.hls\.chapters",URI="(/objects/hls/\d+/chapters\.json\?[^"]+)"$`)
	m := entry.FindStringSubmatch(master)
	if m == nil || strings.Count(master, "#EXT-X-SESSION-DATA:") != 1 {
		t.Fatalf("the master has no chapters entry:\n%s", master)
	}
	parsed := parseMaster(t, master)
	// hls-parser counts the I-frame playlists among the variants, m3u8-parser does not.
	variants, iframes := strings.Count(master, "#EXT-X-STREAM-INF:"), strings.Count(master, "#EXT-X-I-FRAME-STREAM-INF:")
	var read struct {
		HLSParser struct {
			Master      bool
			Variants    int
			SessionData []struct{ ID, URI string }
		}
		M3U8Parser struct {
			Variants    int
			SessionData []string
		}
	}
	if err := json.Unmarshal([]byte(parsed), &read); err != nil {
		t.Fatal(err)
	}
	if !read.HLSParser.Master || read.HLSParser.Variants != variants+iframes || read.M3U8Parser.Variants != variants ||
		len(read.HLSParser.SessionData) != 1 || read.HLSParser.SessionData[0].ID != "com.apple.hls.chapters" || read.HLSParser.SessionData[0].URI != m[1] ||
		len(read.M3U8Parser.SessionData) != 1 {
		t.Errorf("the parsers read (%d variants):\n%s", variants, parsed)
	}
	got := string(s.MustDo(t, http.StatusOK, http.MethodGet, s.URL("%s", m[1]), "", nil))
	want := `[{"chapter":1,"start-time":0,"titles":[{"language":"und","title":"Intro"}]},` +
		`{"chapter":2,"start-time":2,"titles":[{"language":"und","title":"Part \u0026 one more"}]},` +
		`{"chapter":3,"start-time":4.5,"titles":[{"language":"und","title":"Credits roll"}]}]`
	if got != want {
		t.Errorf("chapters JSON:\n got %s\nwant %s", got, want)
	}
	// The signature is the credential: the same path without it, or with another key's, is refused.
	if status, _, _ := s.Do(http.MethodGet, s.URL("%s", strings.SplitN(m[1], "?", 2)[0]), "", nil); status == http.StatusOK {
		t.Errorf("the chapters JSON is served without a signature")
	}
	// A link is checked for its member at each request, the chapters' like the playlists': the
	// stranger's, issued while the media is public, is refused once the owner makes it private.
	sm := entry.FindStringSubmatch(string(s.MustDo(t, http.StatusOK, http.MethodGet, s.URL("%s", mediaOf(t, s, stranger, id).HLSURL), "", nil)))
	if sm == nil {
		t.Fatal("the stranger's master has no chapters entry")
	}
	s.MustDo(t, http.StatusOK, http.MethodGet, s.URL("%s", sm[1]), "", nil)
	s.MustDo(t, http.StatusOK, http.MethodPatch, s.URL("/v1/media/%d", id), owner, map[string]any{"visibility": "PRIVATE"})
	// Every node's media cache drops the media on the change's notification: wait for it.
	for deadline := time.Now().Add(encodeTimeout); ; time.Sleep(pollEvery) {
		status, _, err := s.Do(http.MethodGet, s.URL("%s", sm[1]), "", nil)
		if err == nil && status == http.StatusNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stranger's chapters link on a private media: %d %v, want 404", status, err)
		}
	}
	s.MustDo(t, http.StatusOK, http.MethodPatch, s.URL("/v1/media/%d", id), owner, map[string]any{"visibility": "PUBLIC"})

	// The duration cannot go below the credits' end (422, nothing changed), and a media whose
	// duration is unknown gets no markers (409): its probe could find a shorter one.
	s.MustDo(t, http.StatusUnprocessableEntity, http.MethodPatch, s.URL("/v1/admin/media/%d", id), admin, map[string]any{"duration_ms": 5000})
	var unknown struct{ ID int64 }
	if err := json.Unmarshal(s.MustDo(t, http.StatusCreated, http.MethodPost, s.URL("/v1/admin/media"), admin,
		map[string]any{"title": "no duration", "status": "UPLOADED"}), &unknown); err != nil {
		t.Fatal(err)
	}
	s.MustDo(t, http.StatusConflict, http.MethodPut, s.URL("/v1/media/%d/markers", unknown.ID), admin,
		map[string]any{"credits": map[string]int64{"start_ms": 0, "end_ms": 1000}})
	s.MustDo(t, http.StatusOK, http.MethodPut, s.URL("/v1/media/%d/markers", unknown.ID), admin, map[string]any{})

	// An empty list removes the chapters: the master names none.
	s.MustDo(t, http.StatusOK, http.MethodPut, chapters, owner, []any{})
	if master := string(s.MustDo(t, http.StatusOK, http.MethodGet, s.URL("%s", v.HLSURL), "", nil)); strings.Contains(master, "SESSION-DATA") {
		t.Errorf("the master names chapters after they were removed:\n%s", master)
	}
}
