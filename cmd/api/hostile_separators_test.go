package main

// The hostile-input suite's separator class: characters that some client reads as the end of a
// line (U+2028, U+2029, NEL, VT, FF), in every JSON text field and in the caption fields that
// end up inside the master playlist's quoted attributes.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// separatorTexts are JSON string values, as written in the JSON, each holding a character a
// client may take for a line break, and an HLS tag behind it.
var separatorTexts = []string{
	`a\u2028#EXT-X-ENDLIST`, `a\u2029#EXT-X-ENDLIST`, `a\u0085#EXT-X-ENDLIST`, `a\u000b#EXT-X-ENDLIST`, `a\u000c#EXT-X-ENDLIST`,
}

// separatorCases puts each separator text in every text field of route r's JSON body. What a
// field may hold is the route's to say (a title may hold U+2028: it never reaches a playlist):
// any status below 500, and the rules every answer obeys.
func separatorCases(r hostileRoute, target, tok string) []hostileCase {
	var out []hostileCase
	for _, field := range r.textFields {
		for _, v := range separatorTexts {
			out = append(out, hostileCase{class: classSeparator, method: r.method, target: target, header: jsonHeader(tok),
				body: jsonWith(r.jsonBody, field, v)})
		}
	}
	return out
}

// playlistLineBreaks splits a playlist wherever any client may see a line end.
var playlistLineBreaks = regexp.MustCompile("\r\n|[\r\n\v\f\u0085\u2028\u2029]")

// captionSeparators sends a caption label and language holding each separator to A's media
// (422 naming the field), then reads A's master playlist as a client that breaks lines at
// every one of them would: one EXT-X-MEDIA subtitles line per track A's media lists, and no
// line that is not a tag, a comment or a URI the server signed. It returns the number of cases.
func (f *hostileFixture) captionSeparators(t *testing.T) int {
	t.Helper()
	n := 0
	file := []byte("WEBVTT\n\n00:00.100 --> 00:00.900\nnever stored: each case is refused\n")
	for _, sep := range []string{"\u2028", "\u2029", "\u0085", "\v", "\f", "\u009f", "\x7f"} {
		injected := "English" + sep + `#EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID=subs,NAME=x,DEFAULT=YES,URI=https://evil.example/` + sep + "#"
		for _, fields := range [][][2]string{
			{{"language", "en"}, {"label", injected}},
			{{"language", "en" + sep + "-US"}, {"label", "Refused"}},
		} {
			body, ct := captionForm(fields, file)
			c := hostileCase{class: classSeparator, method: "POST", target: fmt.Sprintf("/v1/media/%d/captions", f.mine),
				header: map[string]string{"Authorization": "Bearer " + f.a, "Content-Type": ct}, body: body, want: []int{http.StatusUnprocessableEntity}}
			f.check(t, c)
			n++
		}
	}
	var tracks struct{ Items []struct{ ID int64 } }
	if err := json.Unmarshal(f.s.MustDo(t, http.StatusOK, http.MethodGet, f.s.URL("/v1/media/%d/captions", f.mine), f.a, nil), &tracks); err != nil {
		t.Fatal(err)
	}
	subtitles := 0
	for _, line := range playlistLineBreaks.Split(f.fetch(t, f.mineURL), -1) {
		switch {
		case strings.HasPrefix(line, "#EXT-X-MEDIA:TYPE=SUBTITLES"):
			subtitles++
		case line == "", strings.HasPrefix(line, "#"), strings.HasPrefix(line, "/objects/"):
		default:
			t.Errorf("[separator] A's master playlist has a line that is neither a tag nor a signed URI: %q", line)
		}
	}
	if subtitles != len(tracks.Items) {
		t.Errorf("[separator] A's master playlist has %d subtitles lines, split at every line break a client may see; A's media has %d tracks",
			subtitles, len(tracks.Items))
	}
	return n + 1
}
