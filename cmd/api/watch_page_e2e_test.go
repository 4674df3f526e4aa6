package main

// The watch page's controls end to end: the real binary encodes an upload to fMP4, and Debian's
// Chromium, driven by web/e2e/watch.mjs, plays it through hls.js to the end, shows storyboard
// previews on the seek bar under the mouse and after a keyboard seek, and turns captions on;
// axe-core checks the page.

import (
	"math"
	"net/http"
	"net/url"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/testvideo"
	"github.com/playhead/playhead/media"
)

type watchPageEvent struct {
	Event   string `json:"event"`
	Message string `json:"message"`
	// playing
	Engine         string  `json:"engine"`
	StoryboardCues int     `json:"storyboardCues"`
	Controls       bool    `json:"controls"`
	Duration       float64 `json:"duration"`
	// hover and keyboard: the preview
	Visible      bool    `json:"visible"`
	Time         float64 `json:"time"`
	Sprite       string  `json:"sprite"`
	Tile         string  `json:"tile"`
	Text         string  `json:"text"`
	Width        int     `json:"width"`
	Height       int     `json:"height"`
	CurrentTime  float64 `json:"currentTime"`
	Fraction     float64 `json:"fraction"`
	SpriteStatus int     `json:"spriteStatus"`
	Before       float64 `json:"before"`
	// captions: the menu's options, the one chosen, the cue the video showed
	Options []struct{ Value, Label string } `json:"options"`
	Chosen  string                          `json:"chosen"`
	Cue     *struct {
		Text, Shown, Lang string
		Start, End, At    float64
	} `json:"cue"`
	// ended
	Fatal string `json:"fatal"`
	// playing and ended: the play button's name and icon
	PlayButton struct{ Label, Icon string } `json:"playButton"`
	// done
	Problems      []string `json:"problems"`
	Accessibility []string `json:"accessibility"`
	Notice        string   `json:"notice"`
}

// TestWatchPage_StoryboardCaptionsAndPlaybackInChromium: a 12 s upload encoded to fMP4 plays
// in Chromium through hls.js to its end; hovering the seek bar at 60 % shows the storyboard
// tile of that moment (a tile of a sprite that loaded, with its time), → on the focused bar
// moves the video 5 s on and shows the preview there; the captions added through the API are
// in the menu, and chosen, their cue shows at its time as plain text; no axe-core violation,
// console error or notice.
func TestWatchPage_StoryboardCaptionsAndPlaybackInChromium(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	node := requireBrowser(t, root)
	s := binarytest.Start(t, pipelineEnv("all", "e2e-watch", t.TempDir(), t.TempDir(), "ultrafast"))
	token := binarytest.Token(t, 31, false)
	src := testvideo.MP4(t, t.TempDir(), testvideo.Spec{Seconds: 12, Width: 640, Height: 360, FPS: 30, Audio: true})
	id := s.Upload(t, token, binarytest.Upload{Path: src, Title: "Storyboard and captions", Visibility: "PRIVATE"})
	v := waitMedia(t, s, token, id, media.StatusReady)
	if v.StoryboardURL == "" {
		t.Fatalf("GET /v1/media/%d has no storyboard_url: %+v", id, v)
	}
	// One caption in English from 2 s to 5 s, its markup to be shown as text.
	srt := "1\r\n00:00:02,000 --> 00:00:05,000\r\nHello <b>captions</b> & friends\r\n"
	status, out, err := s.PostMultipart(s.URL("/v1/media/%d/captions", id), token, map[string]string{"language": "en", "label": "English"},
		"lesson.srt", strings.NewReader(srt))
	if err != nil || status != http.StatusCreated {
		t.Fatalf("POST captions: %d %s %v", status, out, err)
	}

	shots := screenshotsDir(t)
	script := startBrowserScript(t, root, node, "watch.mjs", "PLAYHEAD_URL="+s.HTTPURL, "PLAYHEAD_TOKEN="+token,
		"PLAYHEAD_MEDIA="+strconv.FormatInt(id, 10), `PLAYHEAD_CAPTION={"lang":"en"}`, "PLAYHEAD_SHOTS="+shots)
	events := map[string]watchPageEvent{}
	for {
		var ev watchPageEvent
		if !script.next(t, &ev) {
			break
		}
		events[ev.Event] = ev
	}
	if _, err := script.wait(); err != nil || events["error"].Message != "" {
		t.Fatalf("watch.mjs failed (%v): %s", err, events["error"].Message)
	}

	playing := events["playing"]
	if playing.Engine != "hls.js" || !playing.Controls || playing.StoryboardCues < 12 {
		t.Errorf("the page plays with %q, controls shown %v, %d storyboard cues; want hls.js, the controls, a cue a second",
			playing.Engine, playing.Controls, playing.StoryboardCues)
	}
	if b := playing.PlayButton; b.Label != "Pause" || b.Icon != "pause" {
		t.Errorf("while playing the play button is %+v, want Pause with its icon", b)
	}
	// Under the mouse at 60 % of the bar: that second's tile (one a second, 10 to a row of
	// 160-pixel tiles), from a sprite that loaded.
	hover := events["hover"]
	wantTile := func(at float64) string {
		i := int(at)
		return strconv.Itoa(i%10*160) + ",0,160,90"
	}
	if !hover.Visible || math.Abs(hover.Time-0.6*playing.Duration) > 0.5 || hover.Tile != wantTile(hover.Time) ||
		hover.Width != 160 || hover.Height != 90 || hover.SpriteStatus != 200 || !strings.Contains(hover.Sprite, "/storyboard/sprite_000.jpg?") {
		t.Errorf("hover at 60%% of %.1f s: %+v; want the preview of %.1f s, tile %s of sprite_000.jpg (loaded, 200)",
			playing.Duration, hover, 0.6*playing.Duration, wantTile(0.6*playing.Duration))
	}
	if u, err := url.Parse(hover.Sprite); err != nil || path.Base(u.Path) != "sprite_000.jpg" || u.Query().Get("sig") == "" {
		t.Errorf("the preview's sprite %q is not a signed link", hover.Sprite)
	}
	key := events["keyboard"]
	if !key.Visible || math.Abs(key.Time-(key.Before+5)) > 0.5 || math.Abs(key.CurrentTime-key.Time) > 1 || key.Tile != wantTile(key.Time) {
		t.Errorf("→ on the seek bar at %.1f s: %+v; want the video and the preview at %.1f s", key.Before, key, key.Before+5)
	}
	// Captions on: the cue shows while the video is between 2 and 5 s (where hls.js placed it,
	// by the segments' X-TIMESTAMP-MAP, within a frame of the times written), as plain text.
	c := events["captions"]
	if len(c.Options) != 2 || c.Options[0].Label != "Off" || c.Options[1].Label != "English (en)" || c.Chosen != "en" {
		t.Errorf("the captions menu offers %+v, chose %q; want Off and English (en), en chosen", c.Options, c.Chosen)
	}
	if cue := c.Cue; cue == nil || cue.Text != "Hello captions &amp; friends" || cue.Shown != "Hello captions & friends" || cue.Lang != "en" ||
		math.Abs(cue.Start-2) > 0.1 || math.Abs(cue.End-5) > 0.1 || cue.At < cue.Start || cue.At > cue.End {
		t.Errorf("the cue shown: %+v; want \"Hello captions &amp; friends\" shown as \"Hello captions & friends\" from 2 s to 5 s, while the video is within them", cue)
	}
	ended := events["ended"]
	if ended.Fatal != "" || math.Abs(ended.CurrentTime-ended.Duration) > 0.5 {
		t.Errorf("the video ended at %.1f of %.1f s (fatal %q), want at its end", ended.CurrentTime, ended.Duration, ended.Fatal)
	}
	if b := ended.PlayButton; b.Label != "Play" || b.Icon != "play" {
		t.Errorf("at the end the play button is %+v, want Play with its icon", b)
	}
	done := events["done"]
	for _, list := range [][]string{done.Accessibility, done.Problems} {
		for _, p := range list {
			t.Error(p)
		}
	}
	if done.Notice != "" {
		t.Errorf("the page shows the notice %q", done.Notice)
	}
}
