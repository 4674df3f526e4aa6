package captions

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/playhead/playhead/hls"
)

// The files of one caption track, under its folder (Folder).
const (
	// PlaylistName is the track's media playlist, which the master playlist names.
	PlaylistName = "index.m3u8"
	// FileName is the whole normalised WebVTT file, kept beside the segments as what they
	// were cut from.
	FileName = "captions.vtt"
)

// SegmentName is the name of the track's segment i.
func SegmentName(i int) string { return fmt.Sprintf("seg_%05d.vtt", i) }

// legacyTSStartMPEGTS is the start of media from older encodes, whose start is not recorded
// (hls_start_us NULL): ffmpeg's MPEG-TS muxer starts its timestamps at 1.4 s
// (126 000 at 90 kHz), and those encodes were all MPEG-TS.
const legacyTSStartMPEGTS = 126_000

// StartMPEGTS is the 90 kHz time in the video's segments at which cue time 0 is shown: where
// the video starts (startUS, µs), or for media that did not record it (a negative startUS)
// the 1.4 s at which ffmpeg's MPEG-TS outputs start.
func StartMPEGTS(startUS int64) int64 {
	if startUS < 0 {
		return legacyTSStartMPEGTS
	}
	return (startUS*9 + 50) / 100 // µs × 90 000 / 1 000 000, rounded
}

// Track is a caption track cut for HLS: the whole file, its segments on the video's segment
// grid, and its media playlist.
type Track struct {
	File     []byte
	Segments [][]byte
	Playlist []byte
}

// Cut cuts cues into one WebVTT segment per video segment, grid being the video's segment
// durations in order (the EXTINF grid of its media playlists), so that caption segment i
// covers the same stretch as video segment i. Each segment's X-TIMESTAMP-MAP ties cue time 0
// (the start of the video) to mpegts, where the video starts in its segments' timestamps
// (StartMPEGTS): hls.js places a cue at its time plus (MPEGTS − the video's first PTS) / 90 kHz,
// which is its own time when the two agree. A cue that spans a segment boundary is written
// in every segment it touches, as Apple's HLS authoring rules ask (players drop the repeats:
// hls.js by cue time and text). Cue times are those of the whole video, not of the segment.
func Cut(cues []Cue, grid []time.Duration, mpegts int64) (Track, error) {
	if len(grid) == 0 {
		return Track{}, fmt.Errorf("captions: the video has no segments")
	}
	starts := make([]time.Duration, len(grid))
	var at time.Duration
	for i, d := range grid {
		starts[i] = at
		at += d
	}
	// segmentOf is the segment that holds time t; the last one holds everything after it, so
	// a cue past the grid's end (the grid may be a little shorter than the duration) is kept.
	segmentOf := func(t time.Duration) int {
		return sort.Search(len(starts), func(i int) bool { return starts[i] > t }) - 1
	}
	in := make([][]Cue, len(grid))
	for _, c := range cues {
		last := segmentOf(c.End - 1) // End is exclusive
		for i := max(segmentOf(c.Start), 0); i <= last; i++ {
			in[i] = append(in[i], c)
		}
	}
	header := fmt.Sprintf("WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:%d,LOCAL:00:00:00.000\n\n", mpegts)
	t := Track{File: []byte("WEBVTT\n\n" + writeCues(cues)), Segments: make([][]byte, len(grid))}
	playlist := hls.MediaPlaylist{Version: 3}
	for i := range grid {
		t.Segments[i] = []byte(header + writeCues(in[i]))
		playlist.Segments = append(playlist.Segments, hls.Segment{URI: SegmentName(i), Duration: grid[i], Size: int64(len(t.Segments[i]))})
	}
	var err error
	t.Playlist, err = playlist.Marshal()
	return t, err
}

// writeCues writes cues as WebVTT cue blocks: the timing line and the text, escaped so that it
// is read back as the same plain text and nothing else ("&", "<" and ">" as character
// references: no tag, and no "-->" that would end the cue).
func writeCues(cues []Cue) string {
	var b strings.Builder
	for _, c := range cues {
		fmt.Fprintf(&b, "%s --> %s\n%s\n\n", Timestamp(c.Start), Timestamp(c.End), escaper.Replace(c.Text))
	}
	return b.String()
}

var escaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")
