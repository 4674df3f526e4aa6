package encoder

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/playhead/playhead/hls"
)

// aacCodec is the CODECS name of the audio every encode writes: AAC-LC.
const aacCodec = "mp4a.40.2"

// packageRungs replaces the playlists ffmpeg's HLS muxer wrote in outDir for rungs (indexes
// of the ladder, v<i>/) and, when audio, for the separate audio rendition, and returns each
// one's entry of a master playlist (hls.Part) and the video's start time (µs) in the
// segments' timestamps. hasAudio says whether the source has audio: muxed into each rung's
// segments in FormatTS, the separate rendition in FormatFMP4 (written by the run whose audio
// is set).
//
// ffmpeg computes a variant's BANDWIDTH from its target bit rates, and x264's output runs
// above them: a 240p rendition was measured declaring 510 400 bit/s while 5 of its 7 segments
// carried up to 527 152, so players choosing renditions by BANDWIDTH would under-estimate.
// Here every rate is measured from the segments as written (hls.PeakRate, RFC 8216 4.3.4.2),
// and in FormatFMP4 the 2-second fragments ffmpeg wrote become 6-second segments and the I-frame
// playlists' byte ranges.
func (e *Encoder) packageRungs(ctx context.Context, outDir string, rungs []int, hasAudio, audio bool) ([]hls.Part, int64, error) {
	fmp4 := e.cfg.Format == FormatFMP4
	version := 3
	if fmp4 {
		version = 7
	}
	var parts []hls.Part
	if fmp4 && audio {
		media, _, err := e.regroup(outDir, audioDir)
		if err != nil {
			return nil, 0, fmt.Errorf("audio: %w", err)
		}
		peak, average := peakAndAverage(media)
		parts = append(parts, hls.Part{Audio: &hls.Rendition{Type: "AUDIO", GroupID: "audio", Name: "Audio",
			Default: true, Autoselect: true, Channels: "2", URI: audioDir + "/" + playlistName},
			Peak: peak, Average: average, Version: version})
	}
	start := int64(-1)
	for _, i := range rungs {
		dir := variantDir(i)
		var media, fragments hls.MediaPlaylist
		var err error
		if fmp4 {
			media, fragments, err = e.regroup(outDir, dir)
		} else {
			media, err = e.measureFiles(outDir, dir)
		}
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %w", dir, err)
		}
		first := filepath.Join(outDir, dir, media.Segments[0].URI)
		video, err := e.probeRendition(ctx, first)
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %w", dir, err)
		}
		if start < 0 {
			start = video.startUS
		}
		peak, average := peakAndAverage(media)
		v := hls.Variant{URI: dir + "/" + playlistName, Codecs: []string{video.codec},
			Width: video.width, Height: video.height, FrameRate: video.frameRate}
		if hasAudio {
			// Muxed into the segments (FormatTS, measured with them), or the separate
			// rendition whose rates hls.Assemble adds.
			v.Codecs = append(v.Codecs, aacCodec)
			if fmp4 {
				v.Audio = "audio"
			}
		}
		part := hls.Part{Video: &v, Peak: peak, Average: average, Version: version}
		if fmp4 {
			iframes, err := e.iframePlaylist(ctx, outDir, dir, fragments)
			if err != nil {
				return nil, 0, fmt.Errorf("%s: i-frames: %w", dir, err)
			}
			iPeak, iAverage := peakAndAverage(iframes)
			part.IFrames = &hls.IFrameVariant{URI: dir + "/" + iframesName,
				Bandwidth: hls.BitsPerSecond(iPeak), AverageBandwidth: hls.BitsPerSecond(iAverage),
				Codecs: []string{video.codec}, Width: video.width, Height: video.height}
		}
		parts = append(parts, part)
	}
	return parts, start, nil
}

func peakAndAverage(p hls.MediaPlaylist) (peak, average *big.Rat) {
	return hls.PeakRate(p.Segments, time.Duration(p.TargetDuration())*time.Second), hls.AverageRate(p.Segments)
}

func writePlaylist(path string, marshal func() ([]byte, error)) error {
	b, err := marshal()
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// readMuxerPlaylist reads the media playlist ffmpeg's muxer wrote in dir.
func readMuxerPlaylist(outDir, dir string) (hls.MediaPlaylist, error) {
	b, err := os.ReadFile(filepath.Join(outDir, dir, playlistName))
	if err != nil {
		return hls.MediaPlaylist{}, err
	}
	return hls.ParseMedia(b)
}

// regroup turns the 2-second fragments of dir's fMP4 rendition (parts, as the muxer listed
// them) into segments of the target duration and writes its media playlist.
func (e *Encoder) regroup(outDir, dir string) (media, parts hls.MediaPlaylist, err error) {
	if parts, err = readMuxerPlaylist(outDir, dir); err != nil {
		return media, parts, err
	}
	if parts.Map == nil {
		return media, parts, errors.New("the muxer wrote no EXT-X-MAP")
	}
	segs, err := hls.Group(parts.Segments, time.Duration(e.cfg.SegmentSeconds)*time.Second)
	if err != nil {
		return media, parts, err
	}
	media = hls.MediaPlaylist{Version: 7, Independent: true, Map: parts.Map, Segments: segs}
	return media, parts, writePlaylist(filepath.Join(outDir, dir, playlistName), media.Marshal)
}

// measureFiles gives each MPEG-TS segment of dir its file's size and writes its media
// playlist.
func (e *Encoder) measureFiles(outDir, dir string) (hls.MediaPlaylist, error) {
	media, err := readMuxerPlaylist(outDir, dir)
	if err != nil {
		return hls.MediaPlaylist{}, err
	}
	for i := range media.Segments {
		fi, err := os.Stat(filepath.Join(outDir, dir, filepath.FromSlash(media.Segments[i].URI)))
		if err != nil {
			return hls.MediaPlaylist{}, err
		}
		media.Segments[i].Size = fi.Size()
	}
	media.Version, media.Independent = 3, true
	return media, writePlaylist(filepath.Join(outDir, dir, playlistName), media.Marshal)
}

// iframePlaylist writes dir's I-frame playlist: one entry per fragment of parts, the byte range
// from the fragment's start (its sidx and moof) to the end of its first sample, the keyframe
// that begins it. A fragment that does not begin with a keyframe is an error: every segment
// served must start with one.
func (e *Encoder) iframePlaylist(ctx context.Context, outDir, dir string, parts hls.MediaPlaylist) (hls.MediaPlaylist, error) {
	file := filepath.Join(outDir, dir, fmp4MediaName)
	out, err := e.run(ctx, e.cfg.ProbeTimeout, e.cfg.FFprobe, "-v", "error", "-select_streams", "v:0",
		"-show_entries", "packet=pos,size,flags", "-of", "compact=p=0", file)
	if err != nil {
		return hls.MediaPlaylist{}, err
	}
	packets, err := parsePackets(out)
	if err != nil {
		return hls.MediaPlaylist{}, err
	}
	iframes := hls.MediaPlaylist{Version: 7, IFramesOnly: true, Map: parts.Map}
	next := 0
	for i, part := range parts.Segments {
		for next < len(packets) && packets[next].pos < part.Range.Offset {
			next++
		}
		end := part.Range.Offset + part.Range.Length
		if next == len(packets) || packets[next].pos >= end {
			return hls.MediaPlaylist{}, fmt.Errorf("fragment %d holds no video", i)
		}
		k := packets[next]
		if !k.key || k.pos+k.size > end {
			return hls.MediaPlaylist{}, fmt.Errorf("fragment %d does not begin with a keyframe", i)
		}
		length := k.pos + k.size - part.Range.Offset
		iframes.Segments = append(iframes.Segments, hls.Segment{URI: part.URI, Duration: part.Duration,
			Range: hls.ByteRange{Offset: part.Range.Offset, Length: length}, Size: length})
	}
	return iframes, writePlaylist(filepath.Join(outDir, dir, iframesName), iframes.Marshal)
}

type packet struct {
	pos, size int64
	key       bool
}

// parsePackets reads ffprobe's compact "size=…|pos=…|flags=K_" lines.
func parsePackets(out []byte) ([]packet, error) {
	var packets []packet
	for line := range bytes.Lines(out) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		p := packet{pos: -1, size: -1}
		for field := range bytes.SplitSeq(line, []byte("|")) {
			name, value, _ := bytes.Cut(field, []byte("="))
			switch string(name) {
			case "pos":
				p.pos, _ = strconv.ParseInt(string(value), 10, 64)
			case "size":
				p.size, _ = strconv.ParseInt(string(value), 10, 64)
			case "flags":
				p.key = bytes.HasPrefix(value, []byte("K"))
			}
		}
		if p.pos < 0 || p.size <= 0 {
			return nil, fmt.Errorf("ffprobe packet %q has no position or size", line)
		}
		packets = append(packets, p)
	}
	return packets, nil
}

// renditionInfo is what the master playlist says of a video rendition, read from its output.
type renditionInfo struct {
	width, height int
	frameRate     float64
	codec         string // CODECS, "avc1.64001f"
	startUS       int64
}

// probeRendition reads the size, frame rate, codec profile and start time of an encoded
// rendition's video from file (its media, or its first segment).
func (e *Encoder) probeRendition(ctx context.Context, file string) (renditionInfo, error) {
	out, err := e.run(ctx, e.cfg.ProbeTimeout, e.cfg.FFprobe, "-v", "error", "-select_streams", "v:0",
		"-show_entries", "stream=width,height,avg_frame_rate,start_time,extradata", "-show_data", "-of", "json", file)
	if err != nil {
		return renditionInfo{}, err
	}
	var doc struct {
		Streams []struct {
			Width        int    `json:"width"`
			Height       int    `json:"height"`
			AvgFrameRate string `json:"avg_frame_rate"`
			StartTime    string `json:"start_time"`
			Extradata    string `json:"extradata"`
		} `json:"streams"`
	}
	if err := json.Unmarshal(out, &doc); err != nil || len(doc.Streams) != 1 {
		return renditionInfo{}, fmt.Errorf("unreadable ffprobe output of %s: %v", filepath.Base(file), err)
	}
	s := doc.Streams[0]
	codec, err := avcCodec(hexDump(s.Extradata))
	if err != nil {
		return renditionInfo{}, err
	}
	startSecs, err := strconv.ParseFloat(s.StartTime, 64)
	if err != nil {
		return renditionInfo{}, fmt.Errorf("no start time: %q", s.StartTime)
	}
	return renditionInfo{width: s.Width, height: s.Height, frameRate: frameRate(s.AvgFrameRate), codec: codec,
		startUS: int64(startSecs*1e6 + 0.5)}, nil
}

// hexDump reads the bytes of ffprobe's -show_data dump: lines of "00000000: 0164 001f …  ascii".
func hexDump(dump string) []byte {
	var out []byte
	for line := range strings.Lines(dump) {
		_, rest, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		hexPart, _, _ := strings.Cut(rest, "  ") // the ASCII column follows two spaces
		b, err := hex.DecodeString(strings.ReplaceAll(hexPart, " ", ""))
		if err != nil {
			return nil
		}
		out = append(out, b...)
	}
	return out
}

// avcCodec is the RFC 6381 name of an H.264 stream ("avc1.PPCCLL": profile, constraint flags,
// level), read from its decoder configuration: an avcC record (MP4) or the SPS of an Annex B
// stream (MPEG-TS).
func avcCodec(extradata []byte) (string, error) {
	sps := []byte(nil)
	switch {
	case len(extradata) >= 4 && extradata[0] == 1: // avcC: version 1, then profile, flags, level
		sps = extradata[1:4]
	default:
		for i := 0; i+4 < len(extradata); i++ {
			if extradata[i] == 0 && extradata[i+1] == 0 && extradata[i+2] == 1 && extradata[i+3]&0x1f == 7 {
				if i+7 <= len(extradata) {
					sps = extradata[i+4 : i+7]
				}
				break
			}
		}
	}
	if sps == nil {
		return "", errors.New("no H.264 decoder configuration in the output")
	}
	return fmt.Sprintf("avc1.%02x%02x%02x", sps[0], sps[1], sps[2]), nil
}
