package encoder_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/playhead/playhead/encoder"
	"github.com/playhead/playhead/internal/testvideo"
)

// ffmpeg runs ffmpeg with args, failing the test if it fails.
func ffmpeg(t *testing.T, args ...string) {
	t.Helper()
	if b, err := exec.Command("ffmpeg", append([]string{"-nostdin", "-v", "error", "-y"}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg %s: %v\n%s", strings.Join(args, " "), err, b)
	}
}

// TestEncoder_RefusesFilesThatOpenOtherFiles: an upload named x.mp4 whose content is an HLS
// playlist with a file:// segment would become READY with the server file's frames as its
// segments. Every format that reads other files or URLs (HLS, concat, sdp) is refused as not
// a video, before anything is read, whatever the file is called.
func TestEncoder_RefusesFilesThatOpenOtherFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A video elsewhere on the "server": what the attacker wants to read.
	secret := filepath.Join(dir, "server-secret.ts")
	ffmpeg(t, "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25", "-t", "2", "-c:v", "libx264", "-preset", "ultrafast", "-f", "mpegts", secret)
	for name, content := range map[string]string{
		"x.mp4":   "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\nfile://" + secret + "\n#EXT-X-ENDLIST\n",
		"y.mp4":   "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\n" + secret + "\n#EXT-X-ENDLIST\n",
		"x.m3u8":  "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\nfile://" + secret + "\n#EXT-X-ENDLIST\n",
		"c.mp4":   "ffconcat version 1.0\nfile '" + secret + "'\n",
		"s.mp4":   "v=0\no=- 0 0 IN IP4 127.0.0.1\ns=x\nc=IN IP4 127.0.0.1\nt=0 0\nm=video 5004 RTP/AVP 96\na=rtpmap:96 H264/90000\n",
		"sub.mkv": "#EXTM3U\n#EXTINF:2,\nhttp://127.0.0.1:1/x.ts\n",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			input := filepath.Join(t.TempDir(), name)
			if err := os.WriteFile(input, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "out")
			res, err := newEncoder(t).Encode(context.Background(), input, out)
			if !errors.Is(err, encoder.ErrNotVideo) {
				t.Fatalf("Encode(%s holding a playlist) = %+v, %v; want ErrNotVideo", name, res, err)
			}
			if segs, _ := filepath.Glob(filepath.Join(out, "*", "*.ts")); len(segs) > 0 {
				t.Fatalf("segments written from a playlist: %v", segs)
			}
		})
	}
}

// TestEncoder_ReadsOnlyLocalFiles: -protocol_whitelist file is in force for every ffprobe
// and ffmpeg call, whatever opens the URL — today the format whitelist already refuses the
// demuxers that open other inputs, and this keeps a second lock on the door if one of the
// allowed demuxers learns to follow a reference. A valid video at an http:// or concat: input
// is not read, and the server that holds it sees no request.
func TestEncoder_ReadsOnlyLocalFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clip := testvideo.MP4(t, dir, testvideo.Spec{Seconds: 1, Width: 160, Height: 120})
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.ServeFile(w, r, clip)
	}))
	defer srv.Close()
	e := newEncoder(t)
	if _, err := e.Probe(context.Background(), clip); err != nil {
		t.Fatalf("the clip itself must probe: %v", err)
	}
	for _, input := range []string{srv.URL + "/clip.mp4", "concat:" + clip + "|" + clip} {
		if p, err := e.Probe(context.Background(), input); !errors.Is(err, encoder.ErrNotVideo) {
			t.Errorf("Probe(%s) = %+v, %v; want ErrNotVideo", input, p, err)
		}
		out := filepath.Join(t.TempDir(), "out")
		if _, err := e.Encode(context.Background(), input, out); !errors.Is(err, encoder.ErrNotVideo) {
			t.Errorf("Encode(%s) = %v; want ErrNotVideo", input, err)
		}
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("the encoder sent %d HTTP requests", n)
	}
}

// TestEncoder_Limits: without limits a 1 MiB file of 8000×8000 frames becomes READY while
// ffmpeg grows to 580 MB. Frames, frame rate and duration over the limits are refused after
// probing, before the encode, with an error an uploader can read; a 4K upload passes the
// default limits.
func TestEncoder_Limits(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	gen := func(name, source string, seconds int) string {
		path := filepath.Join(dir, name)
		ffmpeg(t, "-f", "lavfi", "-i", source, "-t", fmt.Sprint(seconds), "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", path)
		return path
	}
	huge := gen("huge.mp4", "color=c=black:s=8000x8000:r=1", 2)
	if fi, err := os.Stat(huge); err != nil || fi.Size() > 1<<20 {
		t.Fatalf("the huge-frames file should be small: %v %v", fi, err)
	}
	wide := gen("wide.mp4", "color=c=black:s=4800x480:r=5", 1)
	fast := gen("fast.mp4", "testsrc2=size=160x120:rate=240", 1)
	long := gen("long.mp4", "testsrc2=size=160x120:rate=5", 3)
	// A small first video stream and a huge second one: the limits apply to every stream.
	twoStreams := filepath.Join(dir, "two-streams.mkv")
	ffmpeg(t, "-f", "lavfi", "-i", "testsrc2=size=160x120:rate=5", "-f", "lavfi", "-i", "color=c=black:s=8000x8000:r=1",
		"-map", "0:v", "-map", "1:v", "-t", "1", "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", twoStreams)
	for _, tc := range []struct {
		name, input string
		limits      encoder.Limits
		want        string
	}{
		{"HugeFrames", huge, encoder.Limits{}, "8000×8000"},
		{"HugeSecondStream", twoStreams, encoder.Limits{}, "8000×8000"},
		{"TooWide", wide, encoder.Limits{}, "4800×480"},
		{"TooManyPixels", wide, encoder.Limits{MaxWidth: 8000, MaxPixels: 1 << 20}, "2304000 pixels"},
		{"TooFast", fast, encoder.Limits{}, "240 frames per second"},
		{"TooLong", long, encoder.Limits{MaxDuration: 2 * time.Second}, "3s long"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, err := encoder.New(encoder.Config{Preset: "ultrafast", SegmentSeconds: 1, Limits: tc.limits})
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "out")
			_, err = e.Encode(context.Background(), tc.input, out)
			if !errors.Is(err, encoder.ErrOverLimit) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Encode = %v, want ErrOverLimit saying %q", err, tc.want)
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the encode ran (output dir: %v)", err)
			}
		})
	}
	t.Run("4KPassesTheDefaults", func(t *testing.T) {
		t.Parallel()
		for _, size := range []string{"3840x2160", "2160x3840", "4096x2160"} {
			input := gen("uhd-"+size+".mp4", "testsrc2=size="+size+":rate=60", 1)
			p, err := newEncoder(t).Probe(context.Background(), input)
			if err != nil {
				t.Fatal(err)
			}
			e, _ := encoder.New(encoder.Config{})
			if err := e.CheckLimits(p); err != nil {
				t.Errorf("a %s 60 fps upload is refused by the default limits: %v", size, err)
			}
		}
	})
}

// TestEncoder_MemoryLimitReachesFFmpeg shows that Limits.MemoryBytes bounds the ffmpeg and
// ffprobe processes themselves: under a 64 MiB address space they cannot even load, and a
// normal encode under the default configuration of the binary (4 GiB) goes through.
func TestEncoder_MemoryLimitReachesFFmpeg(t *testing.T) {
	t.Parallel()
	input := testvideo.MP4(t, t.TempDir(), testvideo.Spec{Seconds: 1, Width: 320, Height: 240})
	tight, err := encoder.New(encoder.Config{Preset: "ultrafast", Limits: encoder.Limits{MemoryBytes: 64 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tight.Encode(context.Background(), input, filepath.Join(t.TempDir(), "out")); err == nil {
		t.Fatal("an encode under a 64 MiB address-space limit succeeded: the limit does not reach ffmpeg")
	}
	roomy, err := encoder.New(encoder.Config{Preset: "ultrafast", Limits: encoder.Limits{MemoryBytes: 4 << 30}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := roomy.Encode(context.Background(), input, filepath.Join(t.TempDir(), "out")); err != nil {
		t.Fatalf("an encode under a 4 GiB limit: %v", err)
	}
}

// TestEncoder_OutputNeverOutrunsTheDeclaredDuration: the duration limit is checked against
// the duration the container declares, which the file's author writes. A 4 KiB Matroska file
// declaring 1 s, whose last frame's timestamp jumps hours ahead, passed the limit, and
// ffmpeg's constant-frame-rate output filled the gap with duplicates (30 hours declared as 1 s
// made 27 000 segments and 635 MB in 30 s). The encode writes at most the declared duration
// plus its margin (10 s at least), however far the timestamps run.
func TestEncoder_OutputNeverOutrunsTheDeclaredDuration(t *testing.T) {
	t.Parallel()
	gap := testvideo.TimestampGap(t, t.TempDir(), 10*time.Minute, time.Second)
	e := newEncoder(t)
	p, err := e.Probe(context.Background(), gap)
	if err != nil || p.DurationMS != 1000 {
		t.Fatalf("the fixture should probe as 1 s long: %+v, %v", p, err)
	}
	out := filepath.Join(t.TempDir(), "out")
	res, err := e.Encode(context.Background(), gap, out)
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	var total float64
	for i := range res.Renditions {
		total += testvideo.PlaylistSeconds(t, filepath.Join(out, fmt.Sprintf("v%d", i), "index.m3u8"))
	}
	// 1 s declared plus the 10 s margin, per rendition, and a segment of rounding.
	if limit := float64(len(res.Renditions)) * (1 + 10 + 1); total > limit {
		t.Fatalf("a file declaring 1 s encoded to %.0f s of HLS (limit %.0f s)", total, limit)
	}
}
