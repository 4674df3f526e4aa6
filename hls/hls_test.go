package hls_test

import (
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/hls"
)

func seg(size int64, d time.Duration) hls.Segment {
	return hls.Segment{URI: "s.mp4", Size: size, Duration: d}
}

// The peak is taken over contiguous sets of 0.5 to 1.5 target durations: a short last segment
// counts only with its neighbour, and a pair of full segments is too long to count.
func TestPeakRate_RFC8216Windows(t *testing.T) {
	segs := []hls.Segment{
		seg(600_000, 6*time.Second),        // 800 000 bit/s
		seg(660_000, 6*time.Second),        // 880 000 bit/s: the peak of one segment
		seg(100_000, 500*time.Millisecond), // 1 600 000 bit/s alone, but only 0.5 s: too short
	}
	// With the last: (660 000 + 100 000) × 8 / 6.5 s = 935 384.6… bit/s, the peak.
	got := hls.PeakRate(segs, 6*time.Second)
	want := big.NewRat(760_000*8*1e6, 6_500_000)
	if got.Cmp(want) != 0 {
		t.Fatalf("PeakRate = %s, want %s", got.FloatString(3), want.FloatString(3))
	}
	if bw := hls.BitsPerSecond(got); bw != 935385 {
		t.Fatalf("BitsPerSecond = %d, want 935385 (rounded up)", bw)
	}
}

// The bounds of a window are inclusive ("between 0.5 and 1.5 times the target duration"): a set
// of exactly 3 s or exactly 9 s of a 6 s target counts.
func TestPeakRate_WindowBoundsCount(t *testing.T) {
	for _, tc := range []struct {
		name string
		segs []hls.Segment
		want int64
	}{
		// 3 s alone at 1 600 000 bit/s; without it, the 9 s pair would give 1 066 667.
		{"exactly half the target", []hls.Segment{seg(600_000, 6*time.Second), seg(600_000, 3*time.Second)}, 1_600_000},
		// 2 s is too short alone; with the 7 s after it, exactly 9 s: (800 000 + 700 000) × 8 / 9.
		{"exactly one and a half targets", []hls.Segment{seg(800_000, 2*time.Second), seg(700_000, 7*time.Second)}, 1_333_334},
	} {
		if got := hls.BitsPerSecond(hls.PeakRate(tc.segs, 6*time.Second)); got != tc.want {
			t.Errorf("%s: PeakRate = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestPeakRate_NoWindowTakesTheLargestSegment(t *testing.T) {
	segs := []hls.Segment{seg(1000, 20*time.Second), seg(4000, 20*time.Second)}
	if got := hls.BitsPerSecond(hls.PeakRate(segs, 6*time.Second)); got != 1600 {
		t.Fatalf("PeakRate = %d, want 1600", got)
	}
}

func TestAverageRate_AndSumsRoundOnce(t *testing.T) {
	video := hls.AverageRate([]hls.Segment{seg(1, 3*time.Second)}) // 8/3 bit/s
	audio := hls.AverageRate([]hls.Segment{seg(1, 3*time.Second)})
	if got := hls.BitsPerSecond(video, audio); got != 6 { // 16/3 = 5.33… → 6, not 3 + 3
		t.Fatalf("BitsPerSecond(8/3 + 8/3) = %d, want 6", got)
	}
	// Durations count to the microsecond, as EXTINF is written: 751 746 bytes over 6.013968 s
	// is 1 000 000.0… bit/s, not the 1 000 136.9… of 6.013 s.
	if got := hls.BitsPerSecond(hls.AverageRate([]hls.Segment{seg(751_746, 6_013_968*time.Microsecond)})); got != 1_000_000 {
		t.Fatalf("AverageRate over 6.013968 s = %d, want 1000000", got)
	}
}

func TestGroup_JoinsPartsIntoTargetSegments(t *testing.T) {
	var parts []hls.Segment
	var off int64
	for i, d := range []time.Duration{2 * time.Second, 2 * time.Second, 2 * time.Second, 2 * time.Second, 2 * time.Second, 2 * time.Second, 1 * time.Second} {
		n := int64(1000 + i)
		parts = append(parts, hls.Segment{URI: "media.mp4", Duration: d, Range: hls.ByteRange{Length: n, Offset: off}, Size: n})
		off += n
	}
	segs, err := hls.Group(parts, 6*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) != 3 || segs[0].Duration != 6*time.Second || segs[1].Duration != 6*time.Second || segs[2].Duration != time.Second {
		t.Fatalf("Group = %+v, want 6 s, 6 s, 1 s", segs)
	}
	if segs[1].Range != (hls.ByteRange{Offset: 3003, Length: 1003 + 1004 + 1005}) || segs[1].Size != segs[1].Range.Length {
		t.Fatalf("second segment = %+v", segs[1])
	}
	// Audio parts a little over 2 s still make 6-second segments (6.016 s rounds to 6).
	audio := []hls.Segment{}
	off = 0
	for range 4 {
		audio = append(audio, hls.Segment{URI: "a.mp4", Duration: 2005333 * time.Microsecond, Range: hls.ByteRange{Length: 10, Offset: off}, Size: 10})
		off += 10
	}
	segs, err = hls.Group(audio, 6*time.Second)
	if err != nil || len(segs) != 2 || segs[0].Duration != 6015999*time.Microsecond {
		t.Fatalf("Group(audio) = %+v, %v", segs, err)
	}
	// A part that would take a segment to 6.55 s (a 7 s target) starts the next one instead.
	uneven := []hls.Segment{}
	off = 0
	for _, d := range []time.Duration{2 * time.Second, 2 * time.Second, 2550 * time.Millisecond, 2 * time.Second} {
		uneven = append(uneven, hls.Segment{URI: "u.mp4", Duration: d, Range: hls.ByteRange{Length: 10, Offset: off}, Size: 10})
		off += 10
	}
	segs, err = hls.Group(uneven, 6*time.Second)
	if err != nil || len(segs) != 2 || segs[0].Duration != 4*time.Second || segs[1].Duration != 4550*time.Millisecond {
		t.Fatalf("Group(uneven) = %+v, %v; want 4 s and 4.55 s", segs, err)
	}
	parts[3].Range.Offset++
	if _, err := hls.Group(parts, 6*time.Second); err == nil {
		t.Fatal("Group joined parts with a gap between them")
	}
}

func TestMediaPlaylist_MarshalAndParse(t *testing.T) {
	p := hls.MediaPlaylist{Version: 7, Independent: true, Map: &hls.Map{URI: "media.mp4", Range: hls.ByteRange{Length: 846}},
		Segments: []hls.Segment{
			{URI: "media.mp4", Duration: 6 * time.Second, Range: hls.ByteRange{Length: 500, Offset: 846}, Size: 500},
			{URI: "media.mp4", Duration: 2500 * time.Millisecond, Range: hls.ByteRange{Length: 100, Offset: 1346}, Size: 100},
		}}
	b, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want := "#EXTM3U\n#EXT-X-VERSION:7\n#EXT-X-TARGETDURATION:6\n#EXT-X-MEDIA-SEQUENCE:0\n#EXT-X-PLAYLIST-TYPE:VOD\n" +
		"#EXT-X-INDEPENDENT-SEGMENTS\n#EXT-X-MAP:URI=\"media.mp4\",BYTERANGE=\"846@0\"\n" +
		"#EXTINF:6.000000,\n#EXT-X-BYTERANGE:500@846\nmedia.mp4\n#EXTINF:2.500000,\n#EXT-X-BYTERANGE:100@1346\nmedia.mp4\n#EXT-X-ENDLIST\n"
	if string(b) != want {
		t.Fatalf("Marshal:\n%s\nwant:\n%s", b, want)
	}
	back, err := hls.ParseMedia(b)
	if err != nil {
		t.Fatal(err)
	}
	if back.Map == nil || *back.Map != *p.Map || len(back.Segments) != 2 || back.Segments[1] != p.Segments[1] {
		t.Fatalf("ParseMedia = %+v", back)
	}
	// ffmpeg leaves out the offset of a range that follows the one before it.
	cont, err := hls.ParseMedia([]byte("#EXTM3U\n#EXT-X-MAP:URI=\"m.mp4\",BYTERANGE=\"10@0\"\n#EXTINF:2.0,\n#EXT-X-BYTERANGE:5\nm.mp4\n#EXTINF:2.0,\n#EXT-X-BYTERANGE:7\nm.mp4\n"))
	if err != nil || cont.Segments[0].Range.Offset != 10 || cont.Segments[1].Range.Offset != 15 {
		t.Fatalf("continued ranges: %+v, %v", cont.Segments, err)
	}
}

func TestMarshal_RefusesWhatBreaksOutOfAQuotedString(t *testing.T) {
	for _, bad := range []string{`a"b`, "a\nb", "a\rb", ""} {
		m := hls.Master{Version: 7, Media: []hls.Rendition{{Type: "SUBTITLES", GroupID: "subs", Name: bad, URI: "s.m3u8"}}}
		if _, err := m.Marshal(); err == nil {
			t.Errorf("Master.Marshal took the name %q", bad)
		}
		p := hls.MediaPlaylist{Version: 3, Segments: []hls.Segment{{URI: bad, Duration: time.Second}}}
		if _, err := p.Marshal(); err == nil {
			t.Errorf("MediaPlaylist.Marshal took the URI %q", bad)
		}
	}
}

func TestMaster_Marshal(t *testing.T) {
	m := hls.Master{Version: 7, Independent: true,
		Media:    []hls.Rendition{{Type: "AUDIO", GroupID: "audio", Name: "Audio", Default: true, Autoselect: true, Channels: "2", URI: "audio/index.m3u8"}},
		Variants: []hls.Variant{{URI: "v0/index.m3u8", Bandwidth: 935385, AverageBandwidth: 800000, Codecs: []string{"avc1.64001f", "mp4a.40.2"}, Width: 1280, Height: 720, FrameRate: 29.97, Audio: "audio"}},
		IFrames:  []hls.IFrameVariant{{URI: "v0/iframes.m3u8", Bandwidth: 100000, Codecs: []string{"avc1.64001f"}, Width: 1280, Height: 720}},
	}
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		`#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="audio",NAME="Audio",DEFAULT=YES,AUTOSELECT=YES,CHANNELS="2",URI="audio/index.m3u8"`,
		`#EXT-X-STREAM-INF:BANDWIDTH=935385,AVERAGE-BANDWIDTH=800000,CODECS="avc1.64001f,mp4a.40.2",RESOLUTION=1280x720,FRAME-RATE=29.970,AUDIO="audio"` + "\nv0/index.m3u8\n",
		`#EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=100000,CODECS="avc1.64001f",RESOLUTION=1280x720,URI="v0/iframes.m3u8"`,
	} {
		if !strings.Contains(string(b), line) {
			t.Errorf("master lacks %q:\n%s", line, b)
		}
	}
}
