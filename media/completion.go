package media

import (
	"fmt"
	"time"
)

// Completion decides when a position counts a media as watched. The database computes the
// same point with playhead_completion_point (migrations/00007_progress.sql, in double
// precision since 00022_flush_functions.sql), to which the flush statement and the reads
// pass Ratio and TailMS as parameters; Finished is its Go twin.
type Completion struct {
	// Ratio of the duration from which a media is watched (PLAYHEAD_COMPLETION_RATIO).
	// Default 0.95.
	Ratio float64
	// Tail is the stretch before the end from which a media is watched
	// (PLAYHEAD_COMPLETION_TAIL). Default 30 s.
	Tail time.Duration
}

// DefaultCompletion is 95 % of the duration or the last 30 s, whichever comes first.
var DefaultCompletion = Completion{Ratio: 0.95, Tail: 30 * time.Second}

// Validate reports a ratio outside [0.5, 1] or a negative tail. Below one half the rule's
// floor (never before the middle) would override the ratio anyway.
func (c Completion) Validate() error {
	if c.Ratio < 0.5 || c.Ratio > 1 {
		return fmt.Errorf("completion ratio %v is not from 0.5 to 1", c.Ratio)
	}
	if c.Tail < 0 {
		return fmt.Errorf("completion tail %v is negative", c.Tail)
	}
	return nil
}

// TailMS is Tail in milliseconds, the unit of positions.
func (c Completion) TailMS() int64 { return c.Tail.Milliseconds() }

// Point returns the position (ms) from which a media of durationMS is watched: Ratio of the
// duration or Tail before the end, whichever comes first, but never before the middle. It
// returns false for an unknown duration (0): such media are never watched by position.
func (c Completion) Point(durationMS int64) (float64, bool) {
	if durationMS <= 0 {
		return 0, false
	}
	d := float64(durationMS)
	return max(min(d*c.Ratio, d-float64(c.TailMS())), d/2), true
}

// Finished reports whether positionMS is at or past the completion point of a media of
// durationMS.
func (c Completion) Finished(positionMS, durationMS int64) bool {
	p, ok := c.Point(durationMS)
	return ok && float64(positionMS) >= p
}
