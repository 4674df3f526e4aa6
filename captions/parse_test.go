package captions

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/apperr"
)

const hour = time.Hour

func texts(cues []Cue) []string {
	var out []string
	for _, c := range cues {
		out = append(out, fmt.Sprintf("%s-%s %s", Timestamp(c.Start), Timestamp(c.End), c.Text))
	}
	return out
}

func mustParse(t *testing.T, file string, duration time.Duration) []Cue {
	t.Helper()
	cues, err := Parse([]byte(file), duration)
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, file)
	}
	return cues
}

func wantCues(t *testing.T, got []Cue, want ...string) {
	t.Helper()
	g := texts(got)
	if strings.Join(g, "\n") != strings.Join(want, "\n") {
		t.Errorf("cues:\n%s\nwant:\n%s", strings.Join(g, "\n"), strings.Join(want, "\n"))
	}
}

func TestParse_SRT(t *testing.T) {
	file := "\xef\xbb\xbf1\r\n00:00:01,000 --> 00:00:02,500\r\n<i>Hello</i>, <font color=\"#ff0000\">world</font>\r\n\r\n" +
		"2\r\n00:00:03.000 --> 00:00:04.000 X1:10 X2:20 Y1:0 Y2:0\r\n{\\an8}On top\r\nI <3 you & me\r\n \r\n" +
		"3\n00:00:05,000 --> 00:00:06,000\n<b></b>\n\n" + // only markup: dropped
		"4\n1:00:07,000 --> 1:00:08,000\n\tTabbed\x07bell\u0085\n"
	wantCues(t, mustParse(t, file, 2*hour),
		"00:00:01.000-00:00:02.500 Hello, world",
		"00:00:03.000-00:00:04.000 On top\nI <3 you & me",
		"01:00:07.000-01:00:08.000 Tabbedbell")
}

func TestParse_WebVTT(t *testing.T) {
	file := "WEBVTT - a title\nX-TIMESTAMP-MAP=MPEGTS:900000,LOCAL:00:00:00.000\n\n" +
		"NOTE written by hand\nover two lines\n\nSTYLE\n::cue { color: red }\n\nREGION\nid:fred\n\n" +
		"intro\n00:01.000 --> 00:02.000 align:start position:10% line:0\n<v Roger>Hi <b>there</b></v> &amp; &lt;b&gt; &#60;i&#62;\n\n" +
		"00:00:03.000 --> 00:00:04.000\n<script>alert(1)</script><img src=x onerror=alert(2)>\n\n" +
		"00:05.000 --> 00:06.000\n" + strings.Repeat("<c.x>", 100_000) + "deep" + strings.Repeat("</c>", 100_000) + "\n\n" +
		"00:07.000 --> 00:08.000\nunterminated <b class=\"x\n\n" +
		"00:09.000 --> 00:10.000\n&nbsp;\n"
	wantCues(t, mustParse(t, file, hour),
		"00:00:01.000-00:00:02.000 Hi there & <b> <i>",
		"00:00:03.000-00:00:04.000 alert(1)",
		"00:00:05.000-00:00:06.000 deep",
		"00:00:07.000-00:00:08.000 unterminated")
}

// TestParse_CarriageReturnLineEndings: a file whose lines end with CR alone (classic Mac OS
// editors), which WebVTT allows as a line terminator, reads like one with LF.
func TestParse_CarriageReturnLineEndings(t *testing.T) {
	wantCues(t, mustParse(t, "WEBVTT\r\r00:01.000 --> 00:02.000\rfirst\rtwo lines\r\r00:03.000 --> 00:04.000\rsecond\r", hour),
		"00:00:01.000-00:00:02.000 first\ntwo lines",
		"00:00:03.000-00:00:04.000 second")
	wantCues(t, mustParse(t, "1\r00:00:01,000 --> 00:00:02,000\rsrt\r\r2\r00:00:03,000 --> 00:00:04,000\rsecond\r", hour),
		"00:00:01.000-00:00:02.000 srt",
		"00:00:03.000-00:00:04.000 second")
}

func TestParse_OrderOverlapAndEnd(t *testing.T) {
	file := "WEBVTT\n\n00:10.000 --> 00:12.000\nthird\n\n00:01.000 --> 00:05.000\nfirst\n\n00:02.000 --> 00:03.000\nsecond, overlapping\n\n" +
		"00:29.000 --> 00:45.000\npast the end\n"
	wantCues(t, mustParse(t, file, 30*time.Second),
		"00:00:01.000-00:00:05.000 first",
		"00:00:02.000-00:00:03.000 second, overlapping",
		"00:00:10.000-00:00:12.000 third",
		"00:00:29.000-00:00:30.000 past the end")
}

func TestParse_Refused(t *testing.T) {
	many := func(n int, step time.Duration) string {
		var b strings.Builder
		b.WriteString("WEBVTT\n\n")
		for i := range n {
			fmt.Fprintf(&b, "%s --> %s\na\n\n", Timestamp(time.Duration(i)*step), Timestamp(time.Duration(i)*step+step))
		}
		return b.String()
	}
	simultaneous := "WEBVTT\n\n" + strings.Repeat("00:01.000 --> 00:05.000\nsame time\n\n", MaxSimultaneousCues+1)
	cases := []struct {
		name, file string
		code       apperr.Code
		message    string
	}{
		{"too large", strings.Repeat("x", MaxFileBytes+1), apperr.TooLarge, "limit is"},
		{"UTF-16", "\xff\xfeW\x00E\x00", apperr.Unprocessable, "UTF-16"},
		{"invalid UTF-8", "WEBVTT\n\n00:01.000 --> 00:02.000\nok\n\n00:03.000 --> 00:04.000\nbad \xff\xfe\n", apperr.Unprocessable, "line 7: not UTF-8"},
		{"overlong NUL", "WEBVTT\n\n00:01.000 --> 00:02.000\n\xc0\x80\n", apperr.Unprocessable, "line 4: not UTF-8"},
		{"NUL", "1\n00:00:01,000 --> 00:00:02,000\nnul\x00here\n", apperr.Unprocessable, "line 3: a NUL byte"},
		{"empty", "", apperr.Unprocessable, "no cues"},
		{"only a header", "WEBVTT\n", apperr.Unprocessable, "no cues"},
		{"only markup", "WEBVTT\n\n00:01.000 --> 00:02.000\n<b><i></i></b>\n", apperr.Unprocessable, "no cues"},
		{"not captions", "meeting notes\nmore notes\n", apperr.Unprocessable, "line 1: expected an SRT subtitle"},
		{"WEBVTT prefix", "WEBVTTX\n\n00:01.000 --> 00:02.000\nx\n", apperr.Unprocessable, "line 1: expected an SRT subtitle"},
		{"no blank after header", "WEBVTT\n00:01.000 --> 00:02.000\nx\n", apperr.Unprocessable, "line 2: a blank line must come"},
		{"stray block", "WEBVTT\n\n00:01.000 --> 00:02.000\nx\n\njust text\n", apperr.Unprocessable, "line 6: expected a cue"},
		{"negative", "WEBVTT\n\n-00:01.000 --> 00:02.000\nx\n", apperr.Unprocessable, "line 3: not a cue timing line"},
		{"minutes 60", "WEBVTT\n\n00:60.000 --> 01:02.000\nx\n", apperr.Unprocessable, "line 3: not a cue timing line"},
		{"two-digit ms", "1\n00:00:01,00 --> 00:00:02,000\nx\n", apperr.Unprocessable, "line 2: not a cue timing line"},
		{"SRT without hours", "1\n00:01,000 --> 00:02,000\nx\n", apperr.Unprocessable, "line 2: not a cue timing line"},
		{"huge hours", "WEBVTT\n\n99999:00:00.000 --> 99999:00:01.000\nx\n", apperr.Unprocessable, "line 3: not a cue timing line"},
		{"no end", "WEBVTT\n\n00:01.000 -->\nx\n", apperr.Unprocessable, "line 3: not a cue timing line"},
		{"end before start", "WEBVTT\n\n00:05.000 --> 00:02.000\nx\n", apperr.Unprocessable, "line 3: the cue's end (00:00:02.000) is not after its start"},
		{"zero length", "1\n00:00:05,000 --> 00:00:05,000\nx\n", apperr.Unprocessable, "line 2: the cue's end (00:00:05.000) is not after its start (00:00:05.000)"},
		{"missing blank line", "1\n00:00:01,000 --> 00:00:02,000\nx\n2\n00:00:03,000 --> 00:00:04,000\ny\n", apperr.Unprocessable, "line 5: a cue's text cannot contain"},
		{"long text", "WEBVTT\n\n00:01.000 --> 00:02.000\n" + strings.Repeat("é", MaxCueRunes+1) + "\n", apperr.Unprocessable, "line 3: the cue's text is longer than 500"},
		{"after the end", "WEBVTT\n\n00:01.000 --> 00:02.000\nx\n\n00:31.000 --> 00:32.000\ny\n", apperr.Unprocessable, "line 6: the cue at 00:00:31.000 starts after the video ends (00:00:30.000)"},
		{"too many cues", many(MaxCues+1, 100*time.Millisecond), apperr.Unprocessable, fmt.Sprintf("more than %d cues", MaxCues)},
		{"too many at once", simultaneous, apperr.Unprocessable, "more than 10 cues are shown at once at 00:00:01.000"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cues, err := Parse([]byte(c.file), 30*time.Second)
			var ae *apperr.Error
			if !errors.As(err, &ae) || ae.Code != c.code || !strings.Contains(ae.Message, c.message) {
				t.Fatalf("Parse = %d cues, %v; want %s %q", len(cues), err, c.code, c.message)
			}
		})
	}
	// The limits themselves are accepted: MaxCues cues, MaxSimultaneousCues at once.
	if cues, err := Parse([]byte(many(MaxCues, 100*time.Millisecond)), hour); err != nil || len(cues) != MaxCues {
		t.Errorf("%d cues: %d, %v", MaxCues, len(cues), err)
	}
	atOnce := strings.Repeat("00:01.000 --> 00:05.000\nsame time\n\n", MaxSimultaneousCues) + "00:05.000 --> 00:06.000\nafter\n"
	if cues, err := Parse([]byte("WEBVTT\n\n"+atOnce), hour); err != nil || len(cues) != MaxSimultaneousCues+1 {
		t.Errorf("%d at once, then one as they end: %d, %v", MaxSimultaneousCues, len(cues), err)
	}
}
