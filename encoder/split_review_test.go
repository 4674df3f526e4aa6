package encoder_test

import (
	"reflect"
	"testing"

	"github.com/playhead/playhead/encoder"
)

// SplitLadder on the ladders real sources get (PlanLadder of a source below 240p, 240p, 360p,
// 480p, 720p, 1080p) with the default 2 runs, 3, a run per rung and more, and runs below 2: the
// lowest rung alone first, the others heaviest run first, every rung once, rungs in ladder
// order (highest first) within a run.
func TestSplitLadderReview_TheLaddersOfRealSources(t *testing.T) {
	for _, tc := range []struct {
		height int
		runs   int
		want   [][]int
	}{
		{180, 2, [][]int{{0}}}, // one rung at the source's own height: alone, with the audio
		{180, 5, [][]int{{0}}},
		{240, 2, [][]int{{0}}},
		{241, 2, [][]int{{0}}},
		{360, 2, [][]int{{1}, {0}}},
		{360, 5, [][]int{{1}, {0}}},
		{480, 2, [][]int{{2}, {0, 1}}},
		{480, 3, [][]int{{2}, {0}, {1}}},
		{480, 9, [][]int{{2}, {0}, {1}}},
		{720, 2, [][]int{{3}, {0, 1, 2}}},
		{720, 3, [][]int{{3}, {0}, {1, 2}}},
		{720, 4, [][]int{{3}, {0}, {1}, {2}}},
		{720, 5, [][]int{{3}, {0}, {1}, {2}}},
		{1080, 2, [][]int{{4}, {0, 1, 2, 3}}},
		{1080, 1, [][]int{{4}, {0, 1, 2, 3}}},
		{1080, -3, [][]int{{4}, {0, 1, 2, 3}}},
		{2160, 2, [][]int{{4}, {0, 1, 2, 3}}},
	} {
		ladder := encoder.PlanLadder(tc.height)
		if got := encoder.SplitLadder(ladder, tc.runs); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("SplitLadder(PlanLadder(%d) = %d rungs, %d) = %v, want %v", tc.height, len(ladder), tc.runs, got, tc.want)
		}
	}
	// The one-rung ladder of a tiny source is at its own even height: the split names that rung.
	if ladder := encoder.PlanLadder(181); len(ladder) != 1 || ladder[0].Height != 180 {
		t.Errorf("PlanLadder(181) = %v, want one rung of 180p", ladder)
	}
}
