package media

import (
	"fmt"
	"time"
)

// Completion decides when a position counts a media as watched. The database computes the
// same point with playhead_completion_point (migrations/00007_progress.sql, in double
// precision since 00022_flush_functions.sql), to which the flush statement and the reads
// pass Ratio and TailMS as parameters; Point is its Go twin, and State the resume rule's
// (playhead_progress).
type Completion struct {
	// Ratio of the duration from which a media is watched (PLAYHEAD_COMPLETION_RATIO).
	// Default 0.95.
	Ratio float64
	// Tail is the stretch before the end from which a media is watched
	// (PLAYHEAD_COMPLETION_TAIL). Default 30 s.
	Tail time.Duration
	// MinRatio is the share of the duration below which a position keeps no resume point
	// (PLAYHEAD_RESUME_MIN_RATIO), unless Min comes first. Default 0.05.
	MinRatio float64
	// Min is the position from which a media resumes whatever its duration
	// (PLAYHEAD_RESUME_MIN), if that comes before MinRatio. Default 60 s.
	Min time.Duration
	// MinDuration is the shortest media that keeps a resume point
	// (PLAYHEAD_RESUME_MIN_DURATION). Default 2 min.
	MinDuration time.Duration
}

// DefaultCompletion is finished at 95 % of the duration or the last 30 s, whichever comes
// first, and resumable from 5 % of the duration or 1 min, whichever comes first, for media of
// 2 min or more. Jellyfin's defaults are 90 %, 5 % and 5 min, for films; Playhead's media are
// mostly lessons, often of a few minutes: a 3-minute lesson stopped at 1:30 is worth resuming,
// a 90-second clip is quicker to restart than to find one's place in. The 1-minute cap keeps
// a film stopped after 4 minutes (under 5 % of 2 h) in the list.
var DefaultCompletion = Completion{Ratio: 0.95, Tail: 30 * time.Second,
	MinRatio: 0.05, Min: time.Minute, MinDuration: 2 * time.Minute}

// Validate reports a ratio outside [0.5, 1] or a negative tail. Below one half the rule's
// floor (never before the middle) would override the ratio anyway.
func (c Completion) Validate() error {
	if c.Ratio < 0.5 || c.Ratio > 1 {
		return fmt.Errorf("completion ratio %v is not from 0.5 to 1", c.Ratio)
	}
	if c.Tail < 0 {
		return fmt.Errorf("completion tail %v is negative", c.Tail)
	}
	// Above 0.5 the resume minimum could pass the completion point's floor (the middle).
	if c.MinRatio < 0 || c.MinRatio > 0.5 {
		return fmt.Errorf("resume minimum ratio %v is not from 0 to 0.5", c.MinRatio)
	}
	if c.Min < 0 || c.MinDuration < 0 {
		return fmt.Errorf("resume minimum %v or minimum duration %v is negative", c.Min, c.MinDuration)
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

// Progress is where a position leaves a member in a media: the SQL function
// playhead_progress (migrations/00031_resume_thresholds.sql) computes the same from the same
// inputs: the flush stores whether it is Finished (playback.finished and watched_at, which up
// next, course progress and the audience rollup read), and the continue-watching list and
// course progress compute it for the rows they read.
type Progress int16

// The values of Progress, as playhead_progress returns them.
const (
	// NotStarted keeps no resume point: the position is below the resume minimum, or the
	// media is shorter than MinDuration. The media is not listed and plays from the start.
	NotStarted Progress = 0
	// InProgress is listed in continue watching and resumes at the position.
	InProgress Progress = 1
	// Finished counts the media watched: the position is at or past the completion point or
	// the start of the credits.
	Finished Progress = 2
)

// Args are the thresholds in the order playhead_progress takes them after the position, the
// duration and the credits' start: the ratio, the tail, the minimum ratio, the minimum and
// the shortest resumable duration, these three in ms.
func (c Completion) Args() []any {
	return []any{c.Ratio, c.TailMS(), c.MinRatio, c.Min.Milliseconds(), c.MinDuration.Milliseconds()}
}

// ResumeMinMS returns the position (ms) from which a media of durationMS keeps a resume
// point: MinRatio of the duration or Min, whichever comes first, and never 0 (a position of
// 0, the open's, is never one). For an unknown duration (0) it is Min.
func (c Completion) ResumeMinMS(durationMS int64) float64 {
	m := float64(c.Min.Milliseconds())
	if durationMS > 0 {
		m = min(m, float64(durationMS)*c.MinRatio)
	}
	return max(m, 1)
}

// State returns the Progress of positionMS in a media of durationMS whose credits start at
// creditsStartMS (0: no credits marked). Past the completion point or in the credits is
// Finished whatever the duration; else a media shorter than MinDuration keeps no resume point,
// and a longer one (or one of unknown duration) keeps one from ResumeMinMS.
func (c Completion) State(positionMS, durationMS, creditsStartMS int64) Progress {
	pos := float64(positionMS)
	if p, ok := c.Point(durationMS); ok && (pos >= p || creditsStartMS > 0 && positionMS >= creditsStartMS) {
		return Finished
	}
	if durationMS > 0 && durationMS < c.MinDuration.Milliseconds() || pos < c.ResumeMinMS(durationMS) {
		return NotStarted
	}
	return InProgress
}
