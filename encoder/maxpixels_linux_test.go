package encoder_test

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/playhead/playhead/encoder"
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

	peak := childPeakRSS(t, "TestEncoder_FramesThatGrowAreNotDecoded", growInputEnv, grow)
	const limit = 400 << 20
	if peak > limit {
		t.Fatalf("the encode peaked at %d MiB of resident memory (limit %d MiB): frames over -max_pixels were decoded", peak>>20, limit>>20)
	}
	t.Logf("peak resident memory of the encode: %d MiB", peak>>20)
}

// childPeakRSS runs the test named test again in a child process with env set to value, and
// returns the child's peak resident memory in bytes. A reaped child's maximum resident set
// covers its own reaped children (prlimit, which becomes ffmpeg or ffprobe).
func childPeakRSS(t *testing.T, test, env, value string) int64 {
	t.Helper()
	child := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	child.Env = append(os.Environ(), env+"="+value)
	if out, err := child.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	return child.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
}

// probeInputEnv names the input the child process of TestEncoder_ProbeDoesNotDecodeHugeFrames
// probes.
const probeInputEnv = "PLAYHEAD_TEST_PROBE_INPUT"

// TestEncoder_ProbeDoesNotDecodeHugeFrames: ffprobe decodes a frame to learn a stream's size,
// before any limit can be checked. Without -max_pixels a member's 750 KB 16000×16000 PNG in
// Matroska takes it to 801 MB resident, a 16-bit one to 1.6 GB; the probe passes -max_pixels
// as the encode does, so the frame is refused in the decoder, and the stream, whose size is then
// unknown, is refused as over the limit. The probe runs in a child process so that its peak
// memory, ffprobe's included, can be read.
//
// The fixtures are one black frame each, gzipped (a few KB; ffmpeg takes a minute to make
// them on a busy machine):
//
//	ffmpeg -f lavfi -i color=c=black:s=16000x16000:d=1 -frames:v 1 -c:v png -pix_fmt rgb24 x.mkv
//	ffmpeg -f lavfi -i color=c=black:s=8000x8000:d=1 -frames:v 1 -c:v png -compression_level 1 -pix_fmt rgb48be x.mkv
func TestEncoder_ProbeDoesNotDecodeHugeFrames(t *testing.T) {
	if input := os.Getenv(probeInputEnv); input != "" {
		_, _ = newEncoder(t).Probe(context.Background(), input)
		return
	}
	t.Parallel()
	for _, tc := range []struct {
		fixture, size string
		decoded       int64 // bytes of the decoded frame
	}{
		{"png-16000x16000-rgb24.mkv.gz", "16000×16000", 16000 * 16000 * 3},
		{"png-8000x8000-rgb48be.mkv.gz", "8000×8000", 8000 * 8000 * 6},
	} {
		huge := gunzip(t, filepath.Join("testdata", "hugeframe", tc.fixture))
		_, err := newEncoder(t).Probe(context.Background(), huge)
		if !errors.Is(err, encoder.ErrOverLimit) || !strings.Contains(err.Error(), tc.size) {
			t.Errorf("%s: Probe = %v, want the %s frame refused as over the limit", tc.fixture, err, tc.size)
		}
		peak := childPeakRSS(t, "TestEncoder_ProbeDoesNotDecodeHugeFrames", probeInputEnv, huge)
		// Half the decoded frame: the probe without -max_pixels peaked at 801 and 427 MB.
		if limit := tc.decoded / 2; peak > limit {
			t.Errorf("%s: the probe peaked at %d MiB of resident memory (limit %d MiB): the frame was decoded", tc.fixture, peak>>20, limit>>20)
		}
		t.Logf("%s: peak resident memory of the probe: %d MiB", tc.fixture, peak>>20)
	}
}

// gunzip writes the gzipped file path uncompressed into a temporary directory.
func gunzip(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(path), ".gz"))
	w, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(w, zr); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}
