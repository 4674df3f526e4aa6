// Package captions is a media item's captions: WebVTT or SRT files uploaded by its owner,
// normalised to plain-text WebVTT, cut into segments on the video's own segment grid and listed
// in its master playlist as a SUBTITLES rendition group.
//
// A caption file is untrusted text. Parse reads it strictly and keeps nothing but cue times and
// plain text: markup, cue settings, identifiers, styles, regions and notes are dropped, control
// characters removed, and the text written back escaped, so that what a player renders cannot
// be anything but text.
//
// The parser is this package's own rather than github.com/asticode/go-astisub (v0.34.0, MIT,
// the well-kept Go library for subtitles): fuzzed for a minute before choosing, astisub panicked
// within a second on "WEBVTT\n0:0-->" (index out of range, webvtt.go:247) and on the SRT
// "0000:0000000-->" (srt.go:115), and it keeps styles, regions and inline tags that would all
// have to be stripped again. What is needed here is small: two timestamp syntaxes, blocks
// separated by blank lines, and text with tags removed.
package captions

import (
	"bytes"
	"cmp"
	"fmt"
	"html"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/playhead/playhead/apperr"
)

// The limits on one caption file. A three-hour film has about 2 000 subtitles in 150 KB; a
// four-hour lecture transcribed at one cue every 1.5 s has under 10 000.
const (
	// MaxFileBytes bounds an uploaded file: over it, 413.
	MaxFileBytes = 2 << 20
	// MaxCues bounds the cues of one file.
	MaxCues = 20_000
	// MaxCueRunes bounds the text of one cue, after markup is removed (a subtitle is two lines
	// of about 42 characters).
	MaxCueRunes = 500
	// MaxSimultaneousCues bounds the cues shown at any one moment. Browsers stack overlapping
	// cues; thousands at once would bury the video, and since a cue is repeated in every segment
	// it spans, the bound also keeps the segments small: at most MaxCues plus this many per
	// segment are written in all.
	MaxSimultaneousCues = 10
)

// Cue is one caption: Text shown from Start to End of the video.
type Cue struct {
	Start, End time.Duration
	// Text is plain text, its lines separated by "\n": no markup, no control character, no
	// empty line.
	Text string
	// line is where the cue's timing line is in the file, for errors.
	line int
}

// Parse reads a WebVTT file (one that starts with the WEBVTT signature) or else an SRT file,
// for a video of the given duration, and returns its cues sorted by start time. Every refusal
// is an apperr: TooLarge past MaxFileBytes, Unprocessable otherwise, naming the line.
//
// What it does with what it is given:
//   - not UTF-8 (UTF-16 included), or a NUL byte: refused;
//   - other control characters: removed; tabs become spaces;
//   - markup (WebVTT tags, SRT's <i>/<font …> and {\an8}): removed; WebVTT's character
//     references (&amp;, &lt;, …) decoded to the characters they stand for;
//   - cue settings, identifiers, NOTE, STYLE and REGION blocks, header lines: dropped;
//   - a cue with no text left: dropped;
//   - a malformed timing line, or one whose end is not after its start: refused (a negative time
//     cannot be written, so it is malformed);
//   - cues out of order: sorted by start time; overlapping cues are kept (two speakers), up to
//     MaxSimultaneousCues at once;
//   - a cue that starts at or after the end of the video: refused (the file is likely for
//     another video); one that ends after it: cut at the end.
func Parse(data []byte, duration time.Duration) ([]Cue, error) {
	if len(data) > MaxFileBytes {
		return nil, apperr.Errorf(apperr.TooLarge, "the caption file is %d bytes, the limit is %d", len(data), MaxFileBytes)
	}
	text, err := decodeText(data)
	if err != nil {
		return nil, err
	}
	var cues []Cue
	if isWebVTT(text) {
		cues, err = parseWebVTT(text)
	} else {
		cues, err = parseSRT(text)
	}
	if err != nil {
		return nil, err
	}
	if len(cues) == 0 {
		return nil, apperr.Errorf(apperr.Unprocessable, "the caption file has no cues with text: expected WebVTT (starting with WEBVTT) or SRT")
	}
	slices.SortStableFunc(cues, func(a, b Cue) int { return cmp.Compare(a.Start, b.Start) })
	for i := range cues {
		c := &cues[i]
		if c.Start >= duration {
			return nil, apperr.Errorf(apperr.Unprocessable, "line %d: the cue at %s starts after the video ends (%s): is the file for another video?",
				c.line, Timestamp(c.Start), Timestamp(duration))
		}
		c.End = min(c.End, duration)
	}
	if err := checkSimultaneous(cues); err != nil {
		return nil, err
	}
	return cues, nil
}

// decodeText checks that data is UTF-8 text without NUL and returns it with a byte order mark
// dropped and every line ending made "\n".
func decodeText(data []byte) (string, error) {
	if bytes.HasPrefix(data, []byte{0xff, 0xfe}) || bytes.HasPrefix(data, []byte{0xfe, 0xff}) {
		return "", apperr.Errorf(apperr.Unprocessable, "the caption file is UTF-16: save it as UTF-8")
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	if !utf8.Valid(data) {
		return "", apperr.Errorf(apperr.Unprocessable, "line %d: not UTF-8: save the caption file as UTF-8", lineAt(data, invalidUTF8At(data)))
	}
	if i := bytes.IndexByte(data, 0); i >= 0 {
		return "", apperr.Errorf(apperr.Unprocessable, "line %d: a NUL byte: a caption file is text", lineAt(data, i))
	}
	s := strings.ReplaceAll(string(data), "\r\n", "\n")
	return strings.ReplaceAll(s, "\r", "\n"), nil
}

func invalidUTF8At(data []byte) int {
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return len(data)
}

// lineAt is the 1-based line of byte offset i (a CR, LF or CRLF ends a line).
func lineAt(data []byte, i int) int {
	prefix := data[:i]
	return 1 + bytes.Count(prefix, []byte("\n")) + bytes.Count(prefix, []byte("\r")) - bytes.Count(prefix, []byte("\r\n"))
}

// isWebVTT reports whether text starts with the WebVTT signature: "WEBVTT" alone on its line or
// followed by a space or a tab.
func isWebVTT(text string) bool {
	rest, ok := strings.CutPrefix(text, "WEBVTT")
	return ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t' || rest[0] == '\n')
}

// block is a run of non-blank lines; first is the line number of lines[0].
type block struct {
	first int
	lines []string
}

// blocks splits text into blocks separated by blank lines (empty, or only spaces and tabs).
func blocks(text string) []block {
	var out []block
	var cur *block
	n := 0
	for line := range strings.SplitSeq(text, "\n") {
		n++
		if strings.Trim(line, " \t") == "" {
			cur = nil
			continue
		}
		if cur == nil {
			out = append(out, block{first: n})
			cur = &out[len(out)-1]
		}
		cur.lines = append(cur.lines, line)
	}
	return out
}

const arrow = "-->"

func containsArrow(lines []string) bool {
	return slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, arrow) })
}

// cueReader collects the cues of one file.
type cueReader struct {
	parseTime func(string) (time.Duration, bool)
	clean     func(string) string
	cues      []Cue
	// read counts the cues read, those left without text included, so that MaxCues bounds
	// the work done on a file too.
	read int
}

func parseWebVTT(text string) ([]Cue, error) {
	bs := blocks(text)
	// The first block is the signature and the header lines (X-TIMESTAMP-MAP, Region): dropped.
	for i, line := range bs[0].lines[1:] {
		if strings.Contains(line, arrow) {
			return nil, apperr.Errorf(apperr.Unprocessable, "line %d: a blank line must come between the WEBVTT line and the first cue", bs[0].first+1+i)
		}
	}
	r := cueReader{parseTime: parseVTTTime, clean: vttText}
	for _, b := range bs[1:] {
		first := b.lines[0]
		isNote := first == "NOTE" || strings.HasPrefix(first, "NOTE ") || strings.HasPrefix(first, "NOTE\t")
		if isNote || (first == "STYLE" || first == "REGION") && !containsArrow(b.lines) {
			continue
		}
		timing := 0 // the cue identifier, if any, is dropped
		if !strings.Contains(first, arrow) {
			timing = 1
		}
		if timing >= len(b.lines) || !strings.Contains(b.lines[timing], arrow) {
			return nil, apperr.Errorf(apperr.Unprocessable, "line %d: expected a cue (a line with start --> end) or a NOTE", b.first)
		}
		if err := r.add(b, timing); err != nil {
			return nil, err
		}
	}
	return r.cues, nil
}

func parseSRT(text string) ([]Cue, error) {
	r := cueReader{parseTime: parseSRTTime, clean: srtText}
	for _, b := range blocks(text) {
		timing := 0
		if !strings.Contains(b.lines[0], arrow) {
			if strings.Trim(b.lines[0], " \t0123456789") != "" || len(b.lines) < 2 || !strings.Contains(b.lines[1], arrow) {
				return nil, apperr.Errorf(apperr.Unprocessable,
					"line %d: expected an SRT subtitle (its number, then a line with start --> end), or a WebVTT file (its first line WEBVTT)", b.first)
			}
			timing = 1 // the subtitle's number
		}
		if err := r.add(b, timing); err != nil {
			return nil, err
		}
	}
	return r.cues, nil
}

// add reads the cue of block b whose timing line is b.lines[timing]; a cue left without text is
// dropped.
func (r *cueReader) add(b block, timing int) error {
	line := b.first + timing
	if r.read++; r.read > MaxCues {
		return apperr.Errorf(apperr.Unprocessable, "line %d: more than %d cues", line, MaxCues)
	}
	start, end, ok := parseTiming(b.lines[timing], r.parseTime)
	if !ok {
		return apperr.Errorf(apperr.Unprocessable, "line %d: not a cue timing line (start --> end): %.80q", line, b.lines[timing])
	}
	if end <= start {
		return apperr.Errorf(apperr.Unprocessable, "line %d: the cue's end (%s) is not after its start (%s)", line, Timestamp(end), Timestamp(start))
	}
	body := b.lines[timing+1:]
	for i, l := range body {
		if strings.Contains(l, arrow) {
			return apperr.Errorf(apperr.Unprocessable, "line %d: a cue's text cannot contain %q: is a blank line missing before this cue?", line+1+i, arrow)
		}
	}
	text := r.clean(strings.Join(body, "\n"))
	if utf8.RuneCountInString(text) > MaxCueRunes {
		return apperr.Errorf(apperr.Unprocessable, "line %d: the cue's text is longer than %d characters", line, MaxCueRunes)
	}
	if text != "" {
		r.cues = append(r.cues, Cue{Start: start, End: end, Text: text, line: line})
	}
	return nil
}

// parseTiming reads "start --> end [settings]"; the settings are dropped.
func parseTiming(line string, parseTime func(string) (time.Duration, bool)) (start, end time.Duration, ok bool) {
	left, right, _ := strings.Cut(line, arrow)
	fields := strings.Fields(right)
	if len(fields) == 0 {
		return 0, 0, false
	}
	start, okStart := parseTime(strings.Trim(left, " \t"))
	end, okEnd := parseTime(fields[0])
	return start, end, okStart && okEnd
}

// maxHourDigits bounds the hours of a timestamp: no video is 10 000 hours long, and the sum
// cannot overflow.
const maxHourDigits = 4

// parseVTTTime reads a WebVTT timestamp: [hours:]mm:ss.ttt (hours of 1 to 4 digits).
func parseVTTTime(s string) (time.Duration, bool) {
	return parseClock(s, '.', false)
}

// parseSRTTime reads an SRT timestamp: hh:mm:ss,ttt (hours of 1 to 4 digits; a '.' is taken
// for the ',', as many writers use it).
func parseSRTTime(s string) (time.Duration, bool) {
	if d, ok := parseClock(s, ',', true); ok {
		return d, true
	}
	return parseClock(s, '.', true)
}

// parseClock reads [h:]mm:ss<sep>ttt; hours are required when needHours.
func parseClock(s string, sep byte, needHours bool) (time.Duration, bool) {
	clock, frac, ok := strings.Cut(s, string(sep))
	if !ok || len(frac) != 3 || !allDigits(frac) {
		return 0, false
	}
	parts := strings.Split(clock, ":")
	if len(parts) == 2 && needHours || len(parts) < 2 || len(parts) > 3 {
		return 0, false
	}
	var hours int64
	if len(parts) == 3 {
		h := parts[0]
		if h == "" || len(h) > maxHourDigits || !allDigits(h) {
			return 0, false
		}
		hours = atoi(h)
		parts = parts[1:]
	}
	mm, ss := parts[0], parts[1]
	if len(mm) != 2 || len(ss) != 2 || !allDigits(mm) || !allDigits(ss) || atoi(mm) > 59 || atoi(ss) > 59 {
		return 0, false
	}
	ms := ((hours*60+atoi(mm))*60+atoi(ss))*1000 + atoi(frac)
	return time.Duration(ms) * time.Millisecond, true
}

func allDigits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// atoi reads a short run of digits (allDigits).
func atoi(s string) int64 {
	var n int64
	for i := range len(s) {
		n = n*10 + int64(s[i]-'0')
	}
	return n
}

// vttText is a WebVTT cue's text as plain text: every tag removed ("<" up to ">" or the end,
// as the WebVTT cue text tokenizer reads it), character references decoded, then plainText.
func vttText(s string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '<')
		if i < 0 {
			b.WriteString(s)
			break
		}
		b.WriteString(s[:i])
		j := strings.IndexByte(s[i:], '>')
		if j < 0 {
			break
		}
		s = s[i+j+1:]
	}
	return plainText(html.UnescapeString(b.String()))
}

// srtText is an SRT subtitle's text as plain text: HTML-like tags (<i>, </font>, <font
// color="…">) and ASS override blocks ({\an8}) removed, then plainText. A "<" that does not
// open a tag ("I <3 you") stays text. SRT has no character references: "&amp;" is shown as is.
func srtText(s string) string {
	var b strings.Builder
	// Once no '>' (or '}') is left, none is looked for again: a text of a million "<a" stays
	// linear.
	closers := map[byte]bool{'>': true, '}': true}
	skipTo := func(closer byte) bool {
		if closers[closer] {
			if j := strings.IndexByte(s, closer); j > 0 {
				s = s[j+1:]
				return true
			}
			closers[closer] = false
		}
		return false
	}
	for len(s) > 0 {
		switch {
		case s[0] == '<' && len(s) > 1 && (isASCIILetter(s[1]) || s[1] == '/'):
			if skipTo('>') {
				continue
			}
		case strings.HasPrefix(s, `{\`):
			if skipTo('}') {
				continue
			}
		}
		b.WriteByte(s[0])
		s = s[1:]
	}
	return plainText(b.String())
}

func isASCIILetter(c byte) bool { return 'a' <= c|0x20 && c|0x20 <= 'z' }

// plainText removes control characters (a tab becomes a space), trims every line and drops
// the lines left empty.
func plainText(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '\n':
			return r
		case r == '\t':
			return ' '
		case unicode.IsControl(r) || r == utf8.RuneError:
			return -1
		}
		return r
	}, s)
	var lines []string
	for line := range strings.SplitSeq(s, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			lines = append(lines, line)
		}
	}
	return strings.Join(lines, "\n")
}

// checkSimultaneous refuses cues (sorted by start) of which more than MaxSimultaneousCues are
// shown at one moment. A cue ending exactly when another starts does not overlap it.
func checkSimultaneous(cues []Cue) error {
	ends := make([]time.Duration, len(cues))
	for i, c := range cues {
		ends[i] = c.End
	}
	slices.Sort(ends)
	ended := 0
	for i, c := range cues {
		for ended < len(ends) && ends[ended] <= c.Start {
			ended++
		}
		if i+1-ended > MaxSimultaneousCues {
			return apperr.Errorf(apperr.Unprocessable, "line %d: more than %d cues are shown at once at %s", c.line, MaxSimultaneousCues, Timestamp(c.Start))
		}
	}
	return nil
}

// Timestamp writes d as a WebVTT timestamp with hours: "01:02:03.004".
func Timestamp(d time.Duration) string {
	ms := d.Milliseconds()
	return fmt.Sprintf("%02d:%02d:%02d.%03d", ms/3_600_000, ms/60_000%60, ms/1000%60, ms%1000)
}
