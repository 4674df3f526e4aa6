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
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ErrNotVideo means the input has no decodable video: retrying cannot help.
var ErrNotVideo = errors.New("not a playable video")

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
	// SegmentSeconds is the HLS segment length. Default 4.
	SegmentSeconds int
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
	cfg.ProbeTimeout = cmp.Or(cfg.ProbeTimeout, time.Minute)
	cfg.EncodeTimeout = cmp.Or(cfg.EncodeTimeout, 30*time.Minute)
	cfg.ThumbnailTimeout = cmp.Or(cfg.ThumbnailTimeout, time.Minute)
	cfg.Preset = cmp.Or(cfg.Preset, "veryfast")
	cfg.SegmentSeconds = cmp.Or(cfg.SegmentSeconds, 4)
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
	HasAudio      bool
}

// Probe reads an input's duration, video size and audio presence. An input without a
// decodable video stream is ErrNotVideo.
func (e *Encoder) Probe(ctx context.Context, input string) (Probe, error) {
	out, err := e.run(ctx, e.cfg.ProbeTimeout, e.cfg.FFprobe,
		"-v", "error", "-print_format", "json", "-show_streams", "-show_format", input)
	if err != nil {
		if ctx.Err() != nil {
			return Probe{}, err
		}
		return Probe{}, fmt.Errorf("%w: ffprobe: %v", ErrNotVideo, err)
	}
	var doc struct {
		Streams []struct {
			CodecType string `json:"codec_type"`
			Width     int    `json:"width"`
			Height    int    `json:"height"`
		} `json:"streams"`
		Format struct {
			Duration string `json:"duration"`
		} `json:"format"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return Probe{}, fmt.Errorf("%w: unreadable ffprobe output: %v", ErrNotVideo, err)
	}
	var p Probe
	for _, s := range doc.Streams {
		switch {
		case s.CodecType == "video" && p.Height == 0 && s.Height > 0:
			p.Width, p.Height = s.Width, s.Height
		case s.CodecType == "audio":
			p.HasAudio = true
		}
	}
	secs, _ := strconv.ParseFloat(doc.Format.Duration, 64)
	p.DurationMS = int64(secs * 1000)
	switch {
	case p.Height == 0:
		return Probe{}, fmt.Errorf("%w: no video stream", ErrNotVideo)
	case p.DurationMS <= 0:
		return Probe{}, fmt.Errorf("%w: no duration", ErrNotVideo)
	}
	return p, nil
}

// Rendition is one rung of the HLS ladder.
type Rendition struct {
	Height    int
	VideoKbps int
	AudioKbps int
}

// Ladder is the full rendition ladder, highest first.
var Ladder = []Rendition{
	{Height: 1080, VideoKbps: 5000, AudioKbps: 128},
	{Height: 720, VideoKbps: 2800, AudioKbps: 128},
	{Height: 480, VideoKbps: 1400, AudioKbps: 96},
	{Height: 360, VideoKbps: 800, AudioKbps: 96},
	{Height: 240, VideoKbps: 400, AudioKbps: 64},
}

// PlanLadder returns the rungs at or below height: never upscale. An input smaller than the
// lowest rung gets one rendition at its own (even) height.
func PlanLadder(height int) []Rendition {
	var out []Rendition
	for _, r := range Ladder {
		if r.Height <= height {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		low := Ladder[len(Ladder)-1]
		low.Height = max(2, height&^1)
		out = append(out, low)
	}
	return out
}

// Output describes an encode's files, relative to its output directory.
type Output struct {
	Probe      Probe
	Renditions []Rendition
	// Master is the master playlist, Thumbnail a JPEG.
	Master, Thumbnail string
}

// Encode writes HLS (master.m3u8, one v<i>/index.m3u8 and segments per rendition) and
// thumb.jpg into outDir.
func (e *Encoder) Encode(ctx context.Context, input, outDir string) (Output, error) {
	probe, err := e.Probe(ctx, input)
	if err != nil {
		return Output{}, err
	}
	ladder := PlanLadder(probe.Height)
	if _, err := e.run(ctx, e.cfg.EncodeTimeout, e.cfg.FFmpeg, e.hlsArgs(input, outDir, probe, ladder)...); err != nil {
		return Output{}, fmt.Errorf("encode hls: %w", err)
	}
	// A frame from a little way in is more telling than the first (often black) one.
	at := min(1.0, float64(probe.DurationMS)/2000)
	thumbHeight := min(360, probe.Height&^1)
	if _, err := e.run(ctx, e.cfg.ThumbnailTimeout, e.cfg.FFmpeg, "-nostdin", "-v", "error", "-y",
		"-ss", strconv.FormatFloat(at, 'f', 3, 64), "-i", input, "-frames:v", "1",
		"-vf", fmt.Sprintf("scale=-2:%d", thumbHeight), filepath.Join(outDir, "thumb.jpg")); err != nil {
		return Output{}, fmt.Errorf("thumbnail: %w", err)
	}
	return Output{Probe: probe, Renditions: ladder, Master: "master.m3u8", Thumbnail: "thumb.jpg"}, nil
}

func (e *Encoder) hlsArgs(input, outDir string, p Probe, ladder []Rendition) []string {
	n := len(ladder)
	var filter strings.Builder
	fmt.Fprintf(&filter, "[0:v]split=%d", n)
	for i := range n {
		fmt.Fprintf(&filter, "[s%d]", i)
	}
	for i, r := range ladder {
		fmt.Fprintf(&filter, ";[s%d]scale=-2:%d,format=yuv420p[v%d]", i, r.Height, i)
	}
	args := []string{"-nostdin", "-v", "error", "-y", "-i", input, "-filter_complex", filter.String()}
	streamMap := make([]string, n)
	for i, r := range ladder {
		args = append(args, "-map", fmt.Sprintf("[v%d]", i),
			fmt.Sprintf("-b:v:%d", i), fmt.Sprintf("%dk", r.VideoKbps),
			fmt.Sprintf("-maxrate:v:%d", i), fmt.Sprintf("%dk", r.VideoKbps*107/100),
			fmt.Sprintf("-bufsize:v:%d", i), fmt.Sprintf("%dk", r.VideoKbps*3/2))
		streamMap[i] = fmt.Sprintf("v:%d", i)
	}
	if p.HasAudio {
		for i, r := range ladder {
			args = append(args, "-map", "0:a:0", fmt.Sprintf("-b:a:%d", i), fmt.Sprintf("%dk", r.AudioKbps))
			streamMap[i] += fmt.Sprintf(",a:%d", i)
		}
		args = append(args, "-c:a", "aac", "-ac", "2")
	}
	seg := e.cfg.SegmentSeconds
	args = append(args,
		"-c:v", "libx264", "-preset", e.cfg.Preset,
		// Keyframes on segment boundaries, so every rendition's segments line up.
		"-force_key_frames", fmt.Sprintf("expr:gte(t,n_forced*%d)", seg), "-sc_threshold", "0",
		"-f", "hls", "-hls_time", strconv.Itoa(seg), "-hls_playlist_type", "vod",
		"-hls_segment_filename", filepath.Join(outDir, "v%v", "seg_%03d.ts"),
		"-master_pl_name", "master.m3u8",
		"-var_stream_map", strings.Join(streamMap, " "),
		filepath.Join(outDir, "v%v", "index.m3u8"))
	return args
}

// run executes one tool call under its own timeout, killed with ctx. The error carries the
// tail of stderr, which is where ffmpeg says what went wrong.
func (e *Encoder) run(ctx context.Context, timeout time.Duration, bin string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.WaitDelay = 5 * time.Second
	dieWithParent(cmd)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Base(bin), context.Cause(ctx))
		}
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 500 {
			msg = "…" + msg[len(msg)-500:]
		}
		return nil, fmt.Errorf("%s: %w: %s", filepath.Base(bin), err, msg)
	}
	return stdout.Bytes(), nil
}
