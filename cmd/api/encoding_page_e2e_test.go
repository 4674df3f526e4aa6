package main

// Watch while it encodes, end to end: the real binary encodes an upload as a group of jobs, and
// Debian's Chromium, driven by web/e2e/encoding.mjs, starts playing it through hls.js while its
// higher rendition is still to be encoded, then, once the video is READY, plays its best
// rendition.

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/playhead/playhead/encodejobs"
	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/testvideo"
	"github.com/playhead/playhead/media"
)

// waitPlayable polls GET /v1/media/{id} until the media is playable, failing if it FAILED,
// and after encodeTimeout.
func waitPlayable(t *testing.T, s *binarytest.Server, token string, id int64) {
	t.Helper()
	deadline := time.Now().Add(encodeTimeout)
	for {
		v := mediaOf(t, s, token, id)
		switch {
		case v.Playable:
			return
		case v.Status == string(media.StatusFailed):
			t.Fatalf("media %d FAILED: %s", id, v.FailureReason)
		case time.Now().After(deadline):
			t.Fatalf("media %d not playable after %s: %+v", id, encodeTimeout, v)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type encodingPageEvent struct {
	Event         string   `json:"event"`
	Message       string   `json:"message"`
	Levels        []int    `json:"levels"`
	PlayingHeight int      `json:"playingHeight"`
	CurrentTime   float64  `json:"currentTime"`
	Encoding      string   `json:"encoding"`
	Notice        string   `json:"notice"`
	NoticeKind    string   `json:"noticeKind"`
	Problems      []string `json:"problems"`
	Accessibility []string `json:"accessibility"`
}

// TestWatchPage_PlaysWhileItEncodesInChromium: a 60 s 360p upload (a ladder of 360p and 240p).
// The test database holds back every rendition above 240p (a trigger gives their jobs an
// available_at a day away as they are enqueued), so the order is certain whatever the
// machine's speed: the media becomes playable with the 240p alone, the page plays it while the
// API says PROCESSING, with a note that it is still encoding; then the test lets the 360p go,
// the video becomes READY, and the page, without a reload, plays the 360p.
func TestWatchPage_PlaysWhileItEncodesInChromium(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	node := requireBrowser(t, root)
	s := binarytest.Start(t, pipelineEnv("all", "e2e-encoding", t.TempDir(), t.TempDir(), "ultrafast"))
	pool := s.Pool(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `
		CREATE FUNCTION e2e_hold_renditions() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
		    IF NEW.kind = '`+encodejobs.KindRendition+`' AND (NEW.args->'heights'->>0)::int > 240 THEN
		        NEW.available_at := statement_timestamp() + interval '1 day';
		    END IF;
		    RETURN NEW;
		END $$;
		CREATE TRIGGER e2e_hold_renditions BEFORE INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION e2e_hold_renditions()`); err != nil {
		t.Fatal(err)
	}
	token := binarytest.Token(t, 34, false)
	src := testvideo.MP4(t, t.TempDir(), testvideo.Spec{Seconds: 60, Width: 640, Height: 360, FPS: 30, Audio: true})
	id := s.Upload(t, token, binarytest.Upload{Path: src, Title: "Watch while it encodes", Visibility: "PRIVATE"})
	waitPlayable(t, s, token, id)

	script := startBrowserScript(t, root, node, "encoding.mjs", "PLAYHEAD_URL="+s.HTTPURL, "PLAYHEAD_TOKEN="+token,
		"PLAYHEAD_MEDIA="+strconv.FormatInt(id, 10))
	events := map[string]encodingPageEvent{}
	for {
		var ev encodingPageEvent
		if !script.next(t, &ev) {
			break
		}
		events[ev.Event] = ev
		if ev.Event != "playing" {
			continue
		}
		if v := mediaOf(t, s, token, id); v.Status != string(media.StatusProcessing) || !v.Playable {
			t.Errorf("while the page played the video its status was %s (playable %v), want PROCESSING and playable", v.Status, v.Playable)
		}
		if _, err := pool.Exec(ctx, `UPDATE jobs SET available_at = statement_timestamp() WHERE kind = $1 AND status = 'PENDING'`,
			encodejobs.KindRendition); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `SELECT pg_notify('jobs_available', $1)`, encodejobs.KindRendition); err != nil {
			t.Fatal(err)
		}
		if _, err := script.Stdin.Write([]byte("go on\n")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := script.wait(); err != nil || events["error"].Message != "" {
		t.Fatalf("encoding.mjs failed (%v): %s", err, events["error"].Message)
	}
	playing := events["playing"]
	if !slices.Equal(playing.Levels, []int{240}) || playing.PlayingHeight != 240 || playing.Encoding != "true" || playing.NoticeKind != "info" {
		t.Errorf("while encoding the page played %+v; want the 240p alone, with the still-encoding note", playing)
	}
	up := events["upgraded"]
	if !slices.Contains(up.Levels, 360) || !slices.Contains(up.Levels, 240) || up.PlayingHeight != 360 || up.Encoding != "false" {
		t.Errorf("once READY the page played %+v; want both levels and the 360p on screen", up)
	}
	if v := mediaOf(t, s, token, id); v.Status != string(media.StatusReady) {
		t.Errorf("the media ended %s, want READY", v.Status)
	}
	done := events["done"]
	for _, p := range append(done.Problems, done.Accessibility...) {
		t.Errorf("watch page: %s", p)
	}
	if done.Notice != "" {
		t.Errorf("the page ended with a notice: %q", done.Notice)
	}
}
