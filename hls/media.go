// Package hls writes the HLS playlists of an encode (RFC 8216): media playlists, I-frame
// playlists and the master playlist, with BANDWIDTH and AVERAGE-BANDWIDTH measured from the
// segments as written, never from a target bit rate. It also reads the media playlists ffmpeg's
// HLS muxer writes, which the encoder regroups into the segments it serves.
//
// The playlists are written here rather than by a library: the few tags an encode needs are
// plain lines, and what matters (exact durations, measured rates, quoted strings that cannot
// break out of their attribute) is easier to see in forty lines than to verify in someone
// else's writer. Third-party parsers check the result in the encoder's tests.
package hls

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ByteRange is a part of a file: Length bytes from Offset (EXT-X-BYTERANGE). A zero Length
// means the whole file.
type ByteRange struct {
	Length, Offset int64
}

// Segment is one media segment of a media playlist.
type Segment struct {
	URI string
	// Duration is the EXTINF duration, to the microsecond (as it is written).
	Duration time.Duration
	// Range is where the segment is within URI; zero for a whole file.
	Range ByteRange
	// Size is the segment's size in bytes, what its bit rate is measured from: Range.Length,
	// or the file's size for a whole file.
	Size int64
}

// Map is the Media Initialization Section of a media playlist (EXT-X-MAP).
type Map struct {
	URI   string
	Range ByteRange
}

// MediaPlaylist is a VOD media playlist: its segments, all present.
type MediaPlaylist struct {
	// Version is EXT-X-VERSION: 7 for fMP4 (EXT-X-MAP in a playlist that is not I-frames
	// only needs 6), 4 for byte ranges, 3 otherwise.
	Version int
	// Independent writes EXT-X-INDEPENDENT-SEGMENTS: every segment starts with a keyframe.
	Independent bool
	// IFramesOnly makes this an I-frame playlist: each segment is one keyframe.
	IFramesOnly bool
	Map         *Map
	Segments    []Segment
}

// TargetDuration is EXT-X-TARGETDURATION: the longest segment rounded to the nearest second
// (RFC 8216 4.3.3.1), at least 1.
func (p *MediaPlaylist) TargetDuration() int {
	target := 1
	for _, s := range p.Segments {
		target = max(target, int((s.Duration+time.Second/2)/time.Second))
	}
	return target
}

// Marshal writes the playlist. EXT-X-MAP's attributes are written by QuotedAttribute and the
// segments' URI lines checked by CheckURILine: a URI that could end its line or its quoted
// string is an error.
func (p *MediaPlaylist) Marshal() ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "#EXTM3U\n#EXT-X-VERSION:%d\n#EXT-X-TARGETDURATION:%d\n#EXT-X-MEDIA-SEQUENCE:0\n#EXT-X-PLAYLIST-TYPE:VOD\n",
		p.Version, p.TargetDuration())
	if p.Independent {
		b.WriteString("#EXT-X-INDEPENDENT-SEGMENTS\n")
	}
	if p.IFramesOnly {
		b.WriteString("#EXT-X-I-FRAMES-ONLY\n")
	}
	if p.Map != nil {
		uri, err := QuotedAttribute("URI", p.Map.URI)
		if err != nil {
			return nil, err
		}
		b.WriteString("#EXT-X-MAP:" + uri)
		if p.Map.Range.Length > 0 {
			byteRange, err := QuotedAttribute("BYTERANGE", fmt.Sprintf("%d@%d", p.Map.Range.Length, p.Map.Range.Offset))
			if err != nil {
				return nil, err
			}
			b.WriteString("," + byteRange)
		}
		b.WriteByte('\n')
	}
	for _, s := range p.Segments {
		if err := CheckURILine(s.URI); err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "#EXTINF:%s,\n", Seconds(s.Duration))
		if s.Range.Length > 0 {
			fmt.Fprintf(&b, "#EXT-X-BYTERANGE:%d@%d\n", s.Range.Length, s.Range.Offset)
		}
		b.WriteString(s.URI)
		b.WriteByte('\n')
	}
	b.WriteString("#EXT-X-ENDLIST\n")
	return b.Bytes(), nil
}

// Seconds writes d as decimal seconds to the microsecond: "6.000000".
func Seconds(d time.Duration) string {
	us := d.Microseconds()
	return fmt.Sprintf("%d.%06d", us/1e6, us%1e6)
}

// ParseMedia reads a media playlist as ffmpeg's HLS muxer writes it: EXTINF durations,
// EXT-X-BYTERANGE (an offset left out continues the previous range of the same URI), one
// EXT-X-MAP, and URI lines. Other tags are skipped; the segments' Size is their range's
// length (0 for whole files, which the caller measures).
func ParseMedia(body []byte) (MediaPlaylist, error) {
	var p MediaPlaylist
	var duration time.Duration
	var next ByteRange
	var haveDuration bool
	ends := map[string]int64{} // where the last range of each URI ended
	for line := range strings.Lines(string(body)) {
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "" || line == "#EXTM3U":
		case strings.HasPrefix(line, "#EXTINF:"):
			secs, _, _ := strings.Cut(strings.TrimPrefix(line, "#EXTINF:"), ",")
			d, err := parseSeconds(secs)
			if err != nil {
				return MediaPlaylist{}, fmt.Errorf("hls: %q: %w", line, err)
			}
			duration, haveDuration = d, true
		case strings.HasPrefix(line, "#EXT-X-BYTERANGE:"):
			r, err := parseRange(strings.TrimPrefix(line, "#EXT-X-BYTERANGE:"), -1)
			if err != nil {
				return MediaPlaylist{}, fmt.Errorf("hls: %q: %w", line, err)
			}
			next = r
		case strings.HasPrefix(line, "#EXT-X-MAP:"):
			m, err := parseMap(strings.TrimPrefix(line, "#EXT-X-MAP:"))
			if err != nil {
				return MediaPlaylist{}, fmt.Errorf("hls: %q: %w", line, err)
			}
			p.Map = &m
			if m.Range.Length > 0 {
				ends[m.URI] = m.Range.Offset + m.Range.Length
			}
		case strings.HasPrefix(line, "#"):
		default:
			if !haveDuration {
				return MediaPlaylist{}, fmt.Errorf("hls: segment %q has no EXTINF", line)
			}
			if next.Length > 0 && next.Offset < 0 {
				next.Offset = ends[line]
			}
			if next.Length > 0 {
				ends[line] = next.Offset + next.Length
			}
			p.Segments = append(p.Segments, Segment{URI: line, Duration: duration, Range: next, Size: next.Length})
			next, haveDuration = ByteRange{}, false
		}
	}
	if len(p.Segments) == 0 {
		return MediaPlaylist{}, errors.New("hls: the playlist has no segments")
	}
	return p, nil
}

// parseSeconds reads a decimal number of seconds to the microsecond.
func parseSeconds(s string) (time.Duration, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || f < 0 || f > 1e7 {
		return 0, fmt.Errorf("not a duration: %q", s)
	}
	return time.Duration(f*1e6+0.5) * time.Microsecond, nil
}

// parseRange reads "length[@offset]"; a missing offset is given as noOffset.
func parseRange(s string, noOffset int64) (ByteRange, error) {
	n, o, hasOffset := strings.Cut(s, "@")
	length, err := strconv.ParseInt(n, 10, 64)
	if err != nil || length <= 0 {
		return ByteRange{}, fmt.Errorf("not a byte range: %q", s)
	}
	offset := noOffset
	if hasOffset {
		if offset, err = strconv.ParseInt(o, 10, 64); err != nil || offset < 0 {
			return ByteRange{}, fmt.Errorf("not a byte range: %q", s)
		}
	}
	return ByteRange{Length: length, Offset: offset}, nil
}

// parseMap reads EXT-X-MAP's URI and BYTERANGE attributes.
func parseMap(attrs string) (Map, error) {
	var m Map
	for attrs != "" {
		name, rest, ok := strings.Cut(attrs, "=")
		if !ok || !strings.HasPrefix(rest, `"`) {
			return Map{}, fmt.Errorf("unreadable attributes %q", attrs)
		}
		value, after, ok := strings.Cut(rest[1:], `"`)
		if !ok {
			return Map{}, fmt.Errorf("unterminated attribute %q", attrs)
		}
		switch name {
		case "URI":
			m.URI = value
		case "BYTERANGE":
			r, err := parseRange(value, 0)
			if err != nil {
				return Map{}, err
			}
			m.Range = r
		}
		attrs = strings.TrimPrefix(after, ",")
	}
	if m.URI == "" {
		return Map{}, errors.New("EXT-X-MAP without a URI")
	}
	return m, nil
}

// Group joins consecutive byte-range segments of one file into segments of about target:
// a segment takes the next part while it stays within target plus a tolerance of just under
// half a second (so that it still rounds to target), and is closed once it reaches target less
// that tolerance. The encoder writes 2-second parts (one keyframe each, the I-frame playlist's
// unit) and serves 6-second segments made of them. Parts must follow each other in the file.
func Group(parts []Segment, target time.Duration) ([]Segment, error) {
	const tolerance = 490 * time.Millisecond
	var out []Segment
	for i, p := range parts {
		if p.Range.Length <= 0 {
			return nil, fmt.Errorf("hls: part %d of %s is not a byte range", i, p.URI)
		}
		if n := len(out); n > 0 {
			last := &out[n-1]
			if last.Duration < target-tolerance && last.Duration+p.Duration <= target+tolerance {
				if p.URI != last.URI || p.Range.Offset != last.Range.Offset+last.Range.Length {
					return nil, fmt.Errorf("hls: part %d of %s does not follow the one before it", i, p.URI)
				}
				last.Duration += p.Duration
				last.Range.Length += p.Range.Length
				last.Size += p.Size
				continue
			}
		}
		out = append(out, p)
	}
	return out, nil
}
