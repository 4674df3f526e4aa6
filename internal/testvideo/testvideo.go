// Package testvideo generates small test videos with ffmpeg's lavfi sources, so tests use
// real media without shipping binary fixtures.
package testvideo

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
)

// Spec describes a generated video.
type Spec struct {
	Seconds       int
	Width, Height int
	Audio         bool
}

// MP4 writes an H.264 MP4 of spec into dir and returns its path. It fails the test when
// ffmpeg is missing, with the command to install it.
func MP4(t testing.TB, dir string, spec Spec) string {
	t.Helper()
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Fatalf("ffmpeg is required (apt-get install ffmpeg): %v", err)
	}
	out := filepath.Join(dir, fmt.Sprintf("test-%dx%d-%ds.mp4", spec.Width, spec.Height, spec.Seconds))
	args := []string{"-nostdin", "-v", "error", "-y",
		"-f", "lavfi", "-i", fmt.Sprintf("testsrc2=size=%dx%d:rate=25", spec.Width, spec.Height)}
	if spec.Audio {
		args = append(args, "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=44100")
	}
	args = append(args, "-t", fmt.Sprint(spec.Seconds), "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p")
	if spec.Audio {
		args = append(args, "-c:a", "aac", "-shortest")
	}
	args = append(args, out)
	if b, err := exec.Command("ffmpeg", args...).CombinedOutput(); err != nil {
		t.Fatalf("generate test video: %v: %s", err, b)
	}
	return out
}
