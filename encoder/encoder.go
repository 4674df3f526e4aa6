// Package encoder turns a video file into HLS with ffprobe and ffmpeg: a probe, a ladder of
// renditions never above the input's height with a master playlist, and a thumbnail. Each
// ffmpeg call has its own timeout and dies with the caller's context.
package encoder

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// ErrNotVideo means the input has no decodable video: retrying cannot help.
var ErrNotVideo = errors.New("not a playable video")

// ErrOverLimit means the input decodes to more than Limits allow: retrying cannot help. The
// error is a *LimitError saying which limit.
var ErrOverLimit = errors.New("over the limits for a video")

// LimitError is an input over one of the Limits.
type LimitError struct {
	// Detail says which limit, in words an uploader can act on ("the video is 8000×8000
	// pixels; the limit is 4096×4096").
	Detail string
}

func (e *LimitError) Error() string { return ErrOverLimit.Error() + ": " + e.Detail }

// Is makes errors.Is(err, ErrOverLimit) true for every LimitError.
func (e *LimitError) Is(target error) bool { return target == ErrOverLimit }

// InputFormats are the only demuxers ffprobe and ffmpeg may use on an input: the containers a
// video upload can be. Everything else a file could claim to be is refused before it is read,
// above all the formats that open other files or URLs — HLS and DASH playlists, concat, sdp,
// image sequences (image2) — which let a file named x.mp4 make the encoder read the server's
// own files into the segments it serves. The names are libavformat's.
const InputFormats = "mov,mp4,m4a,3gp,3g2,mj2,matroska,webm,avi,mpegts,flv"

// Limits bound what one input may decode to, checked after probing and enforced again while
// decoding (ffmpeg's -max_pixels, for a stream whose frames grow after the first) and by the
// memory limit of every ffmpeg and ffprobe process.
type Limits struct {
	// MaxWidth and MaxHeight bound a frame's sides, in pixels. Defaults 4096 and 4096.
	MaxWidth, MaxHeight int
	// MaxPixels bounds width × height of one frame. Default 4096 × 2304 (9 437 184), which a
	// 4K (3840 × 2160) or DCI 4K (4096 × 2160) upload, landscape or portrait, passes.
	MaxPixels int64
	// MaxFrameRate bounds frames per second. Default 120.
	MaxFrameRate float64
	// MaxDuration bounds the running time: the declared duration after probing, and the
	// encode's output (see outputLimit). Default 4 h.
	MaxDuration time.Duration
	// MemoryBytes bounds each ffmpeg and ffprobe process's address space (RLIMIT_AS, set by
	// util-linux's prlimit before ffmpeg starts). 0: no limit.
	MemoryBytes int64
}

// DefaultLimits are the limits a zero Limits field takes.
var DefaultLimits = Limits{MaxWidth: 4096, MaxHeight: 4096, MaxPixels: 4096 * 2304, MaxFrameRate: 120, MaxDuration: 4 * time.Hour}

// Config configures an Encoder. Zero values take the defaults named on each field.
type Config struct {
	// FFmpeg and FFprobe are the binaries. Default: found on PATH.
	FFmpeg, FFprobe string
	// ProbeTimeout bounds ffprobe. Default 1 min.
	ProbeTimeout time.Duration
	// EncodeTimeout bounds the HLS encode. Default 30 min.
	EncodeTimeout time.Duration
	// ThumbnailTimeout bounds the thumbnail. Default 1 min.
	ThumbnailTimeout time.Duration
	// Preset is the x264 preset. Default veryfast.
	Preset string
	// Format is how segments are packaged: FormatFMP4 (the default) or FormatTS.
	Format Format
	// SegmentSeconds is the HLS target segment duration. Default 6, as Apple's HLS authoring
	// specification recommends.
	SegmentSeconds int
	// KeyframeSeconds is the distance between keyframes, the same instants in every
	// rendition (closed GOPs): the unit of the I-frame playlists and of seeking. Default 2,
	// or SegmentSeconds when that is shorter. It must divide SegmentSeconds.
	KeyframeSeconds int
	// Limits bound the inputs. Zero fields take DefaultLimits.
	Limits Limits
	// Prlimit is util-linux's prlimit, which applies Limits.MemoryBytes. Default: found on PATH
	// when MemoryBytes is set.
	Prlimit string
	// Nice is coreutils' nice, which starts a yielding encode (RenditionOptions.Yield) at a
	// lower priority. Default: found on PATH.
	Nice string
}

// Encoder runs ffprobe and ffmpeg.
type Encoder struct {
	cfg Config
}

// New returns an Encoder, failing when ffmpeg or ffprobe cannot be found.
func New(cfg Config) (*Encoder, error) {
	var err error
	if cfg.FFmpeg, err = lookPath(cfg.FFmpeg, "ffmpeg"); err != nil {
		return nil, err
	}
	if cfg.FFprobe, err = lookPath(cfg.FFprobe, "ffprobe"); err != nil {
		return nil, err
	}
	if cfg.Nice, err = exec.LookPath(cmp.Or(cfg.Nice, "nice")); err != nil {
		return nil, fmt.Errorf("nice (coreutils) not found, needed to encode a group's later renditions at a lower priority: %w", err)
	}
	cfg.ProbeTimeout = cmp.Or(cfg.ProbeTimeout, time.Minute)
	cfg.EncodeTimeout = cmp.Or(cfg.EncodeTimeout, 30*time.Minute)
	cfg.ThumbnailTimeout = cmp.Or(cfg.ThumbnailTimeout, time.Minute)
	cfg.Preset = cmp.Or(cfg.Preset, "veryfast")
	cfg.Format = cmp.Or(cfg.Format, FormatFMP4)
	cfg.SegmentSeconds = cmp.Or(cfg.SegmentSeconds, 6)
	cfg.KeyframeSeconds = cmp.Or(cfg.KeyframeSeconds, min(2, cfg.SegmentSeconds))
	if cfg.Format != FormatFMP4 && cfg.Format != FormatTS {
		return nil, fmt.Errorf("encoder: unknown segment format %q (fmp4 or ts)", cfg.Format)
	}
	if cfg.SegmentSeconds < 1 || cfg.KeyframeSeconds < 1 || cfg.SegmentSeconds%cfg.KeyframeSeconds != 0 {
		return nil, fmt.Errorf("encoder: keyframes every %d s do not divide %d s segments", cfg.KeyframeSeconds, cfg.SegmentSeconds)
	}
	l, d := &cfg.Limits, DefaultLimits
	l.MaxWidth, l.MaxHeight = cmp.Or(l.MaxWidth, d.MaxWidth), cmp.Or(l.MaxHeight, d.MaxHeight)
	l.MaxPixels, l.MaxFrameRate = cmp.Or(l.MaxPixels, d.MaxPixels), cmp.Or(l.MaxFrameRate, d.MaxFrameRate)
	l.MaxDuration = cmp.Or(l.MaxDuration, d.MaxDuration)
	if l.MaxPixels > math.MaxInt32 {
		return nil, fmt.Errorf("encoder: MaxPixels %d is over ffmpeg's -max_pixels range (%d)", l.MaxPixels, math.MaxInt32)
	}
	if l.MemoryBytes > 0 {
		// prlimit sets the limit on itself and then execs ffmpeg: the limit is in place before
		// ffmpeg runs a single instruction. Setting it from here after starting ffmpeg
		// (prlimit(2) on the child's pid) would leave a window in which the child runs
		// unlimited; Go's os/exec has no way to set a child's rlimits before exec.
		if cfg.Prlimit, err = exec.LookPath(cmp.Or(cfg.Prlimit, "prlimit")); err != nil {
			return nil, fmt.Errorf("prlimit (util-linux) not found, needed for the encoder's memory limit (or set the limit to 0): %w", err)
		}
	}
	return &Encoder{cfg: cfg}, nil
}

func lookPath(configured, name string) (string, error) {
	p, err := exec.LookPath(cmp.Or(configured, name))
	if err != nil {
		return "", fmt.Errorf("%s not found (install ffmpeg): %w", name, err)
	}
	return p, nil
}

// Probe is what ffprobe says about an input.
type Probe struct {
	DurationMS    int64
	Width, Height int
	// FrameRate is the first video stream's average frame rate (0 when unknown).
	FrameRate float64
	HasAudio  bool
	// largest is the largest frame (width × height) of any video stream, and largestWidth
	// and largestHeight its sides: the limits apply to every stream, not just the one encoded.
	largest                     int64
	largestWidth, largestHeight int
}

// Probe reads an input's duration, video size and audio presence. An input without a
// decodable video stream, or in a format not in InputFormats, is ErrNotVideo; one with a
// video stream whose frame size cannot be read within Limits.MaxPixels is a *LimitError.
func (e *Encoder) Probe(ctx context.Context, input string) (Probe, error) {
	args := append([]string{"-v", "error", "-print_format", "json", "-show_streams", "-show_format"}, e.inputArgs(input)...)
	out, log, err := e.runLogged(ctx, e.cfg.ProbeTimeout, 0, e.cfg.FFprobe, args...)
	if err != nil && ctx.Err() != nil {
		return Probe{}, err
	}
	if over := pixelLimitRefusal.FindSubmatch(log); over != nil {
		// The decoder refused a frame over -max_pixels (ffprobe then fails, or reports the
		// stream without a size): the frame's size is in the refusal, so say which limit.
		w, _ := strconv.Atoi(string(over[1]))
		h, _ := strconv.Atoi(string(over[2]))
		if err := e.CheckLimits(Probe{largest: int64(w) * int64(h), largestWidth: w, largestHeight: h}); err != nil {
			return Probe{}, err
		}
	}
	if err != nil {
		return Probe{}, fmt.Errorf("%w: %v", ErrNotVideo, err)
	}
	var doc struct {
		Streams []struct {
			CodecType    string `json:"codec_type"`
			Width        int    `json:"width"`
			Height       int    `json:"height"`
			AvgFrameRate string `json:"avg_frame_rate"`
			RFrameRate   string `json:"r_frame_rate"`
		} `json:"streams"`
		Format struct {
			Duration string `json:"duration"`
		} `json:"format"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return Probe{}, fmt.Errorf("%w: unreadable ffprobe output: %v", ErrNotVideo, err)
	}
	var p Probe
	var sizeless bool // a video stream whose frames could not be decoded within -max_pixels
	for _, s := range doc.Streams {
		switch s.CodecType {
		case "video":
			sizeless = sizeless || s.Width <= 0 || s.Height <= 0
			if p.Height == 0 && s.Height > 0 {
				p.Width, p.Height = s.Width, s.Height
				p.FrameRate = cmp.Or(frameRate(s.AvgFrameRate), frameRate(s.RFrameRate))
			}
			if px := int64(s.Width) * int64(s.Height); px > p.largest {
				p.largest, p.largestWidth, p.largestHeight = px, s.Width, s.Height
			}
		case "audio":
			p.HasAudio = true
		}
	}
	secs, _ := strconv.ParseFloat(doc.Format.Duration, 64)
	p.DurationMS = int64(secs * 1000)
	switch {
	case sizeless:
		// Its size is unknown, so CheckLimits could not bound it: refused as over the limit.
		return Probe{}, &LimitError{Detail: fmt.Sprintf("a video stream's frame size could not be read within the limit of %d pixels (larger frames, or damaged data)", e.cfg.Limits.MaxPixels)}
	case p.Height == 0:
		return Probe{}, fmt.Errorf("%w: no video stream", ErrNotVideo)
	case p.DurationMS <= 0:
		return Probe{}, fmt.Errorf("%w: no duration", ErrNotVideo)
	}
	return p, nil
}

// frameRate reads ffprobe's "30000/1001"; 0 when it is missing or not a rate.
func frameRate(s string) float64 {
	num, den, ok := strings.Cut(s, "/")
	n, err1 := strconv.ParseFloat(num, 64)
	d, err2 := strconv.ParseFloat(den, 64)
	if !ok || err1 != nil || err2 != nil || d <= 0 || n <= 0 {
		return 0
	}
	return n / d
}

// CheckLimits returns an ErrOverLimit error saying which limit p is over, or nil. Encode
// calls it after probing.
func (e *Encoder) CheckLimits(p Probe) error {
	l := e.cfg.Limits
	over := func(format string, args ...any) error {
		return &LimitError{Detail: fmt.Sprintf(format, args...)}
	}
	switch {
	case p.largestWidth > l.MaxWidth || p.largestHeight > l.MaxHeight:
		return over("the video is %d×%d pixels; the limit is %d×%d", p.largestWidth, p.largestHeight, l.MaxWidth, l.MaxHeight)
	case p.largest > l.MaxPixels:
		return over("the video's frames are %d×%d = %d pixels; the limit is %d", p.largestWidth, p.largestHeight, p.largest, l.MaxPixels)
	case p.FrameRate > l.MaxFrameRate:
		return over("the video has %.0f frames per second; the limit is %.0f", p.FrameRate, l.MaxFrameRate)
	case time.Duration(p.DurationMS)*time.Millisecond > l.MaxDuration:
		return over("the video is %s long; the limit is %s", (time.Duration(p.DurationMS) * time.Millisecond).Round(time.Second), l.MaxDuration)
	}
	return nil
}

// inputArgs are the options and the -i of every ffprobe and ffmpeg call on an untrusted input:
// only the allowed container formats, only the local file protocol, and no decoded frame over
// the pixel limit, whatever the first frames said. ffprobe decodes too: to find a stream's
// size it may decode a whole frame, and without -max_pixels a 790 KB 16000×16000 PNG in
// Matroska takes it to 801 MB resident before the size can be checked; with -max_pixels it
// stays near 55 MB and reports the stream without a size (see Probe).
func (e *Encoder) inputArgs(input string) []string {
	return []string{"-format_whitelist", InputFormats, "-protocol_whitelist", "file",
		"-max_pixels", strconv.FormatInt(e.cfg.Limits.MaxPixels, 10), "-i", input}
}

// run executes one tool call under its own timeout, killed with ctx. The error carries the
// tail of stderr, which is where ffmpeg says what went wrong.
func (e *Encoder) run(ctx context.Context, timeout time.Duration, bin string, args ...string) ([]byte, error) {
	out, _, err := e.runLogged(ctx, timeout, 0, bin, args...)
	return out, err
}

// yieldNiceness is the nice value of a yielding encode (RenditionOptions.Yield): low enough
// that a normal-priority encode on the same cores gets nearly all the CPU it asks for (the
// kernel weighs nice 0 against nice 10 about 9 to 1), while the yielding one still takes
// whatever is left.
const yieldNiceness = 10

// pixelLimitRefusal is libavutil's message (av_image_check_size2) when a decoder refuses a
// frame over -max_pixels; its two numbers are the frame's width and height.
var pixelLimitRefusal = regexp.MustCompile(`Picture size (\d+)x(\d+) exceeds specified max pixel count`)

// runLogged is run that also returns what the process wrote to its standard error; a
// niceness other than 0 starts the process at that nice value (through nice, which execs it:
// every thread it starts inherits the value).
func (e *Encoder) runLogged(ctx context.Context, timeout time.Duration, niceness int, bin string, args ...string) (stdout, stderr []byte, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	name := bin
	if niceness != 0 {
		args = append([]string{"-n", strconv.Itoa(niceness), "--", bin}, args...)
		bin = e.cfg.Nice
	}
	if e.cfg.Limits.MemoryBytes > 0 {
		args = append([]string{"--as=" + strconv.FormatInt(e.cfg.Limits.MemoryBytes, 10), "--", bin}, args...)
		bin = e.cfg.Prlimit
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	if e.cfg.Limits.MemoryBytes > 0 {
		// glibc reserves 64 MiB of address space per malloc arena, up to 8 per core, and
		// x264 runs dozens of threads: without a cap on arenas a many-core machine would hit
		// an address-space limit long before using the memory. Four arenas made no difference
		// beyond the noise to a 4K encode here (docs/internals/security.md).
		cmd.Env = append(os.Environ(), "MALLOC_ARENA_MAX=4")
	}
	cmd.WaitDelay = 5 * time.Second
	dieWithParent(cmd)
	var out, log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &log
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, log.Bytes(), fmt.Errorf("%s: %w", filepath.Base(name), context.Cause(ctx))
		}
		msg := strings.TrimSpace(log.String())
		if len(msg) > 500 {
			msg = "…" + msg[len(msg)-500:]
		}
		return nil, log.Bytes(), fmt.Errorf("%s: %w: %s", filepath.Base(name), err, msg)
	}
	return out.Bytes(), log.Bytes(), nil
}
