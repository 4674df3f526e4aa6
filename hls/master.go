package hls

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// Rendition is an EXT-X-MEDIA entry: an alternative rendition (the audio group, subtitles).
type Rendition struct {
	// Type is AUDIO or SUBTITLES.
	Type, GroupID, Name string
	// Language is a BCP 47 tag; empty when unknown.
	Language            string
	Default, Autoselect bool
	// Channels is the audio channel count ("2"); empty for subtitles.
	Channels string
	URI      string
}

// Variant is an EXT-X-STREAM-INF entry: one video rendition, with the audio group it plays
// with.
type Variant struct {
	URI string
	// Bandwidth and AverageBandwidth are measured (PeakRate, AverageRate), in bits per second,
	// of the variant with its audio.
	Bandwidth, AverageBandwidth int64
	Codecs                      []string
	Width, Height               int
	// FrameRate is the video's frames per second; 0 leaves FRAME-RATE out.
	FrameRate float64
	// Audio and Subtitles name the groups the variant plays with; empty for none.
	Audio, Subtitles string
}

// IFrameVariant is an EXT-X-I-FRAME-STREAM-INF entry: the I-frame playlist of one video
// rendition, for trick play and scrubbing.
type IFrameVariant struct {
	URI                         string
	Bandwidth, AverageBandwidth int64
	Codecs                      []string
	Width, Height               int
}

// Master is a master playlist.
type Master struct {
	// Version is EXT-X-VERSION, that of the media playlists.
	Version     int
	Independent bool
	Media       []Rendition
	Variants    []Variant
	IFrames     []IFrameVariant
}

// Marshal writes the master playlist. Every quoted attribute (GROUP-ID, NAME, LANGUAGE,
// CHANNELS, URI, CODECS, AUDIO, SUBTITLES) is written by QuotedAttribute and every URI line
// checked by CheckURILine: a value that could leave its quoted string or its line is an error,
// and nothing is written.
func (m *Master) Marshal() ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "#EXTM3U\n#EXT-X-VERSION:%d\n", m.Version)
	if m.Independent {
		b.WriteString("#EXT-X-INDEPENDENT-SEGMENTS\n")
	}
	var errs attrErrors
	for _, r := range m.Media {
		a := attrs{errs: &errs}
		a.enum("TYPE", r.Type)
		a.quoted("GROUP-ID", r.GroupID)
		a.quoted("NAME", r.Name)
		a.optQuoted("LANGUAGE", r.Language)
		a.enum("DEFAULT", yesNo(r.Default))
		a.enum("AUTOSELECT", yesNo(r.Autoselect))
		a.optQuoted("CHANNELS", r.Channels)
		a.quoted("URI", r.URI)
		fmt.Fprintf(&b, "#EXT-X-MEDIA:%s\n", a.String())
	}
	for _, v := range m.Variants {
		a := attrs{errs: &errs}
		a.int("BANDWIDTH", v.Bandwidth)
		a.optInt("AVERAGE-BANDWIDTH", v.AverageBandwidth)
		a.optQuoted("CODECS", strings.Join(v.Codecs, ","))
		a.resolution(v.Width, v.Height)
		if v.FrameRate > 0 {
			a.enum("FRAME-RATE", strconv.FormatFloat(v.FrameRate, 'f', 3, 64))
		}
		a.optQuoted("AUDIO", v.Audio)
		a.optQuoted("SUBTITLES", v.Subtitles)
		errs.check(v.URI)
		fmt.Fprintf(&b, "#EXT-X-STREAM-INF:%s\n%s\n", a.String(), v.URI)
	}
	for _, f := range m.IFrames {
		a := attrs{errs: &errs}
		a.int("BANDWIDTH", f.Bandwidth)
		a.optInt("AVERAGE-BANDWIDTH", f.AverageBandwidth)
		a.optQuoted("CODECS", strings.Join(f.Codecs, ","))
		a.resolution(f.Width, f.Height)
		a.quoted("URI", f.URI)
		fmt.Fprintf(&b, "#EXT-X-I-FRAME-STREAM-INF:%s\n", a.String())
	}
	if errs.err != nil {
		return nil, errs.err
	}
	return b.Bytes(), nil
}

func yesNo(b bool) string {
	if b {
		return "YES"
	}
	return "NO"
}

// attrs builds an attribute list ("NAME=value,…"); the first value that cannot be written is
// kept in errs.
type attrs struct {
	b    strings.Builder
	errs *attrErrors
}

type attrErrors struct{ err error }

func (e *attrErrors) keep(err error) {
	if err != nil && e.err == nil {
		e.err = err
	}
}

// check keeps CheckURILine's error for a URI line.
func (e *attrErrors) check(s string) { e.keep(CheckURILine(s)) }

func (a *attrs) add(name, value string) { a.write(name + "=" + value) }

func (a *attrs) write(attr string) {
	if a.b.Len() > 0 {
		a.b.WriteByte(',')
	}
	a.b.WriteString(attr)
}

func (a *attrs) enum(name, value string)  { a.add(name, value) }
func (a *attrs) int(name string, v int64) { a.add(name, strconv.FormatInt(v, 10)) }

func (a *attrs) optInt(name string, v int64) {
	if v > 0 {
		a.int(name, v)
	}
}

// quoted writes a quoted-string attribute through QuotedAttribute.
func (a *attrs) quoted(name, value string) {
	attr, err := QuotedAttribute(name, value)
	a.errs.keep(err)
	a.write(attr)
}

func (a *attrs) optQuoted(name, value string) {
	if value != "" {
		a.quoted(name, value)
	}
}

func (a *attrs) resolution(w, h int) {
	if w > 0 && h > 0 {
		a.add("RESOLUTION", fmt.Sprintf("%dx%d", w, h))
	}
}

func (a *attrs) String() string { return a.b.String() }
