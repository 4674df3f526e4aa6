package captions

import (
	"strings"
	"testing"
	"time"
)

func TestStartMPEGTS(t *testing.T) {
	for _, c := range []struct{ us, want int64 }{{-1, 126_000}, {0, 0}, {1_400_000, 126_000}, {80_000, 7_200}, {11, 1}, {5, 0}} {
		if got := StartMPEGTS(c.us); got != c.want {
			t.Errorf("StartMPEGTS(%d) = %d, want %d", c.us, got, c.want)
		}
	}
}

func TestCut(t *testing.T) {
	cues := mustParse(t, "WEBVTT\n\n00:01.000 --> 00:02.000\nfirst <b>a &lt; b</b>\n\n"+
		"00:05.500 --> 00:13.000\nspans three\n\n00:06.000 --> 00:06.500\nstarts on a boundary\n\n"+
		"00:14.000 --> 00:15.500\n--&gt; arrow &amp; x\n", 15500*time.Millisecond)
	grid := []time.Duration{6 * time.Second, 6 * time.Second, 3500 * time.Millisecond}
	track, err := Cut(cues, grid, 126_000)
	if err != nil {
		t.Fatal(err)
	}
	header := "WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:126000,LOCAL:00:00:00.000\n\n"
	want := []string{
		header + "00:00:01.000 --> 00:00:02.000\nfirst a &lt; b\n\n00:00:05.500 --> 00:00:13.000\nspans three\n\n",
		header + "00:00:05.500 --> 00:00:13.000\nspans three\n\n00:00:06.000 --> 00:00:06.500\nstarts on a boundary\n\n",
		header + "00:00:05.500 --> 00:00:13.000\nspans three\n\n00:00:14.000 --> 00:00:15.500\n--&gt; arrow &amp; x\n\n",
	}
	if len(track.Segments) != len(want) {
		t.Fatalf("%d segments, want %d", len(track.Segments), len(want))
	}
	for i, w := range want {
		if string(track.Segments[i]) != w {
			t.Errorf("segment %d:\n%s\nwant:\n%s", i, track.Segments[i], w)
		}
	}
	wantPlaylist := "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:6\n#EXT-X-MEDIA-SEQUENCE:0\n#EXT-X-PLAYLIST-TYPE:VOD\n" +
		"#EXTINF:6.000000,\nseg_00000.vtt\n#EXTINF:6.000000,\nseg_00001.vtt\n#EXTINF:3.500000,\nseg_00002.vtt\n#EXT-X-ENDLIST\n"
	if string(track.Playlist) != wantPlaylist {
		t.Errorf("playlist:\n%s\nwant:\n%s", track.Playlist, wantPlaylist)
	}
	if !strings.HasPrefix(string(track.File), "WEBVTT\n\n00:00:01.000 --> 00:00:02.000\nfirst a &lt; b\n\n") || strings.Count(string(track.File), "-->") != 4 {
		t.Errorf("whole file:\n%s", track.File)
	}
	// What a segment says is read back as the same plain text: the escapes are references, not tags.
	back := mustParse(t, string(track.Segments[2]), time.Hour)
	wantCues(t, back, "00:00:05.500-00:00:13.000 spans three", "00:00:14.000-00:00:15.500 --> arrow & x")
}

func TestCut_EmptySegmentsAndPastTheGrid(t *testing.T) {
	cues := mustParse(t, "1\n00:00:20,000 --> 00:00:21,000\nlate\n", 22*time.Second)
	// The grid (as a media playlist's EXTINFs add up) is a little shorter than the duration.
	track, err := Cut(cues, []time.Duration{6 * time.Second, 6 * time.Second, 6 * time.Second, 1900 * time.Millisecond}, 0)
	if err != nil {
		t.Fatal(err)
	}
	header := "WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:0,LOCAL:00:00:00.000\n\n"
	for i, seg := range track.Segments[:3] {
		if string(seg) != header {
			t.Errorf("segment %d: %q, want the header alone", i, seg)
		}
	}
	if string(track.Segments[3]) != header+"00:00:20.000 --> 00:00:21.000\nlate\n\n" {
		t.Errorf("last segment: %q", track.Segments[3])
	}
	if _, err := Cut(cues, nil, 0); err == nil {
		t.Error("Cut with no video segments: no error")
	}
}
