package encoder

import "testing"

// TestPlanStoryboard: one frame a second up to storyboardMaxFrames seconds, then an interval
// that keeps a video at or under storyboardMaxFrames frames (five sprites), as the storyboard's
// doc comment promises: a four-hour lecture costs 497 frames, not 14 400. The encode tests use
// short clips only, so nothing else holds the bound.
func TestPlanStoryboard(t *testing.T) {
	for _, tc := range []struct {
		durationMS int64
		interval   int
	}{
		{0, 1}, {1, 1}, {3_000, 1}, {500_000, 1}, {500_001, 2}, {1_000_000, 2}, {1_000_001, 3},
		{3_600_000, 8}, {4 * 3_600_000, 29}, {4*3_600_000 + 1, 29},
	} {
		b := planStoryboard(Probe{DurationMS: tc.durationMS})
		frames := (tc.durationMS + int64(b.interval)*1000 - 1) / (int64(b.interval) * 1000)
		if b.interval != tc.interval || frames > storyboardMaxFrames {
			t.Errorf("%d ms: a frame every %d s (%d frames), want every %d s", tc.durationMS, b.interval, frames, tc.interval)
		}
	}
}
