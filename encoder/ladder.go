package encoder

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/playhead/playhead/hls"
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

// Plan is what an encode decides from its probe: the input's facts and its ladder.
type Plan struct {
	Probe  Probe
	Ladder []Rendition
}

// Plan probes input, checks it against the limits and plans its ladder.
func (e *Encoder) Plan(ctx context.Context, input string) (Plan, error) {
	probe, err := e.Probe(ctx, input)
	if err != nil {
		return Plan{}, err
	}
	if err := e.CheckLimits(probe); err != nil {
		return Plan{}, err
	}
	return Plan{Probe: probe, Ladder: PlanLadder(probe.Height)}, nil
}

// Encode writes HLS into outDir in one ffmpeg run that decodes the source once: master.m3u8;
// per rendition v<i>/index.m3u8 with its media (and in FormatFMP4 v<i>/iframes.m3u8 and
// audio/ for the audio rendition); thumb.jpg; and the storyboard under storyboard/. It is the
// cheapest encode in CPU; EncodeRenditions splits the same work into jobs that run apart (an
// encode group).
func (e *Encoder) Encode(ctx context.Context, input, outDir string) (Output, error) {
	plan, err := e.Plan(ctx, input)
	if err != nil {
		return Output{}, err
	}
	probe, ladder := plan.Probe, plan.Ladder
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return Output{}, err
	}
	// The storyboard's frames are tiled after the encode; they wait beside outDir, whose every
	// file is uploaded.
	frames, err := os.MkdirTemp(filepath.Dir(outDir), "storyboard-frames-*")
	if err != nil {
		return Output{}, err
	}
	defer os.RemoveAll(frames)
	board := planStoryboard(probe)
	run := ffmpegRun{input: input, outDir: outDir, probe: probe, ladder: ladder, rungs: allRungs(len(ladder)),
		audio: probe.HasAudio, frames: frames, board: board}
	if _, err := e.run(ctx, e.cfg.EncodeTimeout, e.cfg.FFmpeg, e.ffmpegArgs(run)...); err != nil {
		return Output{}, fmt.Errorf("encode hls: %w", err)
	}
	if err := e.thumbnail(ctx, input, outDir, probe); err != nil {
		return Output{}, err
	}
	parts, start, err := e.packageRungs(ctx, outDir, run.rungs, probe.HasAudio, run.audio)
	if err != nil {
		return Output{}, fmt.Errorf("package hls: %w", err)
	}
	master, _ := hls.Assemble(parts)
	if err := writePlaylist(filepath.Join(outDir, masterName), master.Marshal); err != nil {
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

// RenditionOutput is what EncodeRenditions wrote, relative to its output directory.
type RenditionOutput struct {
	// Parts are the renditions' entries of a master playlist (hls.Assemble): each rung's
	// video, and the separate audio rendition when the run wrote it.
	Parts []hls.Part
	// StartUS is the presentation time (µs) of the video's first frame in the segments'
	// timestamps.
	StartUS int64
	// Thumbnail (a JPEG) and Storyboard (its WebVTT; empty when the video was too short to
	// give a frame) are set when the run wrote the pictures.
	Thumbnail, Storyboard string
}

// RenditionOptions say what a renditions run writes besides its video.
type RenditionOptions struct {
	// Audio writes the separate audio rendition (audio/) in FormatFMP4; in FormatTS every
	// rendition carries its audio.
	Audio bool
	// Pictures writes the thumbnail and the storyboard from the same decode of the source.
	Pictures bool
	// Yield runs the encode at a lower priority (nice 10): on a machine that also runs the
	// group's first run, the one that makes the media playable, that run keeps nearly all the
	// CPU it would have alone, and this one takes the rest. Two worker processes on two cores
	// otherwise shared them about evenly by thread, and x264's many threads for four rungs
	// left the lowest rung a quarter of them: playable at 48 % of READY instead of 16 %
	// (docs/benchmarks/runs/2026-12-03-watch-while-encoding.md).
	Yield bool
}

// SplitLadder divides the rungs of ladder (indexes into it, highest first as PlanLadder gives
// them) among at most runs ffmpeg runs, the rendition jobs of an encode group, in the order
// they should be claimed. The lowest rung runs alone and first: it is the quickest to encode,
// and it makes the media playable. The other rungs are spread over the remaining runs by their
// pixels per frame (each rung, heaviest first, joins the run with the fewest pixels so far),
// and those runs come heaviest first, so that with several workers the longest run starts
// early instead of being the tail.
//
// Every run decodes the source again, which costs CPU (docs/decisions/0014-two-rendition-jobs.md): runs = 2, the
// lowest rung and then every other rung in one run, costs one decode more than Encode; runs
// of len(ladder) or more is a run per rung, which spreads an upload over the most workers.
// runs below 2 is taken as 2.
func SplitLadder(ladder []Rendition, runs int) [][]int {
	if len(ladder) == 0 {
		return nil
	}
	split := [][]int{{len(ladder) - 1}}
	rest := len(ladder) - 1
	if rest == 0 {
		return split
	}
	others := make([][]int, min(max(runs, 2)-1, rest))
	pixels := make([]int, len(others))
	for rung := range rest {
		lightest := 0
		for k := range others {
			if pixels[k] < pixels[lightest] {
				lightest = k
			}
		}
		others[lightest] = append(others[lightest], rung)
		pixels[lightest] += ladder[rung].Height * ladder[rung].Height
	}
	order := make([]int, len(others))
	for k := range order {
		order[k] = k
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(pixels[b], pixels[a]) })
	for _, k := range order {
		split = append(split, others[k])
	}
	return split
}

// EncodeRenditions writes rungs (indexes into plan.Ladder) of input's HLS into outDir, each as
// v<rung>/, in one ffmpeg run of their own that decodes the source once: the same encode
// settings and keyframe instants as every other run, so renditions encoded apart, on different
// machines, switch at the same segment boundaries. plan is the source's Plan.
func (e *Encoder) EncodeRenditions(ctx context.Context, input, outDir string, plan Plan, rungs []int, opt RenditionOptions) (RenditionOutput, error) {
	if len(rungs) == 0 {
		return RenditionOutput{}, errors.New("encoder: no rung to encode")
	}
	names := make([]string, len(rungs))
	for k, rung := range rungs {
		if rung < 0 || rung >= len(plan.Ladder) || slices.Contains(rungs[:k], rung) {
			return RenditionOutput{}, fmt.Errorf("encoder: rungs %v of a ladder of %d", rungs, len(plan.Ladder))
		}
		names[k] = strconv.Itoa(plan.Ladder[rung].Height) + "p"
	}
	what := strings.Join(names, "+")
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return RenditionOutput{}, err
	}
	// The audio is encoded in every run, and dropped where it is not wanted: an AAC encoder's
	// priming delay shifts the whole output's timestamps (23 ms at 44.1 kHz), so a run without
	// it would put its keyframes 23 ms before the other runs'.
	run := ffmpegRun{input: input, outDir: outDir, probe: plan.Probe, ladder: plan.Ladder, rungs: rungs,
		audio: plan.Probe.HasAudio}
	if opt.Pictures {
		frames, err := os.MkdirTemp(filepath.Dir(outDir), "storyboard-frames-*")
		if err != nil {
			return RenditionOutput{}, err
		}
		defer os.RemoveAll(frames)
		run.frames, run.board = frames, planStoryboard(plan.Probe)
	}
	niceness := 0
	if opt.Yield {
		niceness = yieldNiceness
	}
	if _, _, err := e.runLogged(ctx, e.cfg.EncodeTimeout, niceness, e.cfg.FFmpeg, e.ffmpegArgs(run)...); err != nil {
		return RenditionOutput{}, fmt.Errorf("encode %s: %w", what, err)
	}
	writeAudio := run.audio && opt.Audio
	if run.audio && !opt.Audio && e.cfg.Format == FormatFMP4 {
		if err := os.RemoveAll(filepath.Join(outDir, audioDir)); err != nil {
			return RenditionOutput{}, err
		}
	}
	parts, start, err := e.packageRungs(ctx, outDir, run.rungs, plan.Probe.HasAudio, writeAudio)
	if err != nil {
		return RenditionOutput{}, fmt.Errorf("package %s: %w", what, err)
	}
	out := RenditionOutput{Parts: parts, StartUS: start}
	if opt.Pictures {
		if err := e.thumbnail(ctx, input, outDir, plan.Probe); err != nil {
			return RenditionOutput{}, err
		}
		out.Thumbnail = thumbnailName
		written, err := e.writeStoryboard(ctx, run.frames, filepath.Join(outDir, storyboardDir), run.board, plan.Probe)
		if err != nil {
			return RenditionOutput{}, fmt.Errorf("storyboard: %w", err)
		}
		if written {
			out.Storyboard = storyboardDir + "/" + storyboardName
		}
	}
	return out, nil
}

// thumbnail writes thumb.jpg into outDir: a frame from a little way in, more telling than the
// first (often black) one.
func (e *Encoder) thumbnail(ctx context.Context, input, outDir string, probe Probe) error {
	at := min(1.0, float64(probe.DurationMS)/2000)
	thumbHeight := min(360, probe.Height&^1)
	thumb := append([]string{"-nostdin", "-v", "error", "-y", "-ss", strconv.FormatFloat(at, 'f', 3, 64)}, e.inputArgs(input)...)
	thumb = append(thumb, "-frames:v", "1", "-vf", fmt.Sprintf("scale=-2:%d", thumbHeight), filepath.Join(outDir, thumbnailName))
	if _, err := e.run(ctx, e.cfg.ThumbnailTimeout, e.cfg.FFmpeg, thumb...); err != nil {
		return fmt.Errorf("thumbnail: %w", err)
	}
	return nil
}

func allRungs(n int) []int {
	rungs := make([]int, n)
	for i := range rungs {
		rungs[i] = i
	}
	return rungs
}

// ffmpegRun is one ffmpeg run of an encode: the rungs of the ladder it writes into outDir,
// whether it writes the audio, and the directory of the storyboard's frames ("" for none).
type ffmpegRun struct {
	input, outDir string
	probe         Probe
	ladder        []Rendition
	rungs         []int
	audio         bool
	frames        string
	board         storyboard
}

// ffmpegArgs is one ffmpeg run (r): the source decoded once, split into each rung's scaler and
// x264 encoder, the audio encoded once (FormatFMP4) or into each rung (FormatTS), HLS written
// by ffmpeg's muxer (whose playlists packageRungs then replaces), and a small frame every
// board.interval for the storyboard.
//
// Keyframes are forced at the same instants in every rendition (every KeyframeSeconds, closed
// GOPs, no scene-cut keyframes), so a player switching renditions at a segment boundary lands
// on a keyframe, whether the renditions were encoded in one run or apart. In FormatFMP4 ffmpeg
// writes one fragment per keyframe into one file per rendition, and the segments served are
// groups of those fragments (hls.Group): a fragment is then the byte range of one I-frame,
// which Apple's I-frame playlists need and ffmpeg's own segments, one fragment each, cannot
// give.
func (e *Encoder) ffmpegArgs(r ffmpegRun) []string {
	n := len(r.rungs)
	outputs := n
	if r.frames != "" {
		outputs++
	}
	var filter strings.Builder
	fmt.Fprintf(&filter, "[0:v]split=%d", outputs)
	for k := range n {
		fmt.Fprintf(&filter, "[s%d]", k)
	}
	if r.frames != "" {
		filter.WriteString("[sb]")
	}
	for k, i := range r.rungs {
		fmt.Fprintf(&filter, ";[s%d]scale=-2:%d,format=yuv420p[v%d]", k, r.ladder[i].Height, k)
	}
	if r.frames != "" {
		fmt.Fprintf(&filter, ";[sb]fps=1/%d,scale=%d:%d:force_original_aspect_ratio=decrease:force_divisible_by=2[board]",
			r.board.interval, storyboardTileBox, storyboardTileBox)
	}
	limit := strconv.FormatFloat(e.outputLimit(r.probe).Seconds(), 'f', 3, 64)
	args := append([]string{"-nostdin", "-v", "error", "-y"}, e.inputArgs(r.input)...)
	args = append(args, "-filter_complex", filter.String())
	args = append(args, e.hlsArgs(r, limit)...)
	if r.frames == "" {
		return args
	}
	// The storyboard's frames: another output of the same run, so the source is decoded once.
	return append(args, "-map", "[board]", "-t", limit, "-c:v", "mjpeg", "-q:v", "3",
		"-f", "image2", "-start_number", "0", filepath.Join(r.frames, "%05d.jpg"))
}

// hlsArgs are the HLS output of r: its rungs' streams and the audio.
func (e *Encoder) hlsArgs(r ffmpegRun, limit string) []string {
	var args []string
	streamMap := make([]string, len(r.rungs))
	for k, i := range r.rungs {
		kbps := r.ladder[i].VideoKbps
		args = append(args, "-map", fmt.Sprintf("[v%d]", k),
			fmt.Sprintf("-b:v:%d", k), fmt.Sprintf("%dk", kbps),
			fmt.Sprintf("-maxrate:v:%d", k), fmt.Sprintf("%dk", kbps*107/100),
			fmt.Sprintf("-bufsize:v:%d", k), fmt.Sprintf("%dk", kbps*3/2))
		streamMap[k] = fmt.Sprintf("v:%d,name:%s", k, variantDir(i))
	}
	fmp4 := e.cfg.Format == FormatFMP4
	if r.audio {
		if fmp4 {
			args = append(args, "-map", "0:a:0", "-b:a:0", fmt.Sprintf("%dk", AudioGroupKbps))
			for k := range streamMap {
				streamMap[k] += ",agroup:audio"
			}
			streamMap = append(streamMap, "a:0,agroup:audio,name:"+audioDir)
		} else {
			for k, i := range r.rungs {
				args = append(args, "-map", "0:a:0", fmt.Sprintf("-b:a:%d", k), fmt.Sprintf("%dk", r.ladder[i].AudioKbps))
				streamMap[k] += fmt.Sprintf(",a:%d", k)
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
			"-hls_segment_filename", filepath.Join(r.outDir, "%v", fmp4MediaName))
	} else {
		args = append(args, "-hls_flags", "independent_segments", "-hls_time", strconv.Itoa(e.cfg.SegmentSeconds),
			"-hls_segment_filename", filepath.Join(r.outDir, "%v", "seg_%03d.ts"))
	}
	return append(args, filepath.Join(r.outDir, "%v", playlistName))
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
