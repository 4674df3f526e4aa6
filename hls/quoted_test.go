package hls_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/playhead/playhead/hls"
)

// lineBreaks splits a playlist at every character some client takes as the end of a line:
// CR and LF (RFC 8216), VT, FF and NEL (Unicode's mandatory breaks), U+2028 and U+2029
// (JavaScript's line terminators, hls.js's). Empty lines are dropped.
func lineBreaks(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune("\r\n\v\f\u0085\u2028\u2029", r) })
}

// writable is the test's own statement of what a quoted string may hold, written apart from
// hls.CheckQuoted: non-empty UTF-8 without '"', C0 and C1 controls, DEL, U+2028, U+2029.
func writable(s string) bool {
	if s == "" || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r == '"' || r <= 0x1f || (r >= 0x7f && r <= 0x9f) || r == 0x2028 || r == 0x2029 {
			return false
		}
	}
	return true
}

// uriLine is the test's statement of a URI line: writable, not a comment or tag, nothing a
// reader trims.
func uriLine(s string) bool {
	return writable(s) && !strings.HasPrefix(s, "#") && strings.TrimFunc(s, func(r rune) bool { return unicode.IsSpace(r) || r == 0xfeff }) == s
}

// parseAttributes reads an attribute list as RFC 8216 4.2 writes it (NAME=value, separated by
// commas; a quoted-string runs from '"' to the next '"', without escapes), failing on anything
// else.
func parseAttributes(list string) (map[string]string, error) {
	out := map[string]string{}
	for list != "" {
		name, rest, ok := strings.Cut(list, "=")
		if !ok || name == "" || strings.Trim(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") != "" {
			return nil, fmt.Errorf("no attribute name in %q", list)
		}
		var value string
		if strings.HasPrefix(rest, `"`) {
			end := strings.IndexByte(rest[1:], '"')
			if end < 0 {
				return nil, fmt.Errorf("unterminated quoted string in %q", list)
			}
			value, rest = rest[1:end+1], rest[end+2:]
		} else {
			value, rest, _ = strings.Cut(rest, ",")
			rest = "," + rest
			if rest == "," {
				rest = ""
			}
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("attribute %s twice", name)
		}
		out[name] = value
		if rest != "" && !strings.HasPrefix(rest, ",") {
			return nil, fmt.Errorf("%q after the value of %s", rest, name)
		}
		list = strings.TrimPrefix(rest, ",")
	}
	return out, nil
}

func TestCheckQuoted(t *testing.T) {
	for _, s := range []string{"English", "Français (SDH)", "한국어", "فارسی\u200c", "a,b=c", `back\slash`, "nbsp\u00a0", "🎬", "\ufeffbom",
		"avc1.64001f,mp4a.40.2", "/objects/hls/1/x/v0/index.m3u8?member=1&expires=2&sig=AbC-_"} {
		if err := hls.CheckQuoted(s); err != nil {
			t.Errorf("CheckQuoted(%q) = %v, want nil", s, err)
		}
	}
	for _, c := range []struct {
		s, char string
		offset  int
	}{
		{"", "nothing", 0},
		{`En" ,URI="x`, `'"'`, 2},
		{"En\n#EXT-X-ENDLIST", "control character U+000A", 2},
		{"En\r", "control character U+000D", 2},
		{"En\x00", "control character U+0000", 2},
		{"En\v", "control character U+000B", 2},
		{"En\f", "control character U+000C", 2},
		{"En\x7f", "control character U+007F", 2},
		{"En\u0085", "control character U+0085", 2},
		{"En\u009f", "control character U+009F", 2},
		{"English\u2028#EXT-X-MEDIA:", "U+2028 (a line separator)", 7},
		{"é\u2029", "U+2029 (a paragraph separator)", 2},
		{"En\xff", "invalid UTF-8", 2},
		{"En\xed\xa0\x80", "invalid UTF-8", 2}, // a surrogate, encoded
		{"\xc0\xaf", "invalid UTF-8", 0},       // an overlong '/'
	} {
		err := hls.CheckQuoted(c.s)
		var qe *hls.QuoteError
		if !errors.As(err, &qe) || qe.Char != c.char || qe.Offset != c.offset || qe.Value != c.s {
			t.Errorf("CheckQuoted(%q) = %v, want %s at byte %d", c.s, err, c.char, c.offset)
		}
	}
	// U+FFFD written as such is text, not invalid UTF-8.
	if err := hls.CheckQuoted("\ufffd"); err != nil {
		t.Errorf("CheckQuoted(U+FFFD) = %v", err)
	}
	if _, err := hls.QuotedAttribute("NAME,URI", "x"); err == nil {
		t.Error(`QuotedAttribute("NAME,URI", …) wrote an attribute name with a comma`)
	}
}

// Every quoted attribute and URI line of both writers goes through the check: a value it
// refuses fails the whole playlist, in whichever field it is.
func TestMarshal_RefusesAnUnquotableValueInEveryField(t *testing.T) {
	const bad = "English\u2028#EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID=subs,NAME=x,DEFAULT=YES,URI=https://evil.example/"
	for name, set := range masterFields() {
		m := goodMaster()
		set(&m, bad)
		if out, err := m.Marshal(); err == nil || !strings.Contains(err.Error(), "U+2028") {
			t.Errorf("master with %s = %q: %v\n%q", name, bad, err, out)
		}
	}
	for name, set := range mediaFields() {
		p := goodMedia()
		set(&p, bad)
		if out, err := p.Marshal(); err == nil || !strings.Contains(err.Error(), "U+2028") {
			t.Errorf("media playlist with %s = %q: %v\n%q", name, bad, err, out)
		}
	}
}

func goodMaster() hls.Master {
	return hls.Master{Version: 7, Independent: true,
		Media: []hls.Rendition{
			{Type: "AUDIO", GroupID: "audio", Name: "Audio", Default: true, Autoselect: true, Channels: "2", URI: "audio/index.m3u8"},
			{Type: "SUBTITLES", GroupID: "subs", Name: "English", Language: "en", URI: "captions/index.m3u8"},
		},
		Variants: []hls.Variant{{URI: "v0/index.m3u8", Bandwidth: 900_000, AverageBandwidth: 800_000, Codecs: []string{"avc1.64001f", "mp4a.40.2"},
			Width: 640, Height: 360, FrameRate: 30, Audio: "audio", Subtitles: "subs"}},
		IFrames: []hls.IFrameVariant{{URI: "v0/iframes.m3u8", Bandwidth: 90_000, Codecs: []string{"avc1.64001f"}, Width: 640, Height: 360}},
	}
}

func goodMedia() hls.MediaPlaylist {
	return hls.MediaPlaylist{Version: 7, Independent: true, Map: &hls.Map{URI: "media.mp4", Range: hls.ByteRange{Length: 800}},
		Segments: []hls.Segment{{URI: "media.mp4", Duration: 6 * time.Second, Range: hls.ByteRange{Length: 1000, Offset: 800}}}}
}

// masterFields sets each quoted attribute and URI line of goodMaster, by its tag and name.
func masterFields() map[string]func(*hls.Master, string) {
	return map[string]func(*hls.Master, string){
		"EXT-X-MEDIA GROUP-ID":            func(m *hls.Master, v string) { m.Media[1].GroupID = v },
		"EXT-X-MEDIA NAME":                func(m *hls.Master, v string) { m.Media[1].Name = v },
		"EXT-X-MEDIA LANGUAGE":            func(m *hls.Master, v string) { m.Media[1].Language = v },
		"EXT-X-MEDIA CHANNELS":            func(m *hls.Master, v string) { m.Media[0].Channels = v },
		"EXT-X-MEDIA URI":                 func(m *hls.Master, v string) { m.Media[1].URI = v },
		"EXT-X-STREAM-INF CODECS":         func(m *hls.Master, v string) { m.Variants[0].Codecs = []string{v} },
		"EXT-X-STREAM-INF AUDIO":          func(m *hls.Master, v string) { m.Variants[0].Audio = v },
		"EXT-X-STREAM-INF SUBTITLES":      func(m *hls.Master, v string) { m.Variants[0].Subtitles = v },
		"EXT-X-STREAM-INF URI line":       func(m *hls.Master, v string) { m.Variants[0].URI = v },
		"EXT-X-I-FRAME-STREAM-INF CODECS": func(m *hls.Master, v string) { m.IFrames[0].Codecs = []string{v} },
		"EXT-X-I-FRAME-STREAM-INF URI":    func(m *hls.Master, v string) { m.IFrames[0].URI = v },
		"EXT-X-MEDIA TYPE=AUDIO NAME":     func(m *hls.Master, v string) { m.Media[0].Name = v },
		"EXT-X-MEDIA TYPE=AUDIO GROUP-ID": func(m *hls.Master, v string) { m.Media[0].GroupID = v },
		"EXT-X-MEDIA TYPE=AUDIO URI":      func(m *hls.Master, v string) { m.Media[0].URI = v },
	}
}

// mediaFields sets each quoted attribute and URI line of goodMedia.
func mediaFields() map[string]func(*hls.MediaPlaylist, string) {
	return map[string]func(*hls.MediaPlaylist, string){
		"EXT-X-MAP URI":    func(p *hls.MediaPlaylist, v string) { p.Map.URI = v },
		"segment URI line": func(p *hls.MediaPlaylist, v string) { p.Segments[0].URI = v },
	}
}

// FuzzQuotedAttribute (make fuzz, FUZZ_TARGETS): whatever value is given, QuotedAttribute and
// both playlist writers refuse it exactly when the test's own statement of a quoted string
// (writable) does; and what they write holds it on one line, whichever line breaks a client
// counts, the attribute reading back as the same value and every other line as before.
func FuzzQuotedAttribute(f *testing.F) {
	for _, seed := range []string{"English", "Français (SDH)", "en-US", "avc1.64001f,mp4a.40.2", "", `En" ,URI="x`, "En\n#EXT-X-ENDLIST",
		"English\u2028#EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID=subs,NAME=x,DEFAULT=YES,URI=https://evil.example/\u2028#",
		"x\u2029y", "x\u0085y", "x\vy", "\xff", "\ufffd", "a=b,c", "#EXTM3U", "فارسی\u200c", "\r",
		// Written as quoted strings, but trimmed by readers of a URI line.
		"\ufeffx", "x\u00a0", "\u3000x", "x "} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		ok := writable(value)
		attr, err := hls.QuotedAttribute("NAME", value)
		if (err == nil) != ok {
			t.Fatalf("QuotedAttribute(%q) = %q, %v; writable: %v", value, attr, err, ok)
		}
		if ok {
			line := "#EXT-X-MEDIA:" + attr
			if lines := lineBreaks(line); len(lines) != 1 {
				t.Fatalf("%q is %d lines", line, len(lines))
			}
			attrs, err := parseAttributes(strings.TrimPrefix(line, "#EXT-X-MEDIA:"))
			if err != nil || attrs["NAME"] != value || len(attrs) != 1 {
				t.Fatalf("%q reads back as %q, %v", line, attrs, err)
			}
		}

		baseline, err := func() ([]byte, error) { m := goodMaster(); return m.Marshal() }()
		if err != nil {
			t.Fatal(err)
		}
		for name, set := range masterFields() {
			m := goodMaster()
			set(&m, value)
			out, err := m.Marshal()
			// The optional attributes are left out when empty; a URI line is refused more.
			optional := value == "" && (name == "EXT-X-MEDIA CHANNELS" || name == "EXT-X-MEDIA LANGUAGE" || name == "EXT-X-STREAM-INF AUDIO" ||
				name == "EXT-X-STREAM-INF SUBTITLES" || name == "EXT-X-STREAM-INF CODECS" || name == "EXT-X-I-FRAME-STREAM-INF CODECS")
			want := ok || optional
			if strings.HasSuffix(name, "URI line") {
				want = uriLine(value)
			}
			if (err == nil) != want {
				t.Fatalf("master with %s = %q: %v; writable: %v", name, value, err, want)
			}
			if err == nil {
				checkLines(t, name, string(baseline), string(out))
			}
		}
		mediaBaseline, err := func() ([]byte, error) { p := goodMedia(); return p.Marshal() }()
		if err != nil {
			t.Fatal(err)
		}
		for name, set := range mediaFields() {
			p := goodMedia()
			set(&p, value)
			out, err := p.Marshal()
			want := ok
			if strings.HasSuffix(name, "URI line") {
				want = uriLine(value)
			}
			if (err == nil) != want {
				t.Fatalf("media playlist with %s = %q: %v; writable: %v", name, value, err, want)
			}
			if err == nil {
				checkLines(t, name, string(mediaBaseline), string(out))
			}
		}
		if uriLine(value) {
			checkReadBack(t, value)
		}
	})
}

// checkLines checks that out has as many lines as baseline, whichever line breaks a client
// counts, and that each tag line's attributes read.
func checkLines(t *testing.T, field, baseline, out string) {
	t.Helper()
	want, got := lineBreaks(baseline), lineBreaks(out)
	if len(got) != len(want) || len(strings.Split(out, "\n")) != len(strings.Split(baseline, "\n")) {
		t.Fatalf("%s: %d lines, want %d:\n%q", field, len(got), len(want), out)
	}
	for i, line := range got {
		if strings.HasPrefix(line, "#") != strings.HasPrefix(want[i], "#") {
			t.Fatalf("%s: line %d is %q where the baseline has %q", field, i, line, want[i])
		}
		tag, list, hasAttrs := strings.Cut(line, ":")
		if !hasAttrs || !strings.HasPrefix(line, "#EXT-X-") || tag == "#EXT-X-VERSION" || tag == "#EXT-X-TARGETDURATION" ||
			tag == "#EXT-X-MEDIA-SEQUENCE" || tag == "#EXT-X-PLAYLIST-TYPE" || tag == "#EXT-X-BYTERANGE" {
			continue
		}
		if _, err := parseAttributes(list); err != nil {
			t.Fatalf("%s: line %d %q: %v", field, i, line, err)
		}
	}
}

// checkReadBack checks that value reads back from each quoted attribute and URI line it was
// written to.
func checkReadBack(t *testing.T, value string) {
	t.Helper()
	m := goodMaster()
	m.Media[1].Name, m.Media[1].Language, m.Media[1].URI = value, value, value
	m.IFrames[0].URI, m.Variants[0].URI = value, value
	out, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	lines := lineBreaks(string(out))
	// #EXTM3U, EXT-X-VERSION, EXT-X-INDEPENDENT-SEGMENTS, the audio, then the subtitles.
	media, err := parseAttributes(strings.TrimPrefix(lines[4], "#EXT-X-MEDIA:"))
	if err != nil || media["NAME"] != value || media["LANGUAGE"] != value || media["URI"] != value || media["TYPE"] != "SUBTITLES" {
		t.Fatalf("EXT-X-MEDIA %q reads back as %q, %v", lines[4], media, err)
	}
	iframes, err := parseAttributes(strings.TrimPrefix(lines[7], "#EXT-X-I-FRAME-STREAM-INF:"))
	if lines[6] != value || err != nil || iframes["URI"] != value {
		t.Fatalf("URI line %q, EXT-X-I-FRAME-STREAM-INF %q (%v): want %q", lines[6], lines[7], err, value)
	}
	p := goodMedia()
	p.Map.URI, p.Segments[0].URI = value, value
	body, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := hls.ParseMedia(body)
	if err != nil || parsed.Map.URI != value || parsed.Segments[0].URI != value {
		t.Fatalf("media playlist reads back as %+v, %v:\n%q", parsed, err, body)
	}
}
