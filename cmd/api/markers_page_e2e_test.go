package main

// The watch page's chapters and markers end to end: the real binary encodes an upload, and
// Debian's Chromium, driven by web/e2e/markers.mjs, lists the chapters, marks them on the seek
// bar, skips the intro and offers the course's next lesson in the credits; axe-core checks the
// page.

import (
	"fmt"
	"math"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/testvideo"
	"github.com/playhead/playhead/media"
)

type markersPageEvent struct {
	Event   string `json:"event"`
	Message string `json:"message"`
	// chapters
	Buttons []struct {
		Text    string
		StartMS int64 `json:"startMs"`
	} `json:"buttons"`
	Marks []struct {
		Time float64
		Left string
	} `json:"marks"`
	// skipped, chapter, next
	Before      float64 `json:"before"`
	CurrentTime float64 `json:"currentTime"`
	Current     string  `json:"current"`
	Text        string  `json:"text"`
	Href        string  `json:"href"`
	// done
	Problems      []string `json:"problems"`
	Accessibility []string `json:"accessibility"`
	Notice        string   `json:"notice"`
}

// TestWatchPage_ChaptersAndMarkersInChromium: a 12 s upload with an intro (0–3 s), credits
// (from 9 s) and three chapters, placed first in a course of two lessons, opened from the
// course: the page lists the chapters (buttons with their times and titles) and marks the two
// after the start on the seek bar where they fall; "Skip intro" shows in the intro and jumps
// to 3 s; Enter on the last chapter's button seeks to 8 s and plays; in the credits "Next
// lesson" links to the course's second lesson; no axe-core violation, console error or notice.
func TestWatchPage_ChaptersAndMarkersInChromium(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	node := requireBrowser(t, root)
	s := binarytest.Start(t, pipelineEnv("all", "e2e-markers", t.TempDir(), t.TempDir(), "ultrafast"))
	token := binarytest.Token(t, 1, false)
	src := testvideo.MP4(t, t.TempDir(), testvideo.Spec{Seconds: 12, Width: 640, Height: 360, FPS: 30})
	id := s.Upload(t, token, binarytest.Upload{Path: src, Title: "Marked lesson", Visibility: "PUBLIC"})
	v := waitMedia(t, s, token, id, media.StatusReady)

	s.MustDo(t, http.StatusOK, http.MethodPut, s.URL("/v1/media/%d/markers", id), token, map[string]any{
		"intro": map[string]int64{"start_ms": 0, "end_ms": 3000}, "credits": map[string]int64{"start_ms": 9000, "end_ms": v.DurationMS}})
	s.MustDo(t, http.StatusOK, http.MethodPut, s.URL("/v1/media/%d/chapters", id), token, []map[string]any{
		{"start_ms": 0, "title": "Opening"}, {"start_ms": 4000, "title": "The <b>middle</b>"}, {"start_ms": 8000, "title": "Wrapping up"}})

	// The course: this lesson, then a second one (a row without files: only its link is shown).
	const course = "Markers course"
	pool := s.Pool(t)
	var importID, second int64
	if err := pool.QueryRow(t.Context(), `INSERT INTO imports (created_by, filename, total_rows, accepted, rejected)
		VALUES (1, 'course.csv', 2, 2, 0) RETURNING id`).Scan(&importID); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(t.Context(), `INSERT INTO media (owner_id, title, status, visibility, duration_ms, hls_key)
		VALUES (1, 'Second lesson', 'READY', 'PUBLIC', 60000, 'hls/none/master.m3u8') RETURNING id`).Scan(&second); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(t.Context(), `INSERT INTO import_rows (import_id, row_number, collection, chapter, position, video_url, media_id)
		VALUES ($1, 2, $2, 1, 0, 'https://example.com/1.mp4', $3), ($1, 3, $2, 1, 1, 'https://example.com/2.mp4', $4)`,
		importID, course, id, second); err != nil {
		t.Fatal(err)
	}

	shots := screenshotsDir(t)
	script := startBrowserScript(t, root, node, "markers.mjs", "PLAYHEAD_URL="+s.HTTPURL, "PLAYHEAD_TOKEN="+token,
		"PLAYHEAD_MEDIA="+strconv.FormatInt(id, 10), "PLAYHEAD_COLLECTION="+course, "PLAYHEAD_SHOTS="+shots)
	events := map[string]markersPageEvent{}
	for {
		var ev markersPageEvent
		if !script.next(t, &ev) {
			break
		}
		events[ev.Event] = ev
	}
	if _, err := script.wait(); err != nil || events["error"].Message != "" {
		t.Fatalf("markers.mjs failed (%v): %s", err, events["error"].Message)
	}

	ch := events["chapters"]
	wantButtons := []string{"0:00Opening", "0:04The <b>middle</b>", "0:08Wrapping up"}
	if len(ch.Buttons) != len(wantButtons) {
		t.Fatalf("the chapter list: %+v, want %q", ch.Buttons, wantButtons)
	}
	for i, b := range ch.Buttons {
		if b.Text != wantButtons[i] {
			t.Errorf("chapter button %d reads %q, want %q", i, b.Text, wantButtons[i])
		}
	}
	duration := float64(v.DurationMS) / 1000
	if len(ch.Marks) != 2 || ch.Marks[0].Time != 4 || ch.Marks[1].Time != 8 {
		t.Errorf("the seek bar's marks: %+v, want at 4 s and 8 s", ch.Marks)
	}
	for _, m := range ch.Marks {
		var left float64
		if _, err := fmt.Sscanf(m.Left, "%g%%", &left); err != nil || math.Abs(left-m.Time/duration*100) > 1 {
			t.Errorf("the mark at %g s is at %q of the bar, want %.1f%% of %.1f s", m.Time, m.Left, m.Time/duration*100, duration)
		}
	}
	if sk := events["skipped"]; sk.Before >= 3 || math.Abs(sk.CurrentTime-3) > 0.1 {
		t.Errorf("Skip intro at %.2f s took the video to %.2f s, want 3 s", sk.Before, sk.CurrentTime)
	}
	if c := events["chapter"]; c.CurrentTime < 8 || c.CurrentTime > 9 || c.Current != "8000" {
		t.Errorf("Enter on the last chapter: the video at %.2f s, current chapter %q; want 8 s and 8000", c.CurrentTime, c.Current)
	}
	next := events["next"]
	wantHref := fmt.Sprintf("/watch/%d?%s", second, url.Values{"collection": {course}}.Encode())
	if next.Text != "Next lesson: Second lesson" || next.Href != wantHref || next.CurrentTime < 9 {
		t.Errorf("in the credits: %+v; want \"Next lesson: Second lesson\" to %s after 9 s", next, wantHref)
	}
	done := events["done"]
	if len(done.Problems) > 0 || len(done.Accessibility) > 0 || done.Notice != "" {
		t.Errorf("console problems %q, axe-core violations %q, notice %q", done.Problems, done.Accessibility, done.Notice)
	}
}
