package hls

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// QuoteError is CheckQuoted's answer for a value a playlist cannot hold: the first character
// of Value that cannot stand in a quoted string or a URI line, at byte Offset.
type QuoteError struct {
	// Attribute is the attribute's name (QuotedAttribute); empty for a bare value.
	Attribute string
	Value     string
	// Offset is the byte offset of the character in Value; 0 for an empty Value.
	Offset int
	// Char names what was found: "nothing" (an empty Value), "invalid UTF-8", `'"'`, or the
	// character ("U+2028 (a line separator)", "control character U+000A").
	Char string
}

// Error names the value (quoted in Go syntax, so that a log line cannot be broken by it
// either), what was found and where.
func (e *QuoteError) Error() string {
	attribute := ""
	if e.Attribute != "" {
		attribute = e.Attribute + " "
	}
	return fmt.Sprintf("hls: %s%.200q cannot be written in a playlist: %s at byte %d", attribute, e.Value, e.Char, e.Offset)
}

// CheckQuoted returns nil when s can be written as the value of a quoted-string attribute of a
// playlist tag (RFC 8216 4.2: between double quotes, with no escapes), and read back by any
// client as exactly s on one line; otherwise a *QuoteError naming the first character that
// cannot. It is the one check every writer of this package (QuotedAttribute, CheckURILine)
// and every place that writes or rewrites a quoted attribute of a playlist served (media's
// signing, its caption tracks) puts each value through.
//
// s must be non-empty valid UTF-8 and hold none of:
//   - '"', which ends the quoted string;
//   - the C0 controls (CR, LF, and VT and FF, which Unicode counts as line breaks), DEL, and
//     the C1 controls (NEL U+0085 among them): RFC 8216 allows only CR and LF of them, which
//     end the line;
//   - U+2028 LINE SEPARATOR and U+2029 PARAGRAPH SEPARATOR: JavaScript's regular expressions
//     end a line there, so hls.js reads what follows one as a tag of its own (a label holding
//     "\u2028#EXT-X-MEDIA:…" would add a subtitle track).
//
// Refusing rather than escaping: a quoted string has no escape, so any replacement would write
// another value than the one given; the callers decide what to do instead (refuse the input,
// or leave the track out).
func CheckQuoted(s string) error {
	if e := quoteError(s); e != nil {
		return e
	}
	return nil
}

// quoteError is CheckQuoted's check, nil when s can be written.
func quoteError(s string) *QuoteError {
	if s == "" {
		return &QuoteError{Value: s, Char: "nothing"}
	}
	for i, r := range s {
		var char string
		switch {
		case r == utf8.RuneError && !validAt(s, i):
			char = "invalid UTF-8"
		case r == '"':
			char = `'"'`
		case r < 0x20 || r >= 0x7f && r <= 0x9f:
			char = fmt.Sprintf("control character U+%04X", r)
		case r == '\u2028':
			char = "U+2028 (a line separator)"
		case r == '\u2029':
			char = "U+2029 (a paragraph separator)"
		default:
			continue
		}
		return &QuoteError{Value: s, Offset: i, Char: char}
	}
	return nil
}

// CheckURILine returns nil when s can be written as a URI line of a playlist (a variant's, a
// segment's): what CheckQuoted takes, not starting with '#' (a comment or a tag), nor starting
// or ending with white space, which readers trim (JavaScript's String.prototype.trim, U+FEFF
// included).
func CheckURILine(s string) error {
	if err := CheckQuoted(s); err != nil {
		return err
	}
	if s[0] == '#' || strings.TrimFunc(s, trimmed) != s {
		return fmt.Errorf("hls: %.200q cannot be written as a URI line: it starts with '#', or starts or ends with white space", s)
	}
	return nil
}

// trimmed reports whether readers trim r from the ends of a line.
func trimmed(r rune) bool { return unicode.IsSpace(r) || r == '\ufeff' }

// validAt reports whether the U+FFFD decoded at s[i:] is written in s, rather than standing for
// a byte that is not UTF-8.
func validAt(s string, i int) bool {
	_, size := utf8.DecodeRuneInString(s[i:])
	return size == 3
}

// QuotedAttribute returns the attribute name="value" for a tag's attribute list, or
// CheckQuoted's error when value cannot be written. name is an attribute name of RFC 8216 4.2
// (A-Z, 0-9 and '-').
func QuotedAttribute(name, value string) (string, error) {
	if name == "" || strings.ContainsFunc(name, func(r rune) bool { return (r < 'A' || r > 'Z') && (r < '0' || r > '9') && r != '-' }) {
		return "", fmt.Errorf("hls: %q is not an attribute name", name)
	}
	if e := quoteError(value); e != nil {
		e.Attribute = name
		return "", e
	}
	return name + `="` + value + `"`, nil
}
