package encoder_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// growInputEnv names the input the child process of TestEncoder_FramesThatGrowAreNotDecoded
// encodes.
const growInputEnv = "PLAYHEAD_TEST_GROW_INPUT"

// TestEncoder_FramesThatGrowAreNotDecoded: the probe sees a stream's first frames, so a file
// whose frames start at 160×120 and become 8000×8000 passes the limits checked after probing.
// ffmpeg's -max_pixels refuses the big frames in the decoder instead of allocating them
// (96 MB each, several held at once): the encode runs in a child process, and the child's
// peak resident memory, ffmpeg's included, stays far below what decoding three of them takes
// (ffmpeg alone: 530 MB without -max_pixels, 136 MB with it, on this machine).
func TestEncoder_FramesThatGrowAreNotDecoded(t *testing.T) {
	if input := os.Getenv(growInputEnv); input != "" {
		// The child: one encode, whose outcome does not matter (dropping the big frames may
		// leave a short video or none); its memory does.
		_, _ = newEncoder(t).Encode(context.Background(), input, filepath.Join(t.TempDir(), "out"))
		return
	}
	t.Parallel()
	dir := t.TempDir()
	small, big := filepath.Join(dir, "small.ts"), filepath.Join(dir, "big.ts")
	ffmpeg(t, "-f", "lavfi", "-i", "testsrc2=size=160x120:rate=5", "-t", "2", "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", "-f", "mpegts", small)
	ffmpeg(t, "-f", "lavfi", "-i", "color=c=black:s=8000x8000:r=5", "-t", "0.6", "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", "-f", "mpegts", big)
	grow := filepath.Join(dir, "grow.ts")
	var joined []byte
	for _, part := range []string{small, big} {
		b, err := os.ReadFile(part)
		if err != nil {
			t.Fatal(err)
		}
		joined = append(joined, b...)
	}
	if err := os.WriteFile(grow, joined, 0o644); err != nil {
		t.Fatal(err)
	}
	e := newEncoder(t)
	p, err := e.Probe(context.Background(), grow)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.CheckLimits(p); err != nil {
		t.Fatalf("the fixture must pass the limits checked after probing (its first frames are small): %v", err)
	}

	child := exec.Command(os.Args[0], "-test.run=^TestEncoder_FramesThatGrowAreNotDecoded$", "-test.count=1")
	child.Env = append(os.Environ(), growInputEnv+"="+grow)
	if out, err := child.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	// A reaped child's maximum resident set covers its own reaped children (prlimit, which
	// becomes ffmpeg).
	peak := child.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
	const limit = 400 << 20
	if peak > limit {
		t.Fatalf("the encode peaked at %d MiB of resident memory (limit %d MiB): frames over -max_pixels were decoded", peak>>20, limit>>20)
	}
	t.Logf("peak resident memory of the encode: %d MiB", peak>>20)
}
