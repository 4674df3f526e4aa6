package main

// The hostile-input suite's cases of PUT /v1/media/{id}/chapters, whose body is a JSON array or
// a WebVTT file (the table's JSON-object cases do not fit it): hostile titles in both, and the
// master playlist and chapters JSON read afterwards as a client that breaks lines everywhere.

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// chapterTitles are chapter titles, as written in a JSON string, that no chapter may have: NUL,
// control characters, line and paragraph separators with an HLS tag behind them, 120 KiB.
var chapterTitles = []string{
	`\u0000`, `a\u0000b`, `\u001b[2J`, `bell\u0007`, `c1\u0085x`, `line\nbreak`, `tab\tbed`,
	`a\u2028#EXT-X-STREAM-INF:BANDWIDTH=1\nhttps://evil.example/x.m3u8`, `a\u2029#EXT-X-ENDLIST`, `a\u000b#EXT-X-ENDLIST`, `a\u000c#EXT-X-ENDLIST`,
	strings.Repeat("x", 120<<10), strings.Repeat("é", 201), ``, `   `,
}

// hostileChapters sends A's media chapters with each hostile title, as JSON (400, 413 or 422)
// and in a WebVTT file (any status below 500: the parser drops control characters, so some
// titles are stored cleaned), other bodies and content types, then reads A's master playlist,
// split at every line break a client may see: only tags and signed URIs, at most one chapters
// entry, and a chapters JSON, when there is one, that parses. It returns the number of cases.
func (f *hostileFixture) hostileChapters(t *testing.T) int {
	t.Helper()
	target := fmt.Sprintf("/v1/media/%d/chapters", f.mine)
	var cases []hostileCase
	for _, title := range chapterTitles {
		cases = append(cases,
			hostileCase{class: classSeparator, method: "PUT", target: target, header: jsonHeader(f.a),
				body: []byte(`[{"start_ms":0,"title":"` + title + `"}]`), want: []int{400, 413, 422}},
			hostileCase{class: classSeparator, method: "PUT", target: target, header: map[string]string{"Authorization": "Bearer " + f.a, "Content-Type": "text/vtt"},
				body: []byte("WEBVTT\n\n00:00.000 --> 00:00.500\n" + strings.NewReplacer(`\u0000`, "\x00", `\u2028`, "\u2028", `\u2029`, "\u2029", `\n`, "\n").Replace(title) + "\n")})
	}
	for _, b := range []string{"", "[", "{}", "null", `[{"start_ms":-1,"title":"a"}]`, `[{"start_ms":0,"title":"a"},{"start_ms":0,"title":"b"}]`,
		`[{"start_ms":"0","title":"a"}]`, `[{"start_ms":0,"title":"a","extra":1}]`, `[{"start_ms":1e309,"title":"a"}]`,
		`[{"start_ms":9223372036854775808,"title":"a"}]`, `[{"start_ms":99999999,"title":"past the end"}]`,
		"[" + strings.Repeat(`{"start_ms":0,"title":"a"},`, 600) + `{"start_ms":1,"title":"a"}]`, strings.Repeat("[", 100_000)} {
		cases = append(cases, hostileCase{class: classBody, method: "PUT", target: target, header: jsonHeader(f.a), body: []byte(b), want: []int{400, 413, 422}})
	}
	for _, vtt := range []string{"", "WEBVTT\n", "WEBVTT\n\n00:00.000 --> 99:00:00.000\nstarts past? no: ends past\n", "WEBVTT\n\n99:00:00.000 --> 99:00:01.000\npast the end\n",
		"1\n00:00:00,000 --> 00:00:01,000\nSRT\n", "\xff\xfeW\x00E\x00B\x00"} {
		cases = append(cases, hostileCase{class: classBody, method: "PUT", target: target,
			header: map[string]string{"Authorization": "Bearer " + f.a, "Content-Type": "text/vtt"}, body: []byte(vtt)})
	}
	for _, ct := range []string{"", "text/plain", "multipart/form-data; boundary=x", "application/jsonx", "text/vtt2"} {
		header := bearer(f.a)
		if ct != "" {
			header["Content-Type"] = ct
		}
		cases = append(cases, hostileCase{class: classBody, method: "PUT", target: target, header: header, body: []byte("[]"), want: []int{415}})
	}
	for _, c := range cases {
		f.check(t, c)
	}

	master := f.fetch(t, f.mineURL)
	entries := 0
	for _, line := range playlistLineBreaks.Split(master, -1) {
		switch {
		case strings.HasPrefix(line, "#EXT-X-SESSION-DATA:"):
			entries++
		case line == "", strings.HasPrefix(line, "#"), strings.HasPrefix(line, "/objects/"):
		default:
			t.Errorf("[separator] A's master playlist has a line that is neither a tag nor a signed URI: %q", line)
		}
	}
	if entries > 1 {
		t.Errorf("[separator] A's master playlist has %d EXT-X-SESSION-DATA lines, want at most 1", entries)
	}
	if m := regexp.MustCompile(`com\.apple\.hls\.chapters",URI="([^"]+)"`).FindStringSubmatch(master); m != nil {
		var chapters []struct {
			Titles []struct{ Title string }
		}
		if err := json.Unmarshal([]byte(f.fetch(t, m[1])), &chapters); err != nil {
			t.Errorf("[separator] A's chapters JSON does not parse: %v", err)
		}
		for _, ch := range chapters {
			for _, title := range ch.Titles {
				if strings.ContainsAny(title.Title, "\x00\u2028\u2029\n\r\v\f\u0085") {
					t.Errorf("[separator] A's chapters JSON has a title with a line break or NUL: %q", title.Title)
				}
			}
		}
	}
	return len(cases) + 1
}
