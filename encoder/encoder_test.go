package encoder_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/playhead/playhead/encoder"
	"github.com/playhead/playhead/internal/testvideo"
)

func newEncoder(t *testing.T) *encoder.Encoder {
	t.Helper()
	e, err := encoder.New(encoder.Config{Preset: "ultrafast", SegmentSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestEncoder_Encode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		spec      testvideo.Spec
		wantRungs []int
	}{
		{"WithAudio480", testvideo.Spec{Seconds: 3, Width: 640, Height: 480, Audio: true}, []int{480, 360, 240}},
		{"SilentTiny", testvideo.Spec{Seconds: 2, Width: 160, Height: 120}, []int{120}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			input := testvideo.MP4(t, dir, tc.spec)
			out := filepath.Join(dir, "out")
			res, err := newEncoder(t).Encode(context.Background(), input, out)
			if err != nil {
				t.Fatal(err)
			}
			var heights []int
			for _, r := range res.Renditions {
				heights = append(heights, r.Height)
			}
			if len(heights) != len(tc.wantRungs) {
				t.Fatalf("renditions %v, want %v", heights, tc.wantRungs)
			}
			for i := range heights {
				if heights[i] != tc.wantRungs[i] {
					t.Fatalf("renditions %v, want %v", heights, tc.wantRungs)
				}
			}
			if res.Probe.DurationMS < int64(tc.spec.Seconds)*1000-100 || res.Probe.HasAudio != tc.spec.Audio {
				t.Fatalf("probe = %+v", res.Probe)
			}
			master, err := os.ReadFile(filepath.Join(out, res.Master))
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Count(string(master), "#EXT-X-STREAM-INF"); got != len(tc.wantRungs) {
				t.Fatalf("master lists %d variants, want %d:\n%s", got, len(tc.wantRungs), master)
			}
			// ffprobe must be able to read the master playlist end to end.
			cmd := exec.Command("ffprobe", "-v", "error", "-show_entries", "stream=height", "-of", "csv=p=0", filepath.Join(out, res.Master))
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("ffprobe master: %v: %s", err, b)
			}
			if _, err := os.Stat(filepath.Join(out, res.Thumbnail)); err != nil {
				t.Fatalf("thumbnail: %v", err)
			}
		})
	}
}

func TestEncoder_NotVideo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	junk := filepath.Join(dir, "notes.mp4")
	if err := os.WriteFile(junk, []byte("this is not a video, just text pretending"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := newEncoder(t).Encode(context.Background(), junk, filepath.Join(dir, "out"))
	if !errors.Is(err, encoder.ErrNotVideo) {
		t.Fatalf("Encode(text) = %v, want ErrNotVideo", err)
	}
}

// PlanLadder never upscales, and never leaves an input without a rendition: every rung at
// or below the input's height, or one rendition at the input's own even height when it is
// below the lowest rung. (An empty ladder also "never upscales".)
func TestPlanLadder_NeverUpscales(t *testing.T) {
	for h := 2; h <= 2200; h += 7 {
		ladder := encoder.PlanLadder(h)
		var want []int
		for _, r := range encoder.Ladder {
			if r.Height <= h {
				want = append(want, r.Height)
			}
		}
		if len(want) == 0 {
			want = []int{h &^ 1}
		}
		got := make([]int, len(ladder))
		for i, r := range ladder {
			got[i] = r.Height
			if r.Height > h {
				t.Fatalf("PlanLadder(%d) has a %dp rendition", h, r.Height)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("PlanLadder(%d) heights = %v, want %v", h, got, want)
		}
	}
}

// SplitLadder puts the lowest rung alone in the first run, every other rung in exactly one
// of the later runs, never more runs than asked (at least 2) or than rungs, the heaviest
// runs first; and the table's splits are the ones docs/operations/encoding.md documents.
func TestSplitLadder(t *testing.T) {
	full := encoder.Ladder // 1080, 720, 480, 360, 240
	for _, tc := range []struct {
		ladder []encoder.Rendition
		runs   int
		want   [][]int
	}{
		{full, 2, [][]int{{4}, {0, 1, 2, 3}}},
		{full, 3, [][]int{{4}, {0}, {1, 2, 3}}},
		{full, 4, [][]int{{4}, {0}, {1}, {2, 3}}},
		{full, 5, [][]int{{4}, {0}, {1}, {2}, {3}}},
		{full, 9, [][]int{{4}, {0}, {1}, {2}, {3}}},
		{full, 0, [][]int{{4}, {0, 1, 2, 3}}},
		{encoder.PlanLadder(480), 2, [][]int{{2}, {0, 1}}},
		{encoder.PlanLadder(100), 5, [][]int{{0}}},
		{nil, 2, nil},
	} {
		if got := encoder.SplitLadder(tc.ladder, tc.runs); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("SplitLadder(%d rungs, %d) = %v, want %v", len(tc.ladder), tc.runs, got, tc.want)
		}
	}
	for h := 2; h <= 2200; h += 97 {
		ladder := encoder.PlanLadder(h)
		for runs := range 7 {
			split := encoder.SplitLadder(ladder, runs)
			seen := map[int]int{}
			pixels := make([]int, len(split))
			for k, run := range split {
				for _, rung := range run {
					seen[rung]++
					pixels[k] += ladder[rung].Height * ladder[rung].Height
				}
			}
			switch {
			case len(split[0]) != 1 || split[0][0] != len(ladder)-1:
				t.Fatalf("SplitLadder(%dp, %d) = %v: the lowest rung is not alone first", h, runs, split)
			case len(seen) != len(ladder) || len(split) > max(runs, 2) || len(split) > len(ladder):
				t.Fatalf("SplitLadder(%dp, %d) = %v: not every rung once in at most %d runs", h, runs, split, max(runs, 2))
			case !slices.IsSortedFunc(pixels[1:], func(a, b int) int { return b - a }):
				t.Fatalf("SplitLadder(%dp, %d) = %v: the later runs are not heaviest first (%v)", h, runs, split, pixels)
			}
			for rung, n := range seen {
				if n != 1 {
					t.Fatalf("SplitLadder(%dp, %d) = %v: rung %d in %d runs", h, runs, split, rung, n)
				}
			}
		}
	}
}
