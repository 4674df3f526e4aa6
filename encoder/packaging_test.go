package encoder_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/playhead/playhead/encoder"
	"github.com/playhead/playhead/hls"
	"github.com/playhead/playhead/internal/testvideo"
)

// The playlists as hls-parser (encoder/testdata/hls-parse.mjs) read them.
type (
	parsedRange struct{ Length, Offset int64 }
	parsedSeg   struct {
		URI       string       `json:"uri"`
		Duration  json.Number  `json:"duration"`
		Byterange *parsedRange `json:"byterange"`
		Map       *struct {
			URI       string       `json:"uri"`
			Byterange *parsedRange `json:"byterange"`
		} `json:"map"`
	}
	parsedMedia struct {
		URI            string      `json:"uri"`
		TargetDuration int         `json:"targetDuration"`
		IFramesOnly    bool        `json:"iFramesOnly"`
		Endlist        bool        `json:"endlist"`
		Segments       []parsedSeg `json:"segments"`
	}
	parsedVariant struct {
		URI              string  `json:"uri"`
		IFrameOnly       bool    `json:"iFrameOnly"`
		Bandwidth        int64   `json:"bandwidth"`
		AverageBandwidth int64   `json:"averageBandwidth"`
		Codecs           string  `json:"codecs"`
		Width            int     `json:"width"`
		Height           int     `json:"height"`
		FrameRate        float64 `json:"frameRate"`
		Audio            []struct {
			GroupID string `json:"groupId"`
			URI     string `json:"uri"`
		} `json:"audio"`
	}
	parsedHLS struct {
		Version             int                    `json:"version"`
		IndependentSegments bool                   `json:"independentSegments"`
		Variants            []parsedVariant        `json:"variants"`
		Playlists           map[string]parsedMedia `json:"playlists"`
	}
)

// TestEncoder_PlayerGradeHLS: generated sources (1080p30 with audio, 720p60, 4:3, no audio, a
// 3 s clip, the MPEG-TS format, and a hard scene cut between keyframes encoded with the
// production preset) are encoded, every playlist is parsed by hls-parser in strict mode (a
// third-party parser, from npm), and then checked against what was written: BANDWIDTH at
// least the RFC 8216 peak and AVERAGE-BANDWIDTH the mean of the segments of the variant with
// its audio (exactly, rounded up once), keyframes at the same instants in every rendition every 2 s, every segment
// beginning with a keyframe, target durations kept, each I-frame decoding alone, the audio
// group there exactly when the source has audio, and the storyboard covering the video.
func TestEncoder_PlayerGradeHLS(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is required (make deps): the playlists are checked with hls-parser from npm")
	}
	if _, err := os.Stat(filepath.Join("..", "node_modules", "hls-parser", "package.json")); err != nil {
		t.Fatal("hls-parser from package-lock.json is not installed: run `make web` (npm ci in the repository's root)")
	}
	for _, tc := range []struct {
		name   string
		spec   testvideo.Spec
		format encoder.Format
		// sceneCut makes the source cut to another picture at 3 s, between two of the 2 s
		// keyframes, and encodes it with the production preset (ultrafast never places
		// scene-cut keyframes: its scenecut is 0).
		sceneCut bool
		// runs, when not 0, encodes the ladder in that many ffmpeg runs of their own as an
		// encode group's jobs do (SplitLadder, EncodeRenditions, the lowest rung alone with
		// the audio and the pictures) and assembles the master from their parts
		// (hls.Assemble): the same checks hold, keyframes aligned across the runs included.
		runs int
	}{
		{"1080p30Audio", testvideo.Spec{Seconds: 13, Width: 1920, Height: 1080, FPS: 30, Audio: true}, encoder.FormatFMP4, false, 0},
		{"720p60", testvideo.Spec{Seconds: 9, Width: 1280, Height: 720, FPS: 60, Audio: true}, encoder.FormatFMP4, false, 0},
		{"FourByThree", testvideo.Spec{Seconds: 9, Width: 640, Height: 480, Audio: true}, encoder.FormatFMP4, false, 0},
		{"NoAudio", testvideo.Spec{Seconds: 9, Width: 854, Height: 480}, encoder.FormatFMP4, false, 0},
		{"Clip3s", testvideo.Spec{Seconds: 3, Width: 1280, Height: 720, FPS: 30, Audio: true}, encoder.FormatFMP4, false, 0},
		{"MPEGTS", testvideo.Spec{Seconds: 13, Width: 1280, Height: 720, FPS: 30, Audio: true}, encoder.FormatTS, false, 0},
		{"SceneCut", testvideo.Spec{Seconds: 7, Width: 640, Height: 360}, encoder.FormatFMP4, true, 0},
		{"1080p30AudioRunPerRung", testvideo.Spec{Seconds: 13, Width: 1920, Height: 1080, FPS: 30, Audio: true}, encoder.FormatFMP4, false, len(encoder.Ladder)},
		{"MPEGTSTwoRuns", testvideo.Spec{Seconds: 9, Width: 854, Height: 480, FPS: 30, Audio: true}, encoder.FormatTS, false, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			input, preset := testvideo.MP4(t, dir, tc.spec), "ultrafast"
			if tc.sceneCut {
				input, preset = sceneCutSource(t, dir, tc.spec), "veryfast"
			}
			e, err := encoder.New(encoder.Config{Preset: preset, Format: tc.format})
			if err != nil {
				t.Fatal(err)
			}
			outDir := filepath.Join(dir, "out")
			encode := e.Encode
			if tc.runs > 0 {
				encode = func(ctx context.Context, input, outDir string) (encoder.Output, error) {
					return encodeApart(e, input, outDir, tc.runs)
				}
			}
			res, err := encode(context.Background(), input, outDir)
			if err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(node, filepath.Join("testdata", "hls-parse.mjs"), outDir).CombinedOutput()
			if err != nil {
				t.Fatalf("hls-parser (strict) refused the playlists: %v\n%s", err, out)
			}
			var doc parsedHLS
			dec := json.NewDecoder(bytes.NewReader(out))
			dec.UseNumber()
			if err := dec.Decode(&doc); err != nil {
				t.Fatal(err)
			}
			c := packagingCheck{t: t, dir: outDir, doc: doc, spec: tc.spec, fmp4: tc.format == encoder.FormatFMP4, packets: map[string][]videoPacket{}}
			c.master(res)
			c.keyframes()
			c.storyboard(res)
		})
	}
}

// encodeApart encodes input as an encode group's jobs would, in runs ffmpeg runs split by
// SplitLadder, each into a folder of its own under outDir (r<k>/ for the k-th run, as each job
// has its claim's), with the master assembled from their parts.
func encodeApart(e *encoder.Encoder, input, outDir string, runs int) (encoder.Output, error) {
	ctx := context.Background()
	plan, err := e.Plan(ctx, input)
	if err != nil {
		return encoder.Output{}, err
	}
	res := encoder.Output{Probe: plan.Probe, Renditions: plan.Ladder, Master: "master.m3u8", StartUS: -1}
	var parts []hls.Part
	for k, rungs := range encoder.SplitLadder(plan.Ladder, runs) {
		first := k == 0
		folder := fmt.Sprintf("r%d", k)
		out, err := e.EncodeRenditions(ctx, input, filepath.Join(outDir, folder), plan, rungs, encoder.RenditionOptions{Audio: first, Pictures: first})
		if err != nil {
			return encoder.Output{}, err
		}
		for _, p := range out.Parts {
			parts = append(parts, p.Within(folder))
		}
		if slices.Contains(rungs, 0) {
			res.StartUS = out.StartUS
		}
		if first {
			res.Thumbnail, res.Storyboard = folder+"/"+out.Thumbnail, folder+"/"+out.Storyboard
		}
	}
	master, _ := hls.Assemble(parts)
	b, err := master.Marshal()
	if err != nil {
		return encoder.Output{}, err
	}
	return res, os.WriteFile(filepath.Join(outDir, res.Master), b, 0o644)
}

// sceneCutSource writes a source of spec (no audio) whose picture cuts from testsrc2 to another
// pattern at 3 s: x264 would place a keyframe at the cut unless scene-cut detection is off.
func sceneCutSource(t *testing.T, dir string, spec testvideo.Spec) string {
	t.Helper()
	out := filepath.Join(dir, "scene-cut.mp4")
	size, fps := fmt.Sprintf("%dx%d", spec.Width, spec.Height), cmpOr(spec.FPS, 25)
	cmd := exec.Command("ffmpeg", "-nostdin", "-v", "error", "-y",
		"-f", "lavfi", "-i", fmt.Sprintf("testsrc2=size=%s:rate=%d:duration=3", size, fps),
		"-f", "lavfi", "-i", fmt.Sprintf("mandelbrot=size=%s:rate=%d", size, fps),
		"-filter_complex", fmt.Sprintf("[1:v]trim=duration=%d,setpts=PTS-STARTPTS[b];[0:v][b]concat=n=2:v=1[v]", spec.Seconds-3),
		"-map", "[v]", "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg (scene-cut source): %v\n%s", err, b)
	}
	return out
}

type packagingCheck struct {
	t       *testing.T
	dir     string
	doc     parsedHLS
	spec    testvideo.Spec
	fmp4    bool
	packets map[string][]videoPacket // by file, read once
}

func (c *packagingCheck) master(res encoder.Output) {
	t := c.t
	if !c.doc.IndependentSegments {
		t.Error("the master playlist lacks EXT-X-INDEPENDENT-SEGMENTS")
	}
	if want := map[bool]int{true: 7, false: 3}[c.fmp4]; c.doc.Version != want {
		t.Errorf("EXT-X-VERSION %d, want %d", c.doc.Version, want)
	}
	var videos, iframes []parsedVariant
	for _, v := range c.doc.Variants {
		if v.IFrameOnly {
			iframes = append(iframes, v)
		} else {
			videos = append(videos, v)
		}
	}
	if len(videos) != len(res.Renditions) {
		t.Fatalf("%d variants, want one per rendition (%d)", len(videos), len(res.Renditions))
	}
	if want := map[bool]int{true: len(videos), false: 0}[c.fmp4]; len(iframes) != want {
		t.Errorf("%d I-frame variants, want %d", len(iframes), want)
	}
	fps := float64(cmpOr(c.spec.FPS, 25))
	for i, v := range videos {
		// The width keeps the source's aspect, rounded to an even number of pixels.
		if wantWidth := float64(c.spec.Width*v.Height) / float64(c.spec.Height); v.Height != res.Renditions[i].Height || math.Abs(float64(v.Width)-wantWidth) > 2 {
			t.Errorf("%s: RESOLUTION %dx%d, want %dp with the source's aspect", v.URI, v.Width, v.Height, res.Renditions[i].Height)
		}
		if math.Abs(v.FrameRate-fps) > 0.01 {
			t.Errorf("%s: FRAME-RATE %v, want %v", v.URI, v.FrameRate, fps)
		}
		if !regexp.MustCompile(`^avc1\.[0-9a-f]{6}(,mp4a\.40\.2)?$`).MatchString(v.Codecs) || strings.Contains(v.Codecs, "mp4a") != c.spec.Audio {
			t.Errorf("%s: CODECS %q (source audio: %v)", v.URI, v.Codecs, c.spec.Audio)
		}
		video := c.media(v.URI)
		peak, average := c.rates(video)
		switch {
		case c.fmp4 && c.spec.Audio:
			if len(v.Audio) != 1 || path.Base(path.Dir(v.Audio[0].URI))+"/"+path.Base(v.Audio[0].URI) != "audio/index.m3u8" {
				t.Fatalf("%s: audio group %+v, want the one AAC rendition", v.URI, v.Audio)
			}
			audioPeak, audioAverage := c.rates(c.media(v.Audio[0].URI))
			peak.Add(peak, audioPeak)
			average.Add(average, audioAverage)
		case len(v.Audio) != 0:
			t.Errorf("%s: audio group %+v, want none (no audio, or muxed in MPEG-TS)", v.URI, v.Audio)
		}
		c.bandwidth(v, peak, average)
		c.keyframesBeginSegments(video)
	}
	for _, v := range iframes {
		p := c.media(v.URI)
		if !p.IFramesOnly {
			t.Errorf("%s is not EXT-X-I-FRAMES-ONLY", v.URI)
		}
		peak, average := c.rates(p)
		c.bandwidth(v, peak, average)
		c.iframesDecode(p)
	}
}

// bandwidth holds BANDWIDTH to at least the peak, with no tolerance, and AVERAGE-BANDWIDTH to
// the mean rounded up once.
func (c *packagingCheck) bandwidth(v parsedVariant, peak, average *big.Rat) {
	if big.NewRat(v.Bandwidth, 1).Cmp(peak) < 0 {
		c.t.Errorf("%s: BANDWIDTH %d is below the peak segment bit rate %s", v.URI, v.Bandwidth, peak.FloatString(3))
	}
	if want := ceilRat(average); v.AverageBandwidth != want {
		c.t.Errorf("%s: AVERAGE-BANDWIDTH %d, want the mean %s rounded up, %d", v.URI, v.AverageBandwidth, average.FloatString(3), want)
	}
}

func (c *packagingCheck) media(uri string) parsedMedia {
	p, ok := c.doc.Playlists[uri]
	if !ok {
		c.t.Fatalf("playlist %s was not parsed", uri)
	}
	if !p.Endlist || len(p.Segments) == 0 {
		c.t.Fatalf("%s: no segments or no EXT-X-ENDLIST", uri)
	}
	longest := 0
	for _, s := range p.Segments {
		d, _ := strconv.ParseFloat(s.Duration.String(), 64)
		longest = max(longest, int(math.Round(d)))
	}
	if p.TargetDuration != longest {
		c.t.Errorf("%s: EXT-X-TARGETDURATION %d, want the longest segment rounded, %d", uri, p.TargetDuration, longest)
	}
	if !p.IFramesOnly && len(p.Segments) > 1 && p.TargetDuration != 6 {
		c.t.Errorf("%s: target duration %d, want 6", uri, p.TargetDuration)
	}
	return p
}

// rates computes a media playlist's peak segment bit rate as RFC 8216 4.3.4.2 defines it (the
// largest rate of any run of consecutive segments lasting 0.5 to 1.5 target durations) and its
// average, exactly, from the sizes of the bytes the segments name.
func (c *packagingCheck) rates(p parsedMedia) (peak, average *big.Rat) {
	sizes := make([]int64, len(p.Segments))
	durations := make([]*big.Rat, len(p.Segments))
	total, totalBytes := new(big.Rat), int64(0)
	for i, s := range p.Segments {
		if s.Byterange != nil {
			sizes[i] = s.Byterange.Length
		} else {
			fi, err := os.Stat(filepath.Join(c.dir, s.URI))
			if err != nil {
				c.t.Fatal(err)
			}
			sizes[i] = fi.Size()
		}
		d, ok := new(big.Rat).SetString(s.Duration.String())
		if !ok {
			c.t.Fatalf("%s: duration %q", p.URI, s.Duration)
		}
		durations[i] = d
		total.Add(total, d)
		totalBytes += sizes[i]
	}
	target := big.NewRat(int64(p.TargetDuration), 1)
	lo, hi := new(big.Rat).Mul(target, big.NewRat(1, 2)), new(big.Rat).Mul(target, big.NewRat(3, 2))
	bitRate := func(bytes int64, d *big.Rat) *big.Rat { return new(big.Rat).Quo(big.NewRat(bytes*8, 1), d) }
	peak = new(big.Rat)
	for i := range p.Segments {
		d, b := new(big.Rat), int64(0)
		for j := i; j < len(p.Segments); j++ {
			d.Add(d, durations[j])
			b += sizes[j]
			if d.Cmp(lo) >= 0 && d.Cmp(hi) <= 0 {
				if r := bitRate(b, d); r.Cmp(peak) > 0 {
					peak = r
				}
			}
		}
	}
	return peak, bitRate(totalBytes, total)
}

func ceilRat(r *big.Rat) int64 {
	q, m := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if m.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	return q.Int64()
}

func cmpOr(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// videoPackets lists the video packets of a rendition file: presentation time, position,
// keyframe.
type videoPacket struct {
	pts float64
	pos int64
	key bool
}

func (c *packagingCheck) videoPackets(uri string) []videoPacket {
	if p, ok := c.packets[uri]; ok {
		return p
	}
	t, file := c.t, filepath.Join(c.dir, uri)
	t.Helper()
	out, err := exec.Command("ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "packet=pts_time,pos,flags",
		"-of", "compact=p=0", file).Output()
	if err != nil {
		t.Fatalf("ffprobe %s: %v", file, err)
	}
	var packets []videoPacket
	for line := range strings.Lines(string(out)) {
		var p videoPacket
		for field := range strings.SplitSeq(strings.TrimSpace(line), "|") {
			name, value, _ := strings.Cut(field, "=")
			switch name {
			case "pts_time":
				p.pts, _ = strconv.ParseFloat(value, 64)
			case "pos":
				p.pos, _ = strconv.ParseInt(value, 10, 64)
			case "flags":
				p.key = strings.HasPrefix(value, "K")
			}
		}
		packets = append(packets, p)
	}
	c.packets[uri] = packets
	return packets
}

// keyframesBeginSegments: the first video packet of every segment (at its byte offset, or of
// its file) is a keyframe.
func (c *packagingCheck) keyframesBeginSegments(p parsedMedia) {
	for i, s := range p.Segments {
		packets := c.videoPackets(s.URI)
		var first *videoPacket
		for j := range packets {
			if s.Byterange == nil || packets[j].pos >= s.Byterange.Offset {
				first = &packets[j]
				break
			}
		}
		if first == nil || !first.key {
			c.t.Errorf("%s: segment %d does not begin with a keyframe", p.URI, i)
		}
	}
}

// keyframes: every rendition has its keyframes at the same instants, one every 2 s.
func (c *packagingCheck) keyframes() {
	var want []float64
	for _, v := range c.doc.Variants {
		if v.IFrameOnly {
			continue
		}
		var got []float64
		seen := map[string]bool{}
		for _, s := range c.media(v.URI).Segments {
			if seen[s.URI] {
				continue
			}
			seen[s.URI] = true
			for _, p := range c.videoPackets(s.URI) {
				if p.key {
					got = append(got, p.pts)
				}
			}
		}
		for i := 1; i < len(got); i++ {
			if step := got[i] - got[i-1]; math.Abs(step-2) > 1.0/float64(cmpOr(c.spec.FPS, 25)) {
				c.t.Errorf("%s: keyframes %v and %v are %.3f s apart, want 2 s", v.URI, got[i-1], got[i], step)
			}
		}
		if want == nil {
			want = got
			continue
		}
		if len(got) != len(want) {
			c.t.Fatalf("%s: keyframes at %v, the first rendition's at %v", v.URI, got, want)
		}
		for i := range got {
			if math.Abs(got[i]-want[i]) > 0.001 {
				c.t.Errorf("%s: keyframe %d at %.3f s, the first rendition's at %.3f s", v.URI, i, got[i], want[i])
			}
		}
	}
	if len(want) < c.spec.Seconds/2 {
		c.t.Errorf("keyframes at %v, want one every 2 s of %d s", want, c.spec.Seconds)
	}
}

// iframesDecode: each I-frame, its initialization section followed by its byte range alone,
// decodes to exactly one keyframe.
func (c *packagingCheck) iframesDecode(p parsedMedia) {
	for i, s := range p.Segments {
		if s.Map == nil || s.Map.Byterange == nil || s.Byterange == nil {
			c.t.Fatalf("%s: I-frame %d has no EXT-X-MAP byte range or no byte range", p.URI, i)
		}
		file, err := os.ReadFile(filepath.Join(c.dir, s.URI))
		if err != nil {
			c.t.Fatal(err)
		}
		alone := append(bytes.Clone(file[s.Map.Byterange.Offset:s.Map.Byterange.Offset+s.Map.Byterange.Length]),
			file[s.Byterange.Offset:s.Byterange.Offset+s.Byterange.Length]...)
		path := filepath.Join(c.t.TempDir(), fmt.Sprintf("iframe-%d.mp4", i))
		if err := os.WriteFile(path, alone, 0o644); err != nil {
			c.t.Fatal(err)
		}
		// One line per decoded frame, "1" for a keyframe. The byte range ends with the I-frame,
		// before the rest of its fragment's mdat, so the demuxer says "partial file", as it
		// must: that is what an I-frame segment is.
		cmd := exec.Command("ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "frame=key_frame", "-of", "json", path)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		var frames struct {
			Frames []struct {
				KeyFrame int `json:"key_frame"`
			} `json:"frames"`
		}
		if err == nil {
			err = json.Unmarshal(out, &frames)
		}
		complaints := regexp.MustCompile(`(?m)^.*partial file\n?`).ReplaceAllString(stderr.String(), "")
		if err != nil || len(frames.Frames) != 1 || frames.Frames[0].KeyFrame != 1 || complaints != "" {
			c.t.Errorf("%s: I-frame %d alone decodes to frames %s (%v; %s), want one keyframe", p.URI, i, out, err, complaints)
		}
	}
}

var storyboardCue = regexp.MustCompile(`(?m)^(\d\d):(\d\d):(\d\d)\.(\d{3}) --> (\d\d):(\d\d):(\d\d)\.(\d{3})\n(sprite_\d{3}\.jpg)#xywh=(\d+),(\d+),(\d+),(\d+)$`)

// storyboard: the WebVTT's cues follow each other from 0 to the end of the video, each a tile
// inside a sprite that exists.
func (c *packagingCheck) storyboard(res encoder.Output) {
	t := c.t
	if res.Storyboard == "" {
		t.Fatal("no storyboard")
	}
	vtt, err := os.ReadFile(filepath.Join(c.dir, res.Storyboard))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(vtt, []byte("WEBVTT\n")) {
		t.Fatalf("storyboard %q is not WebVTT", vtt)
	}
	ms := func(h, m, s, f string) int64 {
		hh, _ := strconv.ParseInt(h, 10, 64)
		mm, _ := strconv.ParseInt(m, 10, 64)
		ss, _ := strconv.ParseInt(s, 10, 64)
		ff, _ := strconv.ParseInt(f, 10, 64)
		return ((hh*60+mm)*60+ss)*1000 + ff
	}
	cues := storyboardCue.FindAllStringSubmatch(string(vtt), -1)
	if len(cues) < c.spec.Seconds {
		t.Fatalf("%d storyboard cues for %d s at one a second:\n%s", len(cues), c.spec.Seconds, vtt)
	}
	sizes := map[string][2]int{}
	var end int64
	for i, cue := range cues {
		start, stop := ms(cue[1], cue[2], cue[3], cue[4]), ms(cue[5], cue[6], cue[7], cue[8])
		if start != end || stop <= start {
			t.Errorf("cue %d runs %d–%d ms, want it to start where the last ended (%d)", i, start, stop, end)
		}
		end = stop
		sprite := filepath.Join(c.dir, filepath.Dir(res.Storyboard), cue[9])
		size, ok := sizes[sprite]
		if !ok {
			out, err := exec.Command("ffprobe", "-v", "error", "-show_entries", "stream=width,height", "-of", "csv=p=0", sprite).Output()
			if err != nil {
				t.Fatalf("sprite %s: %v", cue[9], err)
			}
			w, h, _ := strings.Cut(strings.TrimSpace(string(out)), ",")
			size[0], _ = strconv.Atoi(w)
			size[1], _ = strconv.Atoi(h)
			sizes[sprite] = size
		}
		x, _ := strconv.Atoi(cue[10])
		y, _ := strconv.Atoi(cue[11])
		w, _ := strconv.Atoi(cue[12])
		h, _ := strconv.Atoi(cue[13])
		if w <= 0 || h <= 0 || w > 160 || h > 160 || x+w > size[0] || y+h > size[1] {
			t.Errorf("cue %d: tile %d,%d,%d,%d outside its %dx%d sprite", i, x, y, w, h, size[0], size[1])
		}
	}
	if duration := res.Probe.DurationMS; end != duration {
		t.Errorf("the storyboard ends at %d ms, the video at %d", end, duration)
	}
}
