package media_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestObjects_ByteRanges: an fMP4 rendition is read by byte ranges (EXT-X-BYTERANGE). One
// range is answered 206 with exactly its bytes and Content-Range; a range past the end 416;
// a Range header that is not one readable range is answered whole.
func TestObjects_ByteRanges(t *testing.T) {
	f := setupObjects(t)
	key := fmt.Sprintf("hls/%d/tok/v0/media.mp4", f.mine)
	target := "/objects/" + key + "?" + f.query(1, key)
	size := len(mineRendition)
	for _, tc := range []struct {
		rangeHeader  string
		status       int
		body         string
		contentRange string
	}{
		{"", http.StatusOK, mineRendition, ""},
		{"bytes=0-9", http.StatusPartialContent, mineRendition[:10], fmt.Sprintf("bytes 0-9/%d", size)},
		{"bytes=10-19", http.StatusPartialContent, mineRendition[10:20], fmt.Sprintf("bytes 10-19/%d", size)},
		{"bytes=30-", http.StatusPartialContent, mineRendition[30:], fmt.Sprintf("bytes 30-%d/%d", size-1, size)},
		{"bytes=-4", http.StatusPartialContent, mineRendition[size-4:], fmt.Sprintf("bytes %d-%d/%d", size-4, size-1, size)},
		{"bytes=20-1000", http.StatusPartialContent, mineRendition[20:], fmt.Sprintf("bytes 20-%d/%d", size-1, size)},
		{fmt.Sprintf("bytes=%d-", size), http.StatusRequestedRangeNotSatisfiable, "", fmt.Sprintf("bytes */%d", size)},
		{"bytes=-0", http.StatusRequestedRangeNotSatisfiable, "", fmt.Sprintf("bytes */%d", size)},
		{"bytes=0-1,4-5", http.StatusOK, mineRendition, ""}, // several ranges: answered whole
		{"bytes=9-3", http.StatusOK, mineRendition, ""},
		{"items=0-3", http.StatusOK, mineRendition, ""},
	} {
		header := map[string]string{}
		if tc.rangeHeader != "" {
			header["Range"] = tc.rangeHeader
		}
		status, h, body := rawGet(t, f.addr, target, header)
		if status != tc.status || h.Get("Content-Range") != tc.contentRange {
			t.Errorf("Range %q: status %d Content-Range %q, want %d %q", tc.rangeHeader, status, h.Get("Content-Range"), tc.status, tc.contentRange)
			continue
		}
		if status == http.StatusRequestedRangeNotSatisfiable {
			if !bytes.Contains(body, []byte(`"error"`)) {
				t.Errorf("Range %q: 416 body %q, want a JSON error", tc.rangeHeader, body)
			}
			continue
		}
		if string(body) != tc.body || h.Get("Accept-Ranges") != "bytes" || h.Get("Content-Type") != "video/mp4" {
			t.Errorf("Range %q: body %q Accept-Ranges %q Content-Type %q, want %q bytes video/mp4", tc.rangeHeader, body, h.Get("Accept-Ranges"), h.Get("Content-Type"), tc.body)
		}
	}
}

// TestObjects_StoryboardSpritesAreSigned: the storyboard's WebVTT is rewritten for the member
// like a playlist, each sprite reference a signed link that opens the sprite, the #xywh
// fragment kept; one that names another media's file is never served.
func TestObjects_StoryboardSpritesAreSigned(t *testing.T) {
	f := setupObjects(t)
	key := fmt.Sprintf("hls/%d/tok/storyboard/storyboard.vtt", f.mine)
	// A preview may be asked for at any moment of the video: a sprite's link lasts the links'
	// TTL plus the media's whole duration (10.5 s) from when the storyboard was served.
	wantExpiry := time.Now().Add(f.links.TTL + 10500*time.Millisecond).Unix()
	status, h, body := rawGet(t, f.addr, "/objects/"+key+"?"+f.query(1, key), nil)
	if status != http.StatusOK || h.Get("Content-Type") != "text/vtt; charset=utf-8" || h.Get("Cache-Control") != "private, no-store" {
		t.Fatalf("GET storyboard: %d %q %q %q", status, h.Get("Content-Type"), h.Get("Cache-Control"), body)
	}
	var sprites []string
	for line := range strings.Lines(string(body)) {
		if uri, fragment, ok := strings.Cut(strings.TrimSpace(line), "#xywh="); ok {
			sprites = append(sprites, uri)
			if fragment != "0,0,160,90" && fragment != "160,0,160,90" {
				t.Errorf("fragment %q changed", fragment)
			}
		}
	}
	if len(sprites) != 2 || !strings.HasPrefix(string(body), "WEBVTT\n\n00:00:00.000 --> 00:00:05.000\n") {
		t.Fatalf("storyboard %q, want both cues kept with their sprites", body)
	}
	for _, uri := range sprites {
		if !strings.HasPrefix(uri, fmt.Sprintf("/objects/hls/%d/tok/storyboard/sprite_000.jpg?member=1&expires=", f.mine)) {
			t.Fatalf("sprite link %q, want a signed Playhead URL", uri)
		}
		u, err := url.Parse(uri)
		if err != nil {
			t.Fatal(err)
		}
		if expires, err := strconv.ParseInt(u.Query().Get("expires"), 10, 64); err != nil || expires < wantExpiry {
			t.Errorf("sprite link %q expires at %d, want at least %d (TTL plus the duration)", uri, expires, wantExpiry)
		}
		if status, _, sprite := rawGet(t, f.addr, uri, nil); status != http.StatusOK || string(sprite) != "JPEG mine sprite" {
			t.Errorf("GET sprite %s: %d %q", uri, status, sprite)
		}
	}
	bad := fmt.Sprintf("hls/%d/tok/bad/storyboard.vtt", f.mine)
	if status, _, body := rawGet(t, f.addr, "/objects/"+bad+"?"+f.query(1, bad), nil); status < 500 || bytes.Contains(body, []byte(fmt.Sprintf("%d/tok", f.theirs))) {
		t.Errorf("GET a storyboard that names another media's file: %d %q, want a server error without a link", status, body)
	}
}
