package main

// The caption routes of the hostile-input suite (hostile_test.go): malformed forms and fields,
// and hostile caption files — huge, deep cue markup, <script>, NUL, invalid UTF-8, 100 000
// cues, timestamps out of order — each a clear 4xx or a safe render: accepted files are served
// as plain text, with no '<' left in any segment.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/playhead/playhead/internal/formtest"
)

// captionForm is a multipart body of fields (in order) and, when file is not nil, a file part.
func captionForm(fields [][2]string, file []byte) ([]byte, string) {
	return formtest.Multipart(fields, "captions.vtt", file)
}

// captionCase is a POST of a caption form to A's media as A.
func captionCase(f *hostileFixture, class, label string, file []byte, want ...int) hostileCase {
	body, ct := captionForm([][2]string{{"language", "en"}, {"label", label}}, file)
	return hostileCase{class: class, method: "POST", target: fmt.Sprintf("/v1/media/%d/captions", f.mine),
		header: map[string]string{"Authorization": "Bearer " + f.a, "Content-Type": ct}, body: body, want: want}
}

// addCaption adds a caption track to A's media and returns its id.
func addCaption(t *testing.T, f *hostileFixture, label string, file []byte) int64 {
	t.Helper()
	c := captionCase(f, classFile, label, file, 201)
	status, _, body := c.send(t, f.s)
	var out struct{ ID int64 }
	if status != 201 || json.Unmarshal(body, &out) != nil || out.ID == 0 {
		t.Fatalf("add caption %s: %d %s", label, status, body)
	}
	return out.ID
}

// captionFormCases are the malformed forms and fields of POST /v1/media/{id}/captions.
func captionFormCases(target, tok string) []hostileCase {
	var out []hostileCase
	add := func(class string, body []byte, contentType string, want ...int) {
		out = append(out, hostileCase{class: class, method: "POST", target: target,
			header: map[string]string{"Authorization": "Bearer " + tok, "Content-Type": contentType}, body: body, want: want})
	}
	file := []byte("WEBVTT\n\n00:00.100 --> 00:00.900\nnever stored: each case is refused\n")
	good, goodType := captionForm([][2]string{{"language", "en"}, {"label", "Refused"}}, file)
	add(classBody, good, "application/json", 415)
	add(classBody, good, "text/plain", 415)
	add(classBody, good, "", 415)
	add(classBody, good, "multipart/form-data", 400)
	add(classBody, good[:len(good)/2], goodType, 400)
	add(classBody, []byte("--x\r\n\r\n"), "multipart/form-data; boundary=x", 400, 422)
	add(classBody, bytes.Repeat([]byte("x"), 3<<20), goodType, 413)
	for _, fields := range [][][2]string{
		{{"label", "Refused"}}, // no language
		{{"language", "en"}},   // no label
		{{"language", "en"}, {"label", "Refused"}, {"colour", "red"}},    // unknown field
		{{"language", "en"}, {"language", "fr"}, {"label", "Refused"}},   // twice
		{{"language", strings.Repeat("en-", 500)}, {"label", "Refused"}}, // long
		// 34 bytes that canonicalise to 39, past the column's 35 (was a SQLSTATE 23514).
		{{"language", "sh-u-ca-gregory-nu-latn-co-phonebk"}, {"label", "Refused"}},
		{{"language", "en"}, {"label", "Refused"}, {"file", "a second file"}}, // two files
	} {
		b, ct := captionForm(fields, file)
		add(classBody, b, ct, 400, 422)
	}
	noFile, noFileType := captionForm([][2]string{{"language", "en"}, {"label", "Refused"}}, nil)
	add(classBody, noFile, noFileType, 422)
	for _, v := range []string{"\x00", "a\x00b", "\xff\xfe", "\x1b[2J", "\xc0\x80", "a\r\nb", `x",URI="http://evil.example/x.m3u8`, "english", "x-" + strings.Repeat("a", 40)} {
		for _, field := range []string{"language", "label"} {
			fields := [][2]string{{"language", "en"}, {"label", "Refused"}}
			if field == "language" {
				fields[0][1] = v
			} else {
				fields[1][1] = v
			}
			if field == "label" && (v == "english" || strings.HasPrefix(v, "x-")) {
				continue // a fine label
			}
			b, ct := captionForm(fields, file)
			add(classText, b, ct, 422)
		}
	}
	return out
}

// hostileCaptions posts the hostile caption files to A's 2-second media: each is refused
// with a clear 4xx, or accepted and served as plain text (no '<' in any segment of its
// track, its cues sorted).
func (f *hostileFixture) hostileCaptions(t *testing.T) int {
	t.Helper()
	cue := func(start, end, text string) string { return start + " --> " + end + "\n" + text + "\n\n" }
	many := func(n int) []byte {
		return []byte("WEBVTT\n\n" + strings.Repeat(cue("00:00.000", "00:00.001", "a"), n))
	}
	refused := []struct {
		name string
		file []byte
		want int
	}{
		{"huge: 3 MiB", bytes.Repeat([]byte("WEBVTT\n\n"), 3<<17), 413},
		{"a file one byte over 2 MiB", append([]byte("WEBVTT\n\n"), bytes.Repeat([]byte(" "), 2<<20-7)...), 413},
		{"100 000 cues", many(100_000), 413},
		{"20 001 cues", many(20_001), 422},
		{"NUL", []byte("WEBVTT\n\n" + cue("00:00.100", "00:00.900", "a\x00b")), 422},
		{"invalid UTF-8", []byte("WEBVTT\n\n" + cue("00:00.100", "00:00.900", "caf\xe9")), 422},
		{"UTF-16", []byte("\xff\xfeW\x00E\x00B\x00V\x00T\x00T\x00"), 422},
		{"a cue that ends before it starts", []byte("WEBVTT\n\n" + cue("00:01.500", "00:00.500", "backwards")), 422},
		{"a negative time", []byte("1\n-00:00:00,500 --> 00:00:01,000\nbefore the start\n"), 422},
		{"past the video's end", []byte("WEBVTT\n\n" + cue("00:00.100", "00:00.900", "ok") + cue("01:00:00.000", "01:00:01.000", "an hour in")), 422},
		{"eleven cues at once", []byte("WEBVTT\n\n" + strings.Repeat(cue("00:00.100", "00:00.900", "at once"), 11)), 422},
		{"not captions", []byte("<html><script>alert(1)</script></html>"), 422},
	}
	n := 0
	for _, r := range refused {
		if status := f.check(t, captionCase(f, classFile, "Refused "+r.name, r.file, r.want)); status != r.want {
			t.Errorf("[file] caption %s: %d, want %d", r.name, status, r.want)
		}
		n++
	}
	accepted := []struct {
		label, file, text string
	}{
		{"Deep markup", "WEBVTT\n\n" + cue("00:00.100", "00:00.900", strings.Repeat("<c.x><b><i>", 60_000)+"deep"+strings.Repeat("</i></b></c>", 60_000)), "deep"},
		{"Script", "WEBVTT\n\n" + cue("00:00.100", "00:00.900", `<script>alert(document.cookie)</script><img src=x onerror="alert(1)"> &lt;script&gt;`), "alert(document.cookie) &lt;script&gt;"},
		{"Out of order", "1\n00:00:01,200 --> 00:00:01,600\nsecond\n\n2\n00:00:00,100 --> 00:00:00,900\n<font color=red>first</font>\n", "first\n\n00:00:01.200 --> 00:00:01.600\nsecond"},
	}
	for _, a := range accepted {
		if status := f.check(t, captionCase(f, classFile, a.label, []byte(a.file), 201)); status != 201 {
			t.Errorf("[file] caption %s: %d, want 201", a.label, status)
		}
		n++
	}
	// What players get: every accepted track in the master, its segments plain text.
	master := f.fetch(t, f.mineURL)
	for _, a := range accepted {
		m := regexp.MustCompile(`NAME="` + a.label + `",LANGUAGE="en",DEFAULT=NO,AUTOSELECT=NO,URI="([^"]+)"`).FindStringSubmatch(master)
		if m == nil {
			t.Errorf("[file] caption %s is not in the master playlist:\n%s", a.label, master)
			continue
		}
		var segments strings.Builder
		for line := range strings.Lines(f.fetch(t, m[1])) {
			if line = strings.TrimSpace(line); strings.HasPrefix(line, "/objects/") {
				segments.WriteString(f.fetch(t, line))
			}
		}
		body := segments.String()
		if !strings.Contains(body, a.text) || strings.Contains(body, "<") {
			t.Errorf("[file] caption %s is served as:\n%.500s\nwant plain text with %q and no '<'", a.label, body, a.text)
		}
	}
	return n
}

// fetch GETs a link the server gave (a signed object URL) and returns its body; the exchange is
// checked like every case.
func (f *hostileFixture) fetch(t *testing.T, link string) string {
	t.Helper()
	c := hostileCase{class: classFile, method: "GET", target: link, want: []int{200}}
	status, _, body := c.send(t, f.s)
	if status != 200 {
		t.Fatalf("GET %s: %d %s", link, status, body)
	}
	return string(body)
}
