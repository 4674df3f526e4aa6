package main

// Up next and the course page end to end: the real binary and PostgreSQL, positions reported
// through the API, and Debian's Chromium driven by playwright-core from web/e2e/course.mjs,
// which reads the home page and the course page as a member sees them and checks them with
// axe-core.

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/internal/binarytest"
)

// coursePageLessonMS is every seeded lesson's duration: 5 min.
const coursePageLessonMS = 300_000

type coursePageCard struct {
	MediaID int64  `json:"mediaId"`
	Text    string `json:"text"`
	Href    string `json:"href"`
}

type coursePageCourse struct {
	Collection string `json:"collection"`
	Text       string `json:"text"`
	Href       string `json:"href"`
	ResumeHref string `json:"resumeHref"`
}

type coursePageLesson struct {
	MediaID int64  `json:"mediaId"`
	Text    string `json:"text"`
}

type coursePageEvent struct {
	Event   string             `json:"event"`
	Message string             `json:"message"`
	Items   []coursePageCard   `json:"items"`
	Courses []coursePageCourse `json:"courses"`
	URL     string             `json:"url"`
	Title   string             `json:"title"`
	Totals  string             `json:"totals"`
	Resume  string             `json:"resume"`
	// ResumeHref is the course page's resume button's link.
	ResumeHref string             `json:"resumeHref"`
	Lessons    []coursePageLesson `json:"lessons"`
	Request    string             `json:"request"`
	Status     int                `json:"status"`
	Problems   []string           `json:"problems"`
	// Accessibility are the axe-core violations (WCAG 2.1 A and AA) of both pages.
	Accessibility []string `json:"accessibility"`
	Notice        string   `json:"notice"`
}

// TestCoursePage_UpNextAndProgressInChromium: a member watched lessons 1 and 2 of a 5-lesson
// course, is 30% into lesson 5, and reports lesson 3 at 96% through the API. In Chromium the
// home page shows lesson 4 labelled "Up next" (in words), linking to the player from the
// course, and lists the course under "Your courses"; the course page shows every lesson's state
// in words, 3 of 5 watched, and resumes at lesson 4; its resume button opens the player, which
// passes the collection to POST /v1/playback. Neither page has an axe-core violation. The
// course's name carries HTML, shown as text everywhere.
func TestCoursePage_UpNextAndProgressInChromium(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	node := requireBrowser(t, root)
	s := binarytest.Start(t, map[string]string{"PLAYHEAD_PUT_RATE": "0", "PLAYHEAD_FLUSH_INTERVAL": "200ms"})
	pool := s.Pool(t)
	// The name (and so every lesson title, "<name> lesson N") carries markup: the pages must show
	// it as text. A page that parsed it would lose the tags from the text the test reads, and
	// the onerror would retitle the page.
	const course = `파이썬 기초 (Python basics) <img src=x onerror="document.title='xss'"><b>&amp;</b>`
	lessons := seedCourse(t, pool, course, 5)
	token := binarytest.Token(t, 1, false)

	// Lesson 5 in progress first, then 1, 2 and 3 in order: lesson 3 is the newest finished.
	for _, r := range []struct {
		lesson   int
		fraction float64
	}{{5, 0.30}, {1, 1}, {2, 1}, {3, 0.96}} {
		body := map[string]int{"position_ms": int(r.fraction * coursePageLessonMS)}
		s.MustDo(t, http.StatusNoContent, http.MethodPut, s.URL("/v1/playback/%d", lessons[r.lesson-1]), token, body)
		waitPlaybackRow(t, pool, 1, lessons[r.lesson-1], int(r.fraction*coursePageLessonMS))
	}

	shots := screenshotsDir(t)
	script := startBrowserScript(t, root, node, "course.mjs", "PLAYHEAD_URL="+s.HTTPURL, "PLAYHEAD_TOKEN="+token, "PLAYHEAD_SHOTS="+shots)
	events := map[string]coursePageEvent{}
	for {
		var ev coursePageEvent
		if !script.next(t, &ev) {
			break
		}
		events[ev.Event] = ev
	}
	if _, err := script.wait(); err != nil || events["error"].Message != "" {
		t.Fatalf("course.mjs failed (%v): %s", err, events["error"].Message)
	}

	// The home page: lesson 4 up next, in words, opening the player from the course; lesson 5
	// in progress; nothing of lessons 1-3.
	home := events["home"]
	cards := map[int64]coursePageCard{}
	for _, c := range home.Items {
		cards[c.MediaID] = c
	}
	if len(home.Items) != 2 {
		t.Errorf("the home page shows %d continue-watching cards %+v, want 2 (lesson 4 up next, lesson 5)", len(home.Items), home.Items)
	}
	next, ok := cards[lessons[3]]
	wantHref := fmt.Sprintf("/watch/%d?%s", lessons[3], url.Values{"collection": {course}}.Encode())
	if !ok || !strings.HasPrefix(next.Text, "Up next") || next.Href != wantHref || !strings.Contains(next.Text, "After "+course+" lesson 3") {
		t.Errorf("the home page shows lesson 4 as %+v; want it labelled \"Up next\", after lesson 3, linking to %s", next, wantHref)
	}
	if c, ok := cards[lessons[4]]; !ok || strings.Contains(c.Text, "Up next") || c.Href != fmt.Sprintf("/watch/%d", lessons[4]) {
		t.Errorf("the home page shows lesson 5 as %+v (found %v); want it in progress, not up next", c, ok)
	}
	wantCourseHref := "/course?" + url.Values{"c": {course}}.Encode()
	if len(home.Courses) != 1 || home.Courses[0].Collection != course || home.Courses[0].Href != wantCourseHref ||
		!strings.Contains(home.Courses[0].Text, "3 of 5 watched") || home.Courses[0].ResumeHref != wantHref {
		t.Errorf("\"Your courses\" shows %+v; want %q, 3 of 5 watched, linking to %s and resuming at %s", home.Courses, course, wantCourseHref, wantHref)
	}

	// The course page: each lesson's state in words, the totals, resume at lesson 4.
	page := events["course"]
	if page.URL != s.HTTPURL+wantCourseHref || page.Title != course {
		t.Errorf("the course page is %s titled %q; want %s%s titled %q", page.URL, page.Title, s.HTTPURL, wantCourseHref, course)
	}
	// Time left: lesson 4 whole, and lesson 5 from 30%: 5:00 + 3:30.
	if page.Totals != "3 of 5 watched · 8:30 left" {
		t.Errorf("the course page's totals say %q, want \"3 of 5 watched · 8:30 left\"", page.Totals)
	}
	if page.Resume != "Resume: "+course+" lesson 4" || page.ResumeHref != wantHref {
		t.Errorf("the course page's resume button says %q and links to %s; want lesson 4 at %s", page.Resume, page.ResumeHref, wantHref)
	}
	// Each line starts with a mark (decoration, hidden from screen readers); the state is in words.
	wantStates := []string{"✓ Chapter 1 · Lesson 1 %s lesson 1 Watched", "✓ Chapter 1 · Lesson 2 %s lesson 2 Watched",
		"✓ Chapter 1 · Lesson 3 %s lesson 3 Watched", "○ Chapter 1 · Lesson 4 %s lesson 4 Not started · Resume here",
		"◐ Chapter 1 · Lesson 5 %s lesson 5 In progress · 1:30 of 5:00"}
	if len(page.Lessons) != len(wantStates) {
		t.Fatalf("the course page lists %d lessons %+v, want 5", len(page.Lessons), page.Lessons)
	}
	for i, l := range page.Lessons {
		want := fmt.Sprintf(wantStates[i], course) + " 5:00"
		if l.MediaID != lessons[i] || l.Text != want {
			t.Errorf("lesson %d on the course page reads %q (media %d), want %q (media %d)", i+1, l.Text, l.MediaID, want, lessons[i])
		}
	}

	// Resume opened the player from the course, and the server recorded the collection.
	opened := events["opened"]
	wantOpen := fmt.Sprintf("/v1/playback/%d?%s", lessons[3], url.Values{"collection": {course}}.Encode())
	if opened.URL != wantHref || opened.Request != wantOpen || opened.Status != http.StatusOK {
		t.Errorf("resume opened %s and sent POST %s (%d); want %s and POST %s (200)", opened.URL, opened.Request, opened.Status, wantHref, wantOpen)
	}
	var from *string
	if err := pool.QueryRow(t.Context(), `SELECT collection FROM playback WHERE member_id = 1 AND media_id = $1`, lessons[3]).Scan(&from); err != nil {
		t.Fatalf("read lesson 4's playback row: %v", err)
	}
	if from == nil || *from != course {
		t.Errorf("lesson 4's playback row has collection %v, want %q", from, course)
	}

	if empty := events["empty"]; empty.Title != "This course has no lessons." || empty.Totals != "0 of 0 watched · 0:00 left" || empty.Resume != "" {
		t.Errorf("the page of a course that does not exist shows %q, %q, resume %q; want no lessons, 0 of 0 and no resume button",
			empty.Title, empty.Totals, empty.Resume)
	}

	done := events["done"]
	if len(done.Problems) > 0 || done.Notice != "" {
		t.Errorf("the pages reported problems %q, notice %q", done.Problems, done.Notice)
	}
	for _, v := range done.Accessibility {
		t.Errorf("accessibility violation: %s", v)
	}
	for _, name := range []string{"home-up-next.png", "course.png"} {
		b, err := os.ReadFile(filepath.Join(shots, name))
		if err != nil || len(b) < 1000 || string(b[1:4]) != "PNG" {
			t.Errorf("screenshot %s: %d bytes, %v; want a PNG", filepath.Join(shots, name), len(b), err)
		}
	}
}

// seedCourse imports n READY public lessons of member 1 into collection (chapter 1, orders
// 1…n) and returns their media ids in order. The lessons have no video files: the test looks
// at the pages, not at playback.
func seedCourse(t *testing.T, pool *pgxpool.Pool, collection string, n int) []int64 {
	t.Helper()
	ctx := t.Context()
	if _, err := pool.Exec(ctx, `INSERT INTO members (id) VALUES (1) ON CONFLICT DO NOTHING`); err != nil {
		t.Fatal(err)
	}
	var importID int64
	if err := pool.QueryRow(ctx, `INSERT INTO imports (created_by, filename, total_rows, accepted, rejected)
		VALUES (1, 'course.csv', $1, $1, 0) RETURNING id`, n).Scan(&importID); err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, n)
	for i := range ids {
		err := pool.QueryRow(ctx, `
			WITH m AS (INSERT INTO media (owner_id, title, status, visibility, duration_ms, hls_key)
			           VALUES (1, $1, 'READY', 'PUBLIC', $2, 'hls/none/master.m3u8') RETURNING id)
			INSERT INTO import_rows (import_id, row_number, collection, chapter, position, video_url, media_id)
			SELECT $3, $4, $5, 1, $4 - 1, 'https://example.com/v.mp4', m.id FROM m RETURNING media_id`,
			fmt.Sprintf("%s lesson %d", collection, i+1), coursePageLessonMS, importID, i+2, collection).Scan(&ids[i])
		if err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// waitPlaybackRow waits for the write-behind buffer to flush member's position in media.
func waitPlaybackRow(t *testing.T, pool *pgxpool.Pool, member, media int64, positionMS int) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; {
		if int(dbPosition(t, pool, member, media)) == positionMS {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("position %d of member %d in media %d never reached the database", positionMS, member, media)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
