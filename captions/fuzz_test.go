package captions

import (
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

// FuzzParse feeds Parse arbitrary files (make fuzz, FUZZ_TARGETS). Whatever it is given it must
// not panic, and what it accepts must hold to its promises: cues sorted, each of plain text
// within the limits, inside the video; and the segments Cut writes must read back as the same
// cues and text, with no tag in them (every '<' written escaped).
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"WEBVTT\n\n00:01.000 --> 00:02.000\nhello <v Bob>x</v> &amp;\n\n00:00.500 --> 00:03.000 align:start\nsecond\n",
		"WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:0,LOCAL:00:00:00.000\n\nNOTE n\n\nSTYLE\n::cue{}\n\nid\n00:00:01.000 --> 00:00:02.000\n<c.a>x</c>\n",
		"1\r\n00:00:01,000 --> 00:00:02,000\r\n<i>hi</i> {\\an8}\r\n\r\n2\r\n00:00:02.500 --> 00:00:04,000\r\nI <3 you\r\n",
		"WEBVTT\n0:0-->", "0000:0000000-->", "\xff\xfe", "WEBVTT\n\n00:01.000 --> 00:02.000\n<script>alert(1)</script>\n",
	} {
		f.Add([]byte(seed))
	}
	const duration = 20 * time.Second
	grid := []time.Duration{6 * time.Second, 6 * time.Second, 6 * time.Second, 2 * time.Second}
	f.Fuzz(func(t *testing.T, data []byte) {
		cues, err := Parse(data, duration)
		if err != nil {
			return
		}
		for i, c := range cues {
			if c.Start < 0 || c.End <= c.Start || c.End > duration || i > 0 && cues[i-1].Start > c.Start {
				t.Fatalf("cue %d: %s --> %s (duration %s)", i, Timestamp(c.Start), Timestamp(c.End), duration)
			}
			if c.Text == "" || utf8.RuneCountInString(c.Text) > MaxCueRunes || !utf8.ValidString(c.Text) ||
				strings.ContainsFunc(c.Text, func(r rune) bool { return r != '\n' && unicode.IsControl(r) }) || strings.Contains(c.Text, "\n\n") {
				t.Fatalf("cue %d: text %q", i, c.Text)
			}
		}
		track, err := Cut(cues, grid, 0)
		if err != nil {
			t.Fatal(err)
		}
		// Every cue written is read back from the segments (a cue repeated in the segments it
		// spans, or given twice, is one).
		var back []Cue
		for i, seg := range track.Segments {
			if body := strings.SplitN(string(seg), "\n\n", 2)[1]; strings.Contains(body, "<") {
				t.Fatalf("segment %d has a '<': %q", i, seg)
			}
			got, err := Parse(seg, duration)
			if err != nil && !strings.Contains(err.Error(), "no cues") {
				t.Fatalf("segment %d does not read back: %v\n%q", i, err, seg)
			}
			back = append(back, got...)
		}
		for _, c := range cues {
			if !containsCue(back, c) {
				t.Fatalf("cue %s %q was not read back from the segments", Timestamp(c.Start), c.Text)
			}
		}
	})
}

func containsCue(cues []Cue, c Cue) bool {
	for _, o := range cues {
		if o.Start == c.Start && o.End == c.End && o.Text == c.Text {
			return true
		}
	}
	return false
}
