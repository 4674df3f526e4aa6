package markers

import (
	"strings"
	"testing"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/media"
)

// TestCheckChapters: chapters come back sorted with their titles trimmed; every title that is
// not one line of 1 to 200 characters, and every start that is negative, given twice or past
// the duration, is a 422.
func TestCheckChapters(t *testing.T) {
	got, err := checkChapters([]media.Chapter{{StartMS: 5000, Title: " b "}, {StartMS: 0, Title: "a"}}, 10_000)
	if err != nil || len(got) != 2 || got[0] != (media.Chapter{StartMS: 0, Title: "a"}) || got[1] != (media.Chapter{StartMS: 5000, Title: "b"}) {
		t.Fatalf("checkChapters = %+v, %v", got, err)
	}
	for name, chapters := range map[string][]media.Chapter{
		"negative":       {{StartMS: -1, Title: "a"}},
		"at the end":     {{StartMS: 10_000, Title: "a"}},
		"twice":          {{StartMS: 1, Title: "a"}, {StartMS: 1, Title: "b"}},
		"empty":          {{Title: "  "}},
		"201 characters": {{Title: strings.Repeat("é", 201)}},
		"U+2028":         {{Title: "a\u2028#EXTM3U"}},
		"U+2029":         {{Title: "a\u2029b"}},
		"NEL":            {{Title: "a\u0085b"}},
		"line feed":      {{Title: "a\nb"}},
		"NUL":            {{Title: "a\x00b"}},
		"invalid UTF-8":  {{Title: "a\xffb"}},
		"too many":       make([]media.Chapter, MaxChapters+1),
	} {
		if _, err := checkChapters(chapters, 10_000); apperr.CodeOf(err) != apperr.Unprocessable {
			t.Errorf("%s: %v, want a 422", name, err)
		}
	}
	if _, err := checkChapters([]media.Chapter{{StartMS: 1 << 40, Title: strings.Repeat("é", 200)}}, 0); err != nil {
		t.Errorf("a duration unknown, 200 characters: %v", err)
	}
}

// TestCheckSpan: a span ends after it starts, starts at 0 or later, and ends within a known
// duration.
func TestCheckSpan(t *testing.T) {
	for _, s := range []*media.Span{nil, {StartMS: 0, EndMS: 1}, {StartMS: 9_999, EndMS: 10_000}} {
		if err := checkSpan("intro", s, 10_000); err != nil {
			t.Errorf("%+v: %v", s, err)
		}
	}
	for _, s := range []*media.Span{{StartMS: -1, EndMS: 1}, {StartMS: 5, EndMS: 5}, {StartMS: 6, EndMS: 5}, {StartMS: 0, EndMS: 10_001}} {
		if err := checkSpan("intro", s, 10_000); apperr.CodeOf(err) != apperr.Unprocessable {
			t.Errorf("%+v: %v, want a 422", s, err)
		}
	}
}

// TestCheckCreditsStart: credits start after the start of the media; none is fine.
func TestCheckCreditsStart(t *testing.T) {
	for _, s := range []*media.Span{nil, {StartMS: 1, EndMS: 2}} {
		if err := checkCreditsStart(s); err != nil {
			t.Errorf("%+v: %v", s, err)
		}
	}
	if err := checkCreditsStart(&media.Span{StartMS: 0, EndMS: 10_000}); apperr.CodeOf(err) != apperr.Unprocessable {
		t.Errorf("credits from 0: %v, want a 422", err)
	}
}

// TestFromWebVTT: each cue is a chapter at its start, titled by its text without markup, its
// lines joined; a file that is not WebVTT is a 422.
func TestFromWebVTT(t *testing.T) {
	got, err := fromWebVTT([]byte("\uFEFFWEBVTT\n\nchapter-1\n00:00.000 --> 00:10.000 align:start\n<c.x>One</c>\n\n00:10.000 --> 00:20.000\nTwo &amp;\nthree\n"), 0)
	if err != nil || len(got) != 2 || got[0] != (media.Chapter{StartMS: 0, Title: "One"}) || got[1] != (media.Chapter{StartMS: 10_000, Title: "Two & three"}) {
		t.Fatalf("fromWebVTT = %+v, %v", got, err)
	}
	for name, file := range map[string]string{
		"SRT":          "1\n00:00:00,000 --> 00:00:01,000\nx\n",
		"past the end": "WEBVTT\n\n00:30.000 --> 00:31.000\nx\n",
		"no cues":      "WEBVTT\n",
		"a NUL":        "WEBVTT\n\n00:00.000 --> 00:01.000\na\x00b\n",
	} {
		if _, err := fromWebVTT([]byte(file), 20_000); apperr.CodeOf(err) != apperr.Unprocessable {
			t.Errorf("%s: %v, want a 422", name, err)
		}
	}
}
