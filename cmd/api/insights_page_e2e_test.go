package main

// The Insights page end to end (issue 35, must-show 4): the real binary and PostgreSQL with
// its periodic audience rollup every second, and Debian's Chromium driven by
// web/e2e/insights.mjs, which reads a media's figures and retention curve and a course's
// funnel, as tables and as Chart.js charts, with axe-core. The viewers' watched ranges are
// written here as the flush would have left them (the derivation from reports has its own
// tests in playback and audience); the rollup is the binary's.

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/binarytest"
)

type insightsChart struct {
	Chart   bool    `json:"chart"`
	Type    string  `json:"type"`
	Points  []int   `json:"points"`
	Painted float64 `json:"painted"`
}

type insightsPageEvent struct {
	Event         string            `json:"event"`
	Message       string            `json:"message"`
	Title         string            `json:"title"`
	Figures       map[string]string `json:"figures"`
	Retention     []string          `json:"retention"`
	Lessons       [][]string        `json:"lessons"`
	Address       string            `json:"address"`
	Chart         insightsChart     `json:"chart"`
	Problems      []string          `json:"problems"`
	Accessibility []string          `json:"accessibility"`
	Notice        string            `json:"notice"`
}

func TestInsightsPage_RetentionAndFunnelInChromium(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	node := requireBrowser(t, root)
	env := pipelineEnv("all", "e2e-insights", t.TempDir(), t.TempDir(), "ultrafast")
	env["PLAYHEAD_AUDIENCE_INTERVAL"] = "1s"
	s := binarytest.Start(t, env)
	pool := s.Pool(t)
	const owner = 41
	ctx := t.Context()
	video := func(title string) int64 {
		t.Helper()
		var id int64
		if err := pool.QueryRow(ctx, `
			WITH m AS (INSERT INTO members (id) VALUES ($1) ON CONFLICT DO NOTHING)
			INSERT INTO media (owner_id, title, status, visibility, duration_ms) VALUES ($1, $2, 'READY', 'PUBLIC', 600000) RETURNING id`,
			owner, title).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	// watched writes n viewers of mediaID from member first on: viewer k watched the first
	// 100 − 2k % of it, and those who reached 70 % finished it.
	watched := func(mediaID, first int64, n int) {
		t.Helper()
		if _, err := pool.Exec(ctx, `
			INSERT INTO playback (member_id, media_id, position_ms, event_time, updated_at, watched, watched_at, finished)
			SELECT $2 + k, $1, (99 - 2 * k) * 6000, now(), now(), playhead_watch_range(0, 99 - 2 * k),
			       CASE WHEN 99 - 2 * k >= 70 THEN now() END, 99 - 2 * k >= 70
			FROM generate_series(0, $3 - 1) AS k`, mediaID, first, n); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `INSERT INTO audience_dirty (media_id) VALUES ($1) ON CONFLICT DO NOTHING`, mediaID); err != nil {
			t.Fatal(err)
		}
	}
	lecture := video("lecture")
	watched(lecture, 100, 40) // viewers 0..39 watched 0..99-2k %: 15 finished (k ≤ 14)

	// A course of four lessons: 20 started the first, 15 the second, 9 the third, 4 the last
	// (fewer than audience.MinViewers: who finished it is withheld).
	var importID int64
	if err := pool.QueryRow(ctx, `INSERT INTO imports (created_by, filename, total_rows, accepted, rejected) VALUES ($1, 'course.xlsx', 4, 4, 0) RETURNING id`,
		owner).Scan(&importID); err != nil {
		t.Fatal(err)
	}
	const course = "데이터 분석 입문"
	for i, started := range []int{20, 15, 9, 4} {
		lesson := video(fmt.Sprintf("Lesson %d", i+1))
		if _, err := pool.Exec(ctx, `INSERT INTO import_rows (import_id, row_number, collection, chapter, position, video_url, media_id)
			VALUES ($1, $2, $3, 1, $2, 'https://example.com/v.mp4', $4)`, importID, i+1, course, lesson); err != nil {
			t.Fatal(err)
		}
		watched(lesson, 1000, started)
	}
	token := binarytest.Token(t, owner, false)
	// The rollup runs every second on this node: wait for it to have read every media.
	deadline := time.Now().Add(time.Minute)
	for {
		var pending int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM audience_dirty`).Scan(&pending); err != nil {
			t.Fatal(err)
		}
		if pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rollup left %d media unread for a minute", pending)
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.MustDo(t, http.StatusOK, http.MethodGet, s.URL("/v1/media/%d/audience", lecture), token, nil)

	shots := screenshotsDir(t)
	script := startBrowserScript(t, root, node, "insights.mjs", "PLAYHEAD_URL="+s.HTTPURL, "PLAYHEAD_TOKEN="+token,
		fmt.Sprintf("PLAYHEAD_MEDIA=%d", lecture), "PLAYHEAD_COLLECTION="+course, "PLAYHEAD_SHOTS="+shots)
	events := map[string]insightsPageEvent{}
	for {
		var ev insightsPageEvent
		if !script.next(t, &ev) {
			break
		}
		events[ev.Event] = ev
	}
	if _, err := script.wait(); err != nil || events["error"].Message != "" {
		t.Fatalf("insights.mjs failed (%v): %s", err, events["error"].Message)
	}

	m := events["media"]
	if m.Title != fmt.Sprintf("Media #%d", lecture) || m.Figures["Views"] != "40" || m.Figures["Viewers"] != "40" || m.Figures["Finished"] != "15" ||
		m.Figures["Completion rate"] != "37.5 %" {
		t.Errorf("the media's figures: %q %v; want 40 views and viewers, 15 finished, 37.5 %%", m.Title, m.Figures)
	}
	// Bucket i was watched by the viewers with 99 − 2k ≥ i: min(40, floor((99 − i) / 2) + 1).
	if len(m.Retention) != 100 {
		t.Fatalf("the retention table has %d rows, want 100", len(m.Retention))
	}
	for _, i := range []int{0, 19, 20, 50, 98, 99} {
		n := min(40, (99-i)/2+1)
		if want := fmt.Sprintf("%.1f %%", float64(n)*100/40); m.Retention[i] != want {
			t.Errorf("retention at %d %%: %q, want %q", i, m.Retention[i], want)
		}
	}
	if c := m.Chart; !c.Chart || c.Type != "line" || len(c.Points) != 1 || c.Points[0] != 100 || c.Painted == 0 {
		t.Errorf("the retention chart: %+v, want a drawn line of 100 points", c)
	}

	c := events["course"]
	want := [][]string{{"1", "Lesson 1", "20", "15", "5"}, {"2", "Lesson 2", "15", "15", "6"}, {"3", "Lesson 3", "9", "9", "5"}, {"4", "Lesson 4", "4", "withheld", "—"}}
	if c.Title != course || fmt.Sprint(c.Lessons) != fmt.Sprint(want) {
		t.Errorf("the funnel %q: %v, want %v", c.Title, c.Lessons, want)
	}
	if ch := c.Chart; !ch.Chart || ch.Type != "bar" || fmt.Sprint(ch.Points) != "[4 4]" || ch.Painted == 0 {
		t.Errorf("the funnel chart: %+v, want two drawn series of four bars", ch)
	}
	done := events["done"]
	if len(done.Problems) > 0 || done.Notice != "" {
		t.Errorf("the page reported problems %q, notice %q", done.Problems, done.Notice)
	}
	for _, v := range done.Accessibility {
		t.Errorf("accessibility violation: %s", v)
	}
	if b, err := os.ReadFile(filepath.Join(shots, "insights.png")); err != nil || len(b) < 1000 || string(b[1:4]) != "PNG" {
		t.Errorf("screenshot insights.png: %d bytes, %v; want a PNG", len(b), err)
	}
}
