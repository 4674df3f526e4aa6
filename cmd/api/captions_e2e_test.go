package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/testvideo"
	"github.com/playhead/playhead/media"
)

// TestCaptions_ThroughTheBinary: a real encode (the default packaging, with audio) gets an SRT
// track through POST /v1/media/{id}/captions; the master playlist the member's player is given
// then has the SUBTITLES group on every variant, and hls-parser (npm, strict mode) reads the
// master and the track's playlist; the track's segments follow the video's grid, carry the
// X-TIMESTAMP-MAP of the media's recorded start and the cue as plain text; the list shows the
// track to the owner; deleting it takes it out of the master.
func TestCaptions_ThroughTheBinary(t *testing.T) {
	s := binarytest.Start(t, pipelineEnv("all", "captions", t.TempDir(), t.TempDir(), "ultrafast"))
	owner := binarytest.Token(t, 401, false)
	src := testvideo.MP4(t, t.TempDir(), testvideo.Spec{Seconds: 8, Width: 320, Height: 240, Audio: true})
	id := s.Upload(t, owner, binarytest.Upload{Path: src, Title: "captioned", Visibility: "PRIVATE"})
	v := waitMedia(t, s, owner, id, media.StatusReady)

	srt := "1\r\n00:00:01,000 --> 00:00:02,000\r\n<i>Hello</i> & welcome\r\n\r\n2\r\n00:00:05,500 --> 00:00:06,500\r\nacross a segment boundary\r\n"
	status, out, err := s.PostMultipart(s.URL("/v1/media/%d/captions", id), owner, map[string]string{"language": "en", "label": "English"},
		"captions.srt", strings.NewReader(srt))
	if err != nil || status != http.StatusCreated {
		t.Fatalf("POST captions: %d %s %v", status, out, err)
	}
	var added struct {
		ID   int64
		Cues int
	}
	if err := json.Unmarshal(out, &added); err != nil || added.Cues != 2 {
		t.Fatalf("POST captions answered %s", out)
	}
	list := s.MustDo(t, http.StatusOK, http.MethodGet, s.URL("/v1/media/%d/captions", id), owner, nil)
	if !strings.Contains(string(list), `"label":"English"`) {
		t.Errorf("GET captions: %s", list)
	}

	get := func(link string) string {
		return string(s.MustDo(t, http.StatusOK, http.MethodGet, s.URL("%s", link), "", nil))
	}
	master := get(v.HLSURL)
	m := regexp.MustCompile(`#EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",NAME="English",LANGUAGE="en",DEFAULT=NO,AUTOSELECT=YES,URI="([^"]+)"`).FindStringSubmatch(master)
	variants := strings.Count(master, "#EXT-X-STREAM-INF:")
	if m == nil || variants == 0 || strings.Count(master, `SUBTITLES="subs"`) != variants {
		t.Fatalf("the master playlist has no SUBTITLES group on its %d variants:\n%s", variants, master)
	}
	playlist := get(m[1])
	parsed := hlsParseStrict(t, master, playlist)
	if !strings.Contains(parsed[0], `"subtitles":[{"group":"subs","name":"English","language":"en"`) || !strings.Contains(parsed[1], `"master":false`) {
		t.Errorf("hls-parser read:\n%s", strings.Join(parsed, "\n"))
	}

	var startUS int64
	if err := s.Pool(t).QueryRow(t.Context(), `SELECT coalesce(hls_start_us, -1) FROM media WHERE id = $1`, id).Scan(&startUS); err != nil {
		t.Fatal(err)
	}
	header := fmt.Sprintf("WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:%d,LOCAL:00:00:00.000\n\n", (startUS*9+50)/100)
	var segments []string
	for line := range strings.Lines(playlist) {
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "/objects/") {
			segments = append(segments, get(line))
		}
	}
	videoSegments := strings.Count(get(firstVariant(t, master)), "#EXTINF:")
	if startUS < 0 || len(segments) != videoSegments || len(segments) < 2 {
		t.Fatalf("start %d µs; %d caption segments for %d video segments", startUS, len(segments), videoSegments)
	}
	first := header + "00:00:01.000 --> 00:00:02.000\nHello &amp; welcome\n\n00:00:05.500 --> 00:00:06.500\nacross a segment boundary\n\n"
	if segments[0] != first || !strings.HasPrefix(segments[1], header+"00:00:05.500 --> 00:00:06.500\nacross") {
		t.Errorf("caption segments:\n%q\nwant the first:\n%q", segments, first)
	}

	s.MustDo(t, http.StatusNoContent, http.MethodDelete, s.URL("/v1/media/%d/captions/%d", id, added.ID), owner, nil)
	if master := get(v.HLSURL); strings.Contains(master, "SUBTITLES") {
		t.Errorf("after the deletion the master still lists captions:\n%s", master)
	}
	s.Stop(t)
}

// firstVariant is the first EXT-X-STREAM-INF's URI of a served master playlist.
func firstVariant(t *testing.T, master string) string {
	t.Helper()
	lines := strings.Split(master, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "#EXT-X-STREAM-INF:") && i+1 < len(lines) {
			return lines[i+1]
		}
	}
	t.Fatalf("no variant in\n%s", master)
	return ""
}

// hlsParseStrict runs hls-parser in strict mode (captions/testdata/hls_strict.mjs) on the
// playlists and returns its JSON line for each.
func hlsParseStrict(t *testing.T, playlists ...string) []string {
	t.Helper()
	dir := t.TempDir()
	args := []string{filepath.Join(repoRoot, "captions", "testdata", "hls_strict.mjs")}
	for i, p := range playlists {
		file := filepath.Join(dir, fmt.Sprintf("p%d.m3u8", i))
		if err := os.WriteFile(file, []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, file)
	}
	out, err := exec.Command("node", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("hls-parser (strict) refused a playlist: %v %s (node and npm ci come with make deps / make web)", err, out)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}
