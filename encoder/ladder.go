package encoder

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Format is how an encode packages its segments.
type Format string

// The segment formats. FormatFMP4 (fragmented MP4, CMAF) is the default: one file per
// rendition served by byte ranges, one AAC audio rendition shared by every video variant, and
// I-frame playlists. FormatTS (MPEG-TS) is for players that predate fMP4 in HLS (before iOS 10):
// a file per segment with the audio muxed into each variant, and no I-frame playlists.
const (
	FormatFMP4 Format = "fmp4"
	FormatTS   Format = "ts"
)

// Rendition is one rung of the HLS ladder.
type Rendition struct {
	Height    int
	VideoKbps int
	// AudioKbps is the audio muxed into this rung's segments in FormatTS. In FormatFMP4 every
	// rung shares one audio rendition of AudioGroupKbps.
	AudioKbps int
}

// AudioGroupKbps is the bit rate of the one AAC stereo rendition of FormatFMP4.
const AudioGroupKbps = 128

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
	// Storyboard is the storyboard's WebVTT (its sprites beside it); empty when the video was
	// too short to give one frame.
	Storyboard string
	// StartUS is the presentation time (µs) of the video's first frame in the segments'
	// timestamps, which captions are mapped to (X-TIMESTAMP-MAP).
	StartUS int64
}

// The output layout: one directory per rendition (v0 the highest), the audio rendition's, and
// the storyboard's.
const (
	masterName     = "master.m3u8"
	thumbnailName  = "thumb.jpg"
	audioDir       = "audio"
	playlistName   = "index.m3u8"
	iframesName    = "iframes.m3u8"
	fmp4MediaName  = "media.mp4"
	storyboardDir  = "storyboard"
	storyboardName = "storyboard.vtt"
)

func variantDir(i int) string { return "v" + strconv.Itoa(i) }

// Encode writes HLS into outDir: master.m3u8; per rendition v<i>/index.m3u8 with its media (and
// in FormatFMP4 v<i>/iframes.m3u8 and audio/ for the audio rendition); thumb.jpg; and the
// storyboard under storyboard/.
func (e *Encoder) Encode(ctx context.Context, input, outDir string) (Output, error) {
	probe, err := e.Probe(ctx, input)
	if err != nil {
		return Output{}, err
	}
	if err := e.CheckLimits(probe); err != nil {
		return Output{}, err
	}
	ladder := PlanLadder(probe.Height)
	// The storyboard's frames are tiled after the encode; they wait beside outDir, whose every
	// file is uploaded.
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return Output{}, err
	}
	frames, err := os.MkdirTemp(filepath.Dir(outDir), "storyboard-frames-*")
	if err != nil {
		return Output{}, err
	}
	defer os.RemoveAll(frames)
	board := planStoryboard(probe)
	if _, err := e.run(ctx, e.cfg.EncodeTimeout, e.cfg.FFmpeg, e.ffmpegArgs(input, outDir, frames, probe, ladder, board)...); err != nil {
		return Output{}, fmt.Errorf("encode hls: %w", err)
	}
	// A frame from a little way in is more telling than the first (often black) one.
	at := min(1.0, float64(probe.DurationMS)/2000)
	thumbHeight := min(360, probe.Height&^1)
	thumb := append([]string{"-nostdin", "-v", "error", "-y", "-ss", strconv.FormatFloat(at, 'f', 3, 64)}, e.inputArgs(input)...)
	thumb = append(thumb, "-frames:v", "1", "-vf", fmt.Sprintf("scale=-2:%d", thumbHeight), filepath.Join(outDir, thumbnailName))
	if _, err := e.run(ctx, e.cfg.ThumbnailTimeout, e.cfg.FFmpeg, thumb...); err != nil {
		return Output{}, fmt.Errorf("thumbnail: %w", err)
	}
	start, err := e.writePlaylists(ctx, outDir, len(ladder), probe.HasAudio)
	if err != nil {
		return Output{}, fmt.Errorf("package hls: %w", err)
	}
	out := Output{Probe: probe, Renditions: ladder, Master: masterName, Thumbnail: thumbnailName, StartUS: start}
	written, err := e.writeStoryboard(ctx, frames, filepath.Join(outDir, storyboardDir), board, probe)
	if err != nil {
		return Output{}, fmt.Errorf("storyboard: %w", err)
	}
	if written {
		out.Storyboard = storyboardDir + "/" + storyboardName
	}
	return out, nil
}

// ffmpegArgs is the one ffmpeg run of an encode: the source decoded once, split into every
// rung's scaler and x264 encoder, the audio encoded once, HLS written by ffmpeg's muxer (whose
// playlists writePlaylists then replaces), and a small frame every board.interval for the
// storyboard.
//
// Keyframes are forced at the same instants in every rendition (every KeyframeSeconds, closed
// GOPs, no scene-cut keyframes), so a player switching renditions at a segment boundary lands
// on a keyframe. In FormatFMP4 ffmpeg writes one fragment per keyframe into one file per
// rendition, and the segments served are groups of those fragments (hls.Group): a fragment is
// then the byte range of one I-frame, which Apple's I-frame playlists need and ffmpeg's own
// segments, one fragment each, cannot give.
func (e *Encoder) ffmpegArgs(input, outDir, frames string, p Probe, ladder []Rendition, board storyboard) []string {
	n := len(ladder)
	var filter strings.Builder
	fmt.Fprintf(&filter, "[0:v]split=%d", n+1)
	for i := range n {
		fmt.Fprintf(&filter, "[s%d]", i)
	}
	filter.WriteString("[sb]")
	for i, r := range ladder {
		fmt.Fprintf(&filter, ";[s%d]scale=-2:%d,format=yuv420p[v%d]", i, r.Height, i)
	}
	fmt.Fprintf(&filter, ";[sb]fps=1/%d,scale=%d:%d:force_original_aspect_ratio=decrease:force_divisible_by=2[board]",
		board.interval, storyboardTileBox, storyboardTileBox)
	limit := strconv.FormatFloat(e.outputLimit(p).Seconds(), 'f', 3, 64)
	args := append([]string{"-nostdin", "-v", "error", "-y"}, e.inputArgs(input)...)
	args = append(args, "-filter_complex", filter.String())
	streamMap := make([]string, n)
	for i, r := range ladder {
		args = append(args, "-map", fmt.Sprintf("[v%d]", i),
			fmt.Sprintf("-b:v:%d", i), fmt.Sprintf("%dk", r.VideoKbps),
			fmt.Sprintf("-maxrate:v:%d", i), fmt.Sprintf("%dk", r.VideoKbps*107/100),
			fmt.Sprintf("-bufsize:v:%d", i), fmt.Sprintf("%dk", r.VideoKbps*3/2))
		streamMap[i] = fmt.Sprintf("v:%d,name:%s", i, variantDir(i))
	}
	fmp4 := e.cfg.Format == FormatFMP4
	if p.HasAudio {
		if fmp4 {
			args = append(args, "-map", "0:a:0", "-b:a:0", fmt.Sprintf("%dk", AudioGroupKbps))
			for i := range streamMap {
				streamMap[i] += ",agroup:audio"
			}
			streamMap = append(streamMap, "a:0,agroup:audio,name:"+audioDir)
		} else {
			for i, r := range ladder {
				args = append(args, "-map", "0:a:0", fmt.Sprintf("-b:a:%d", i), fmt.Sprintf("%dk", r.AudioKbps))
				streamMap[i] += fmt.Sprintf(",a:%d", i)
			}
		}
		args = append(args, "-c:a", "aac", "-ac", "2")
	}
	args = append(args,
		"-t", limit,
		"-c:v", "libx264", "-preset", e.cfg.Preset, "-flags", "+cgop",
		"-force_key_frames", fmt.Sprintf("expr:gte(t,n_forced*%d)", e.cfg.KeyframeSeconds), "-sc_threshold", "0",
		"-f", "hls", "-hls_playlist_type", "vod", "-var_stream_map", strings.Join(streamMap, " "))
	if fmp4 {
		args = append(args, "-hls_segment_type", "fmp4", "-hls_flags", "independent_segments+single_file",
			"-hls_time", strconv.Itoa(e.cfg.KeyframeSeconds),
			"-hls_segment_filename", filepath.Join(outDir, "%v", fmp4MediaName))
	} else {
		args = append(args, "-hls_flags", "independent_segments", "-hls_time", strconv.Itoa(e.cfg.SegmentSeconds),
			"-hls_segment_filename", filepath.Join(outDir, "%v", "seg_%03d.ts"))
	}
	args = append(args, filepath.Join(outDir, "%v", playlistName))
	// The storyboard's frames: a second output of the same run, so the source is decoded once.
	return append(args, "-map", "[board]", "-t", limit, "-c:v", "mjpeg", "-q:v", "3",
		"-f", "image2", "-start_number", "0", filepath.Join(frames, "%05d.jpg"))
}

// outputLimit is the longest output an encode may write: the probed duration with a margin,
// and never more than MaxDuration. The probe reads the container's declared duration, which a
// hostile file sets as it likes: a 4 KiB Matroska file declaring 1 s whose frames' timestamps
// jump 30 hours ahead passed the duration limit, and ffmpeg's constant-frame-rate output
// filled the gap with duplicates, 27 000 segments and 635 MB in 30 s. The margin (a tenth, at
// least 10 s) keeps an honest file whose streams run a little past its container's duration
// whole.
func (e *Encoder) outputLimit(p Probe) time.Duration {
	declared := time.Duration(p.DurationMS) * time.Millisecond
	return min(e.cfg.Limits.MaxDuration, declared+max(declared/10, 10*time.Second))
}
