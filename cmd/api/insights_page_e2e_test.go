package main

// The Insights page end to end: the real binary and PostgreSQL with its periodic audience
// rollup every second, and Debian's Chromium driven by web/e2e/insights.mjs, which reads a
// media's figures and retention curve, a smaller media's figures without a curve, and a
// course's funnel, as tables and as Chart.js charts, with axe-core. The viewers' watched ranges
// are written here as the flush would have left them, one INSERT per media (the derivation from
// reports has its own tests in playback and audience); the rollup, and its noise, are the
// binary's. The figures other than the counts carry that noise (audience's package doc): the
// test compares them with what the viewers watched within five of its standard deviations.

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/binarytest"
)

type insightsChart struct {
	Chart  bool   `json:"chart"`
	Type   string `json:"type"`
	Points []int  `json:"points"`
	// Values are each series' values (null where the page gives none).
	Values  [][]*float64 `json:"values"`
	Painted float64      `json:"painted"`
}

type insightsPageEvent struct {
	Event         string            `json:"event"`
	Message       string            `json:"message"`
	Title         string            `json:"title"`
	Figures       map[string]string `json:"figures"`
	Retention     []string          `json:"retention"`
	Quality       map[string]string `json:"quality"`
	Renditions    [][]string        `json:"renditions"`
	Note          string            `json:"note"`
	CurveShown    bool              `json:"curveShown"`
	Lessons       [][]string        `json:"lessons"`
	Address       string            `json:"address"`
	Chart         insightsChart     `json:"chart"`
	Problems      []string          `json:"problems"`
	Accessibility []string          `json:"accessibility"`
	Notice        string            `json:"notice"`
}

// The noise the rollup adds (audience's curveNoise and finishedNoise: standard deviations, in
// viewers) and how many standard deviations the test allows a figure to be off by: 5σ is
// exceeded with probability 5.7·10⁻⁷ per point, about 10⁻⁴ for a run's 100 + 10 + 5 checks.
const (
	insightsCurveNoise    = 10.0
	insightsFinishedNoise = 3.0
	insightsSigmas        = 5.0
)

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
	// viewers are n viewers' last watched buckets: viewer k watched buckets 0 … end(k) (of a
	// 10-minute video, 6 s each), and finished it when end(k) ≥ 70.
	viewers := func(n int, end func(k int) int) []int32 {
		ends := make([]int32, n)
		for k := range ends {
			ends[k] = int32(end(k))
		}
		return ends
	}
	finishedOf := func(ends []int32) (n int) {
		for _, e := range ends {
			if e >= 70 {
				n++
			}
		}
		return n
	}
	// watched writes the viewers of mediaID, members first, first + 1, …, in one statement, as
	// the flush leaves them, then marks the media for the rollup: its first rollup reads them
	// all, so its figures are released over all of them.
	watched := func(mediaID, first int64, ends []int32) {
		t.Helper()
		if _, err := pool.Exec(ctx, `
			INSERT INTO playback (member_id, media_id, position_ms, event_time, updated_at, watched, watched_at, finished)
			SELECT $2 + v.k - 1, $1, v.e * 6000, now(), now(), playhead_watch_range(0, v.e),
			       CASE WHEN v.e >= 70 THEN now() END, v.e >= 70
			FROM unnest($3::int[]) WITH ORDINALITY AS v(e, k)`, mediaID, first, ends); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `INSERT INTO audience_dirty (media_id) VALUES ($1) ON CONFLICT DO NOTHING`, mediaID); err != nil {
			t.Fatal(err)
		}
	}
	// The lecture: 112 viewers (audience.MinCurveViewers and room to spare), viewer k
	// watched the first 100 − ⌊4k/5⌋ %: everyone the first 12 %, then fewer and fewer, 7 the
	// last 5 %; 38 finished (k ≤ 37).
	const lectureViewers = 112
	lectureEnds := viewers(lectureViewers, func(k int) int { return 99 - 4*k/5 })
	lecture := video("lecture")
	// Its players' quality counters, as the nodes' writes leave them (before its mark, so that
	// its first rollup reads them): 20 sessions, 19 started at 400 ms and one at 3 000 ms, one
	// failed; 400 s played, 300 at 720 lines and 100 at 360, with 4 stalls of 20 s in all.
	if _, err := pool.Exec(ctx, `INSERT INTO media_quality (media_id, metric, bucket, value) VALUES
		($1, 'sessions', 0, 20), ($1, 'startup', 400, 18), ($1, 'startup', 3000, 1), ($1, 'errors', 3, 1),
		($1, 'played_ms', 720, 300000), ($1, 'played_ms', 360, 100000), ($1, 'rebuffers', 0, 4), ($1, 'rebuffer_ms', 0, 20000)`, lecture); err != nil {
		t.Fatal(err)
	}
	watched(lecture, 100, lectureEnds)
	// A short talk with 40 viewers: figures, but too few viewers for a curve.
	smallEnds := viewers(40, func(k int) int { return 99 - 2*k })
	small := video("short talk")
	watched(small, 300, smallEnds)

	// A course of four lessons: 20 started the first, 15 the second, 9 the third, 4 the last
	// (fewer than audience.MinViewers: who finished it is withheld); viewer k watched the
	// first 100 − 2k %, so 15, 15 and 9 finished.
	var importID int64
	if err := pool.QueryRow(ctx, `INSERT INTO imports (created_by, filename, total_rows, accepted, rejected) VALUES ($1, 'course.xlsx', 4, 4, 0) RETURNING id`,
		owner).Scan(&importID); err != nil {
		t.Fatal(err)
	}
	const course = "데이터 분석 입문"
	starters := []int{20, 15, 9, 4}
	lessonFinished := make([]int, len(starters))
	for i, started := range starters {
		lesson := video(fmt.Sprintf("Lesson %d", i+1))
		if _, err := pool.Exec(ctx, `INSERT INTO import_rows (import_id, row_number, collection, chapter, position, video_url, media_id)
			VALUES ($1, $2, $3, 1, $2, 'https://example.com/v.mp4', $4)`, importID, i+1, course, lesson); err != nil {
			t.Fatal(err)
		}
		ends := viewers(started, func(k int) int { return 99 - 2*k })
		lessonFinished[i] = finishedOf(ends)
		watched(lesson, 1000, ends)
	}
	token := binarytest.Token(t, owner, false)
	// The rollup runs every second on this node: wait for it to have read every media (a mark
	// is gone once the step that took it has committed).
	for {
		var pending int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM audience_dirty`).Scan(&pending); err != nil {
			t.Fatal(err)
		}
		if pending == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for id, want := range map[int64]int{lecture: lectureViewers, small: len(smallEnds)} {
		var a struct {
			Viewers        int `json:"viewers"`
			FiguresViewers int `json:"figures_viewers"`
		}
		if err := json.Unmarshal(s.MustDo(t, http.StatusOK, http.MethodGet, s.URL("/v1/media/%d/audience", id), token, nil), &a); err != nil {
			t.Fatal(err)
		}
		if a.Viewers != want || a.FiguresViewers != want {
			t.Fatalf("media %d: %d viewers, figures over %d; want %d and %d", id, a.Viewers, a.FiguresViewers, want, want)
		}
	}

	shots := screenshotsDir(t)
	script := startBrowserScript(t, root, node, "insights.mjs", "PLAYHEAD_URL="+s.HTTPURL, "PLAYHEAD_TOKEN="+token,
		fmt.Sprintf("PLAYHEAD_MEDIA=%d", lecture), fmt.Sprintf("PLAYHEAD_SMALL_MEDIA=%d", small),
		"PLAYHEAD_COLLECTION="+course, "PLAYHEAD_SHOTS="+shots)
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

	// The lecture: the counts exact, finished within 5σ of 38, the rate what the page's
	// finished makes of the 112 viewers, the watch time within 5σ of what they watched.
	m := events["media"]
	const v = float64(lectureViewers)
	if m.Title != fmt.Sprintf("Media #%d", lecture) || m.Figures["Views"] != "112" || m.Figures["Viewers"] != "112" ||
		m.Figures["Figures cover"] != "112 viewers" {
		t.Errorf("the media's figures: %q %v; want 112 views and viewers, figures covering 112", m.Title, m.Figures)
	}
	// Its playback quality beside the curve: exact. 19 startups: the 10th (median) and the
	// 19th (95th percentile, 18.05 of 19) in order; 20 s stalled in 400 s played.
	wantQuality := map[string]string{"Sessions": "20", "Startup time (median)": "400 ms", "Startup time (95th percentile)": "3000 ms",
		"Rebuffering": "5.0 % of the time played", "Stalls": "4", "Sessions ended by an error": "5.0 %"}
	if !maps.Equal(m.Quality, wantQuality) || !slices.EqualFunc(m.Renditions, [][]string{{"360p", "25.0 %"}, {"720p", "75.0 %"}}, slices.Equal) {
		t.Errorf("the playback quality: %v, renditions %v; want %v and 360p 25 %%, 720p 75 %%", m.Quality, m.Renditions, wantQuality)
	}
	if sm := events["small"]; len(sm.Quality) != 0 || len(sm.Renditions) != 0 {
		t.Errorf("a media whose players sent no quality shows %v, %v; want none", sm.Quality, sm.Renditions)
	}
	finished := finishedOf(lectureEnds)
	checkFinished(t, "the lecture", m.Figures["Finished"], finished, lectureViewers)
	if f, err := strconv.Atoi(m.Figures["Finished"]); err == nil {
		rate := parsePercent(t, "the completion rate", m.Figures["Completion rate"])
		// The page rounds to 0.1 %.
		if math.Abs(rate-float64(f)/v) > 0.0005+1e-9 || math.Abs(rate-float64(finished)/v) > insightsSigmas*insightsFinishedNoise/v+0.0005 {
			t.Errorf("completion rate %q with %d finished; want %d / 112 = %.1f %%, within %.1f points of %.1f %%",
				m.Figures["Completion rate"], f, f, float64(f)*100/v, insightsSigmas*insightsFinishedNoise*100/v, float64(finished)*100/v)
		}
	}
	// The watch time is the sum of the 100 noisy counts: σ = 10 √100 = 100 buckets of 6 s.
	var buckets int
	for _, e := range lectureEnds {
		buckets += int(e) + 1
	}
	if got, ok := parseClock(m.Figures["Watch time"]); !ok {
		t.Errorf("watch time %q: not h:mm:ss", m.Figures["Watch time"])
	} else if want, tol := buckets*6, (insightsSigmas*insightsCurveNoise*10+0.5)*6+1; math.Abs(float64(got-want)) > tol {
		t.Errorf("watch time %q = %d s, want %d s ± %.0f s", m.Figures["Watch time"], got, want, tol)
	}

	// The curve: bucket i was watched by the viewers with end ≥ i. Each point is within 5σ of
	// that count (the rollup rounds the noisy count and clamps it into 0 … viewers, which
	// brings it no further from the true count), over 112, and the page rounds to 0.1 %. The
	// mean of each ten points is held tighter: the clamp is 1-Lipschitz, so each clamped count
	// is still sub-Gaussian with σ around a mean at most σ/√(2π) from the true count, and ten
	// of them average within 5σ/√10 of their means.
	if len(m.Retention) != 100 {
		t.Fatalf("the retention table has %d rows, want 100", len(m.Retention))
	}
	var count, shown [100]float64
	for _, e := range lectureEnds {
		for i := 0; i <= int(e); i++ {
			count[i]++
		}
	}
	pointTol := (insightsSigmas*insightsCurveNoise+0.5)/v + 0.0005
	for i, text := range m.Retention {
		shown[i] = parsePercent(t, fmt.Sprintf("retention at %d %%", i), text)
		if math.Abs(shown[i]-count[i]/v) > pointTol {
			t.Errorf("retention at %d %%: %q, want %.1f %% ± %.1f", i, text, count[i]*100/v, pointTol*100)
		}
	}
	meanTol := (insightsSigmas*insightsCurveNoise/math.Sqrt(10)+insightsCurveNoise/math.Sqrt(2*math.Pi)+0.5)/v + 0.0005
	var deciles [10]float64
	for d := range deciles {
		var want float64
		for i := 10 * d; i < 10*d+10; i++ {
			deciles[d] += shown[i] / 10
			want += count[i] / v / 10
		}
		if math.Abs(deciles[d]-want) > meanTol {
			t.Errorf("retention from %d to %d %%: mean %.1f %%, want %.1f %% ± %.1f", 10*d, 10*d+9, deciles[d]*100, want*100, meanTol*100)
		}
	}
	// The drop the viewers made shows: from everyone at the start to about a tenth at the end.
	if deciles[0] < 0.8 || deciles[9] > 0.3 {
		t.Errorf("the curve does not drop: %.1f %% in the first tenth, %.1f %% in the last", deciles[0]*100, deciles[9]*100)
	}
	if c := m.Chart; !m.CurveShown || !c.Chart || c.Type != "line" || len(c.Points) != 1 || c.Points[0] != 100 || len(c.Values) != 1 || c.Painted == 0 {
		t.Errorf("the retention chart: %+v (on view: %v), want a drawn line of 100 points", c, m.CurveShown)
	} else {
		// The line is the table's curve, which the table shows to 0.1 %.
		for i, p := range c.Values[0] {
			if p == nil || math.Abs(*p-shown[i]*100) > 0.05+1e-9 {
				t.Errorf("the retention chart at %d %%: %s, the table's %q", i, chartValue(p), m.Retention[i])
			}
		}
	}
	if want := fmt.Sprintf("%.1f points", insightsCurveNoise*100/v); !strings.Contains(m.Note, want) {
		t.Errorf("the curve's note %q does not give its noise, %s", m.Note, want)
	}

	// The short talk: figures over its 40 viewers, no curve, and the page says why.
	sm := events["small"]
	if sm.Title != fmt.Sprintf("Media #%d", small) || sm.Figures["Views"] != "40" || sm.Figures["Viewers"] != "40" ||
		sm.Figures["Figures cover"] != "40 viewers" {
		t.Errorf("the short talk's figures: %q %v; want 40 views and viewers, figures covering 40", sm.Title, sm.Figures)
	}
	checkFinished(t, "the short talk", sm.Figures["Finished"], finishedOf(smallEnds), len(smallEnds))
	if len(sm.Retention) != 0 || sm.CurveShown || sm.Chart.Chart {
		t.Errorf("the short talk shows a curve: %d rows, on view %v, chart %+v", len(sm.Retention), sm.CurveShown, sm.Chart)
	}
	if !strings.Contains(sm.Note, "shown from 100 viewers") || !strings.Contains(sm.Note, "cover 40") {
		t.Errorf("the short talk's note %q does not say that the curve is shown from 100 viewers and the figures cover 40", sm.Note)
	}

	// The funnel: started and dropped exact, finished within 5σ (and within 0 … started),
	// the last lesson's withheld.
	c := events["course"]
	if c.Title != course || len(c.Lessons) != len(starters) {
		t.Fatalf("the funnel %q: %v, want the four lessons of %q", c.Title, c.Lessons, course)
	}
	for i, row := range c.Lessons {
		dropped := "—"
		if i+1 < len(starters) {
			dropped = strconv.Itoa(starters[i] - starters[i+1])
		}
		if len(row) != 5 || row[0] != strconv.Itoa(i+1) || row[1] != fmt.Sprintf("Lesson %d", i+1) || row[2] != strconv.Itoa(starters[i]) || row[4] != dropped {
			t.Errorf("lesson %d: %q, want %d, Lesson %d, %d started, dropped %s", i+1, row, i+1, i+1, starters[i], dropped)
			continue
		}
		if starters[i] < 5 {
			if row[3] != "withheld" {
				t.Errorf("lesson %d, %d viewers: finished %q, want withheld", i+1, starters[i], row[3])
			}
			continue
		}
		checkFinished(t, fmt.Sprintf("lesson %d", i+1), row[3], lessonFinished[i], starters[i])
	}
	if ch := c.Chart; !ch.Chart || ch.Type != "bar" || fmt.Sprint(ch.Points) != "[4 4]" || len(ch.Values) != 2 || ch.Painted == 0 {
		t.Errorf("the funnel chart: %+v, want two drawn series of four bars", ch)
	} else {
		// The bars are the table's started and finished; no bar where finished is withheld.
		for i, row := range c.Lessons {
			for j, col := range []int{2, 3} {
				bar, cell := ch.Values[j][i], row[col]
				if n, err := strconv.Atoi(cell); err == nil && (bar == nil || *bar != float64(n)) || err != nil && bar != nil {
					t.Errorf("the funnel chart, lesson %d, series %d: %s, the table's %q", i+1, j, chartValue(bar), cell)
				}
			}
		}
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

// checkFinished checks a finished figure the page shows: an integer within 5σ of want (the
// rollup rounds the noisy figure, so |shown − want| ≤ 15 whenever the noise is within 15.5)
// and within 0 … viewers, where the rollup clamps it.
func checkFinished(t *testing.T, what, text string, want, viewers int) {
	t.Helper()
	f, err := strconv.Atoi(text)
	if tol := insightsSigmas * insightsFinishedNoise; err != nil || math.Abs(float64(f-want)) > tol || f < 0 || f > viewers {
		t.Errorf("%s: finished %q, want %d ± %.0f within 0 … %d", what, text, want, tol, viewers)
	}
}

// parsePercent reads a share the page shows as "37.5 %".
func parsePercent(t *testing.T, what, text string) float64 {
	t.Helper()
	p, err := strconv.ParseFloat(strings.TrimSuffix(text, " %"), 64)
	if err != nil || !strings.HasSuffix(text, " %") {
		t.Errorf("%s: %q is not a percentage", what, text)
		return math.NaN()
	}
	return p / 100
}

// chartValue formats a chart's value, or says there is none.
func chartValue(p *float64) string {
	if p == nil {
		return "none"
	}
	return strconv.FormatFloat(*p, 'f', -1, 64)
}

// parseClock reads the page's m:ss or h:mm:ss, in seconds.
func parseClock(text string) (int, bool) {
	seconds := 0
	parts := strings.Split(text, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return 0, false
	}
	for _, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return 0, false
		}
		seconds = seconds*60 + n
	}
	return seconds, true
}
