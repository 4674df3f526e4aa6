// Package playback is the continue-watching API: players report positions, which are
// validated against the media cache, buffered, coalesced and written to PostgreSQL in one
// bulk statement per batch (write-behind); and the reads that resume and list them.
package playback

import (
	"bytes"
	"cmp"
	"encoding/json"
	"math"
	"strconv"
	"time"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/quality"
)

// Key identifies one playback row.
type Key struct {
	Member, Media int64
}

// CompareKeys orders keys by member, then media: the order every flush takes row locks in.
func CompareKeys(a, b Key) int {
	return cmp.Or(cmp.Compare(a.Member, b.Member), cmp.Compare(a.Media, b.Media))
}

// Position is one reported playhead position.
type Position struct {
	PositionMS int32
	// EventTime is when the server received the report, truncated to PostgreSQL's microsecond
	// precision so a buffered value compares exactly like its stored copy.
	EventTime time.Time
}

// Newer reports whether a was reported after b.
func Newer(a, b Position) bool { return a.EventTime.After(b.EventTime) }

// MaxPositionMS bounds positions of media whose duration is unknown: 24 hours.
const MaxPositionMS = 24 * 60 * 60 * 1000

// MaxBodyBytes bounds a position report's body. A real one is about 25 bytes.
const MaxBodyBytes = 1024

// ParseReport reads a PUT body {"position_ms": <int>, "quality": {…}}, the quality optional
// (quality.Parse). Malformed JSON is apperr.Invalid; a missing, non-integer or negative
// position, or a quality field of the wrong type or out of bounds, is apperr.Unprocessable,
// and nothing of the report is kept. The position's upper bound depends on the media and is
// checked by CheckRange.
func ParseReport(body []byte) (int64, quality.Report, error) {
	if len(body) > MaxBodyBytes {
		return 0, quality.Report{}, apperr.Errorf(apperr.TooLarge, "body over %d bytes", MaxBodyBytes)
	}
	if pos, ok := parsePlainPosition(body); ok {
		return pos, quality.Report{}, nil
	}
	return parseReportJSON(body)
}

// parseReportJSON is ParseReport through encoding/json: every body the plain reader does not
// take (a report with quality, and every error) goes through it.
func parseReportJSON(body []byte) (int64, quality.Report, error) {
	var req struct {
		PositionMS json.RawMessage `json:"position_ms"`
		Quality    json.RawMessage `json:"quality"`
	}
	// Unmarshal, not a Decoder: it also refuses trailing data, and allocates less on the
	// hottest path of the service.
	if err := json.Unmarshal(body, &req); err != nil {
		return 0, quality.Report{}, apperr.Errorf(apperr.Invalid, "malformed JSON body: %v", err)
	}
	raw := req.PositionMS
	if len(raw) == 0 || string(raw) == "null" {
		return 0, quality.Report{}, apperr.Errorf(apperr.Unprocessable, "position_ms is required")
	}
	pos, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return 0, quality.Report{}, apperr.Errorf(apperr.Unprocessable, "position_ms must be an integer number of milliseconds")
	}
	if pos < 0 {
		return 0, quality.Report{}, apperr.Errorf(apperr.Unprocessable, "position_ms must not be negative")
	}
	q, err := quality.Parse(req.Quality)
	if err != nil {
		return 0, quality.Report{}, err
	}
	return pos, q, nil
}

// parsePlainPosition reads the body every player sends, {"position_ms": N} with N a JSON
// integer of up to 18 digits (no sign, no leading zero) and JSON whitespace anywhere between
// the tokens, without encoding/json's reflection (a sixth of the PUT handler's CPU). Any other
// body, valid or not, is left to parseReportJSON (ok false), so both give the same answer
// for every body (FuzzParsePositionPlainAgrees).
func parsePlainPosition(body []byte) (pos int64, ok bool) {
	rest, ok := bytes.CutPrefix(trimJSONSpace(body), []byte("{"))
	if !ok {
		return 0, false
	}
	if rest, ok = bytes.CutPrefix(trimJSONSpace(rest), []byte(`"position_ms"`)); !ok {
		return 0, false
	}
	if rest, ok = bytes.CutPrefix(trimJSONSpace(rest), []byte(":")); !ok {
		return 0, false
	}
	rest = trimJSONSpace(rest)
	digits := 0
	for digits < len(rest) && rest[digits] >= '0' && rest[digits] <= '9' {
		digits++
	}
	if digits == 0 || digits > 18 || (rest[0] == '0' && digits > 1) {
		return 0, false // none, might overflow, or not JSON
	}
	for _, d := range rest[:digits] {
		pos = pos*10 + int64(d-'0')
	}
	if string(trimJSONSpace(rest[digits:])) != "}" {
		return 0, false
	}
	return pos, true
}

// trimJSONSpace drops the whitespace JSON allows around tokens from both ends of b.
func trimJSONSpace(b []byte) []byte {
	return bytes.Trim(b, " \t\r\n")
}

// CheckRange checks pos against the media's duration (0 when unknown, then MaxPositionMS).
func CheckRange(pos, durationMS int64) (int32, error) {
	limit := int64(MaxPositionMS)
	if durationMS > 0 {
		limit = min(durationMS, math.MaxInt32)
	}
	if pos > limit {
		return 0, apperr.Errorf(apperr.Unprocessable, "position_ms %d is past the end of the media (%d ms)", pos, limit)
	}
	return int32(pos), nil
}
