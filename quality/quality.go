// Package quality is the playback quality players may send with their position reports: time
// to first frame, rebuffering, the rendition played and a fatal error's code. A report's
// fields are validated here (Parse), added up per media in each API node's memory
// (Aggregator) and written, one statement per flush period, into media_quality's counters;
// the audience rollup turns those into a media's startup time p50/p95, rebuffering ratio,
// error rate and renditions watched. Nothing of it is kept per member: the counters are per
// media, and the position row is unchanged whether or not its report carried quality.
package quality

import (
	"encoding/json"
	"strconv"

	"github.com/playhead/playhead/apperr"
)

// The bounds of the fields. An interval is 5 s of playing, but a report kept through an
// offline period or a stall covers more, so the times are bounded at 10 minutes.
const (
	// MaxStartupMS bounds startup_ms: a session that takes longer has failed.
	MaxStartupMS = 600_000
	// MaxIntervalMS bounds played_ms and rebuffer_ms.
	MaxIntervalMS = 600_000
	// MaxRebufferCount bounds rebuffer_count in one interval.
	MaxRebufferCount = 1000
	// MaxHeight bounds rendition_height: 8K is 4320 lines, twice that is no video.
	MaxHeight = 8640
)

// ErrorCodes are the fatal error codes a report may carry, in the order of their bucket
// (from 1) in media_quality: the four codes of the HTML MediaError (MEDIA_ERR_ABORTED … 4)
// and "other" for a player's own fatal error that maps to none of them.
var ErrorCodes = []string{"aborted", "network", "decode", "src_not_supported", "other"}

// Report is the quality one position report carries; each field counts only when its Has bit
// is set (the player sent it).
type Report struct {
	// StartupMS is the session's time to first frame (sent once, in the session's first report
	// after it, or with the fatal error that ended the session before it).
	StartupMS int32
	// PlayedMS is the time played since the previous report, in the rendition of Height.
	PlayedMS int32
	// RebufferCount and RebufferMS are the stalls since the previous report and their time.
	RebufferCount int32
	RebufferMS    int32
	// Height is the rendition played in the interval (the video's height in lines).
	Height int32
	// Error is a fatal error's bucket: its index in ErrorCodes plus one.
	Error int32
	// Has says which fields were sent.
	Has Fields
}

// Fields is a set of Report's fields.
type Fields uint8

// The fields of a Report.
const (
	HasStartup Fields = 1 << iota
	HasPlayed
	HasRebufferCount
	HasRebufferMS
	HasHeight
	HasError
)

// Empty reports whether r carries nothing.
func (r Report) Empty() bool { return r.Has == 0 }

// Parse reads the "quality" member of a position report: an object of optional fields, each a
// bounded JSON integer (or, for error, one of ErrorCodes). Absent or null is an empty Report;
// a wrong type or a value out of bounds is apperr.Unprocessable naming the field. Unknown
// fields are ignored, so a newer player's report still stores its position on this server.
func Parse(raw json.RawMessage) (Report, error) {
	var r Report
	if len(raw) == 0 || string(raw) == "null" {
		return r, nil
	}
	var w struct {
		StartupMS     json.RawMessage `json:"startup_ms"`
		PlayedMS      json.RawMessage `json:"played_ms"`
		RebufferCount json.RawMessage `json:"rebuffer_count"`
		RebufferMS    json.RawMessage `json:"rebuffer_ms"`
		Height        json.RawMessage `json:"rendition_height"`
		Error         json.RawMessage `json:"error"`
	}
	if raw[0] != '{' {
		return r, apperr.Errorf(apperr.Unprocessable, "quality must be an object")
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		return r, apperr.Errorf(apperr.Unprocessable, "quality: %v", err)
	}
	ints := []struct {
		name     string
		raw      json.RawMessage
		min, max int64
		to       *int32
		bit      Fields
	}{
		{"startup_ms", w.StartupMS, 0, MaxStartupMS, &r.StartupMS, HasStartup},
		{"played_ms", w.PlayedMS, 0, MaxIntervalMS, &r.PlayedMS, HasPlayed},
		{"rebuffer_count", w.RebufferCount, 0, MaxRebufferCount, &r.RebufferCount, HasRebufferCount},
		{"rebuffer_ms", w.RebufferMS, 0, MaxIntervalMS, &r.RebufferMS, HasRebufferMS},
		{"rendition_height", w.Height, 1, MaxHeight, &r.Height, HasHeight},
	}
	for _, f := range ints {
		if len(f.raw) == 0 || string(f.raw) == "null" {
			continue
		}
		n, err := strconv.ParseInt(string(f.raw), 10, 64)
		if err != nil || n < f.min || n > f.max {
			return Report{}, apperr.Errorf(apperr.Unprocessable, "quality.%s must be an integer from %d to %d", f.name, f.min, f.max)
		}
		*f.to, r.Has = int32(n), r.Has|f.bit
	}
	if len(w.Error) > 0 && string(w.Error) != "null" {
		var code string
		if err := json.Unmarshal(w.Error, &code); err != nil {
			return Report{}, apperr.Errorf(apperr.Unprocessable, "quality.error must be a string")
		}
		i := errorIndex(code)
		if i < 0 {
			return Report{}, apperr.Errorf(apperr.Unprocessable, "quality.error must be one of %v", ErrorCodes)
		}
		r.Error, r.Has = int32(i+1), r.Has|HasError
	}
	return r, nil
}

func errorIndex(code string) int {
	for i, c := range ErrorCodes {
		if c == code {
			return i
		}
	}
	return -1
}
