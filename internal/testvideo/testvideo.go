// Package testvideo generates small test videos with ffmpeg's lavfi sources, so tests use
// real media without shipping binary fixtures.
package testvideo

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Spec describes a generated video.
type Spec struct {
	Seconds       int
	Width, Height int
	// FPS is the frame rate. Default 25.
	FPS   int
	Audio bool
}

// MP4 writes an H.264 MP4 of spec into dir and returns its path. It fails the test when
// ffmpeg is missing, with the command to install it.
func MP4(t testing.TB, dir string, spec Spec) string {
	t.Helper()
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Fatalf("ffmpeg is required (apt-get install ffmpeg): %v", err)
	}
	fps := cmp.Or(spec.FPS, 25)
	out := filepath.Join(dir, fmt.Sprintf("test-%dx%d-%dfps-%ds.mp4", spec.Width, spec.Height, fps, spec.Seconds))
	args := []string{"-nostdin", "-v", "error", "-y",
		"-f", "lavfi", "-i", fmt.Sprintf("testsrc2=size=%dx%d:rate=%d", spec.Width, spec.Height, fps)}
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

// TimestampGap writes a 64×64 Matroska file into dir that declares itself declared long
// while its last frame's timestamp lies gap after the others, as a hostile muxer would write
// it: 49 frames at 25 fps, then one frame gap later, and the Segment's Duration element
// rewritten. The probe believes the declaration; a constant-frame-rate encode would fill the
// gap with duplicates.
func TimestampGap(t testing.TB, dir string, gap, declared time.Duration) string {
	t.Helper()
	out := filepath.Join(dir, "timestamp-gap.mkv")
	jump := int64(gap.Seconds() * 25)
	args := []string{"-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=64x64:rate=25", "-frames:v", "50",
		"-vf", fmt.Sprintf("setpts='if(lt(N,49),N,N+%d)'", jump), "-fps_mode", "passthrough",
		// No B-frames, so the decoder keeps the timestamps as written.
		"-c:v", "libx264", "-preset", "ultrafast", "-bf", "0", "-pix_fmt", "yuv420p", out}
	if b, err := exec.Command("ffmpeg", args...).CombinedOutput(); err != nil {
		t.Fatalf("generate the timestamp-gap video: %v: %s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	// Duration: ID 0x4489, an 8-byte float in milliseconds (the default timecode scale).
	element := []byte{0x44, 0x89, 0x88}
	i := bytes.Index(b, element)
	if i < 0 || bytes.Count(b, element) != 1 {
		t.Fatalf("%s: want exactly one 8-byte Duration element", out)
	}
	binary.BigEndian.PutUint64(b[i+len(element):], math.Float64bits(float64(declared.Milliseconds())))
	if err := os.WriteFile(out, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// PlaylistSeconds sums the #EXTINF durations of the HLS media playlist at path.
func PlaylistSeconds(t testing.TB, path string) float64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var total float64
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "#EXTINF:"); ok {
			d, err := strconv.ParseFloat(strings.TrimSuffix(v, ","), 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", path, line, err)
			}
			total += d
		}
	}
	return total
}

// Padded writes an MP4 of spec into dir made size bytes long by a trailing "free" box (ISO
// BMFF's box for bytes a reader skips) of seeded pseudo-random bytes, and returns its path:
// a video as large as an upload test needs that ffprobe and ffmpeg read as the short one
// (they skip the box), so encoding it costs what encoding the short video costs. The bytes
// are random so that a stored copy can only match the file by carrying every one of them.
func Padded(t testing.TB, dir string, spec Spec, size int64, seed uint64) string {
	t.Helper()
	path := MP4(t, dir, spec)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	box := size - info.Size()
	if box < 8 || box > math.MaxUint32 {
		t.Fatalf("testvideo: a %d-byte video cannot be padded to %d bytes with one box", info.Size(), size)
	}
	header := binary.BigEndian.AppendUint32(nil, uint32(box))
	if _, err := f.Write(append(header, "free"...)); err != nil {
		t.Fatal(err)
	}
	src := rand.NewChaCha8([32]byte(binary.LittleEndian.AppendUint64(make([]byte, 24), seed)))
	if _, err := io.CopyN(f, src, box-8); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}
