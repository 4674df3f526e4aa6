package audience_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/playhead/playhead/audience"
	"github.com/playhead/playhead/buffer"
	"github.com/playhead/playhead/collection"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/playback"
)

// step is one thing a member does in a resume-rule case, at a second of the script.
type step struct {
	at int // seconds from the script's start
	// open opens the media (POST /v1/playback/{id}); report reports pos ms of it; mark marks
	// it (or the whole course, course set) watched or unwatched.
	open, report, mark, course, watched bool
	pos                                 int32
	// credits marks the lesson's credits from this ms to its end (the owner's PUT markers).
	credits int64
}

// TestResumeRule_ListUpNextCourseAndAudienceAgree runs the scripted cases of the resume rule
// (docs/api/playback.md, at the default thresholds: resumable from 5 % or 1 min, finished at
// 95 % or the last 30 s or the credits, no resume point under 2 min) through the store, each
// on lesson 1 of a course of two 20-minute lessons (a 90-second one for the clip), and checks
// that the four readers of a member's progress say the same: the continue-watching list (the
// lesson listed in progress), up next (lesson 2 listed after it), the course's progress (the
// lesson's state and resume position) and the audience rollup (finished, exact).
func TestResumeRule_ListUpNextCourseAndAudienceAgree(t *testing.T) {
	t.Parallel()
	v := setup(t)
	ctx := context.Background()
	const lesson = int64(1_200_000)
	cases := []struct {
		name     string
		duration int64
		credits  int64 // credits_start_ms, 0 for none
		steps    []step
		// What every reader must say: the lesson listed in progress, lesson 2 up next, the
		// course's state and position of the lesson, its audience finished count.
		listed, upNext bool
		state          collection.State
		position       int32
		finished       int64
	}{
		{name: "opened and closed at 0:02", duration: lesson,
			steps: []step{{at: 0, open: true}, {at: 2, report: true, pos: 2_000}}, state: collection.NotStarted},
		{name: "opened alone", duration: lesson, steps: []step{{at: 0, open: true}}, state: collection.NotStarted},
		{name: "stopped at 3 %", duration: lesson, steps: []step{{at: 0, open: true}, {at: 40, report: true, pos: 36_000}},
			state: collection.NotStarted},
		{name: "stopped at 50 %", duration: lesson, steps: []step{{at: 0, open: true}, {at: 600, report: true, pos: 600_000}},
			listed: true, state: collection.InProgress, position: 600_000},
		{name: "stopped at 92 %", duration: lesson, steps: []step{{at: 0, report: true, pos: 1_104_000}},
			listed: true, state: collection.InProgress, position: 1_104_000},
		{name: "in the credits", duration: lesson, credits: 1_080_000, steps: []step{{at: 0, report: true, pos: 1_090_000}},
			upNext: true, state: collection.Watched, position: 1_090_000, finished: 1},
		{name: "before the credits", duration: lesson, credits: 1_080_000, steps: []step{{at: 0, report: true, pos: 1_070_000}},
			listed: true, state: collection.InProgress, position: 1_070_000},
		{name: "90-second clip stopped half-way", duration: 90_000, steps: []step{{at: 0, report: true, pos: 45_000}},
			state: collection.NotStarted},
		{name: "90-second clip to the end", duration: 90_000, steps: []step{{at: 0, report: true, pos: 88_000}},
			upNext: true, state: collection.Watched, position: 88_000, finished: 1},
		{name: "rewatch of a finished media", duration: lesson,
			steps:  []step{{at: 0, report: true, pos: 1_190_000}, {at: 60, open: true}, {at: 300, report: true, pos: 300_000}},
			listed: true, state: collection.Watched, position: 300_000, finished: 1},
		{name: "mark watched then a late report from another device", duration: lesson,
			steps:  []step{{at: 10, mark: true, watched: true}, {at: 5, report: true, pos: 400_000}},
			upNext: true, state: collection.Watched, position: int32(lesson), finished: 1},
		{name: "a mark older than the stored report (another node's clock ahead)", duration: lesson,
			steps:  []step{{at: 20, report: true, pos: 600_000}, {at: 10, mark: true, watched: true}},
			listed: true, state: collection.InProgress, position: 600_000},
		{name: "an unmark older than the stored report", duration: lesson,
			steps:  []step{{at: 20, report: true, pos: 1_190_000}, {at: 10, mark: true}},
			upNext: true, state: collection.Watched, position: 1_190_000, finished: 1},
		{name: "finished, unmarked, then a late finished report from another device", duration: lesson,
			steps: []step{{at: 0, report: true, pos: 1_190_000}, {at: 20, mark: true}, {at: 10, report: true, pos: 1_195_000}},
			state: collection.NotStarted},
		{name: "credits marked after the report, which is in them: in progress until the next report", duration: lesson,
			steps:  []step{{at: 0, report: true, pos: 1_100_000}, {at: 5, credits: 1_000_000}},
			listed: true, state: collection.InProgress, position: 1_100_000},
		{name: "credits marked after the report, then the next report", duration: lesson,
			steps:  []step{{at: 0, report: true, pos: 1_100_000}, {at: 5, credits: 1_000_000}, {at: 10, report: true, pos: 1_105_000}},
			upNext: true, state: collection.Watched, position: 1_105_000, finished: 1},
		{name: "course marked watched", duration: lesson, steps: []step{{at: 0, report: true, pos: 600_000}, {at: 10, mark: true, course: true, watched: true}},
			state: collection.Watched, position: int32(lesson), finished: 1},
	}
	start := time.Now().UTC().Truncate(time.Second).Add(-time.Hour)
	for i, tc := range cases {
		member := int64(100 + i)
		course := fmt.Sprintf("resume rule %d", i)
		first, second := v.lesson(t, tc.duration, tc.credits), v.lesson(t, lesson, 0)
		if _, err := v.pool.Exec(ctx, `
			WITH imp AS (INSERT INTO imports (created_by, filename, total_rows, accepted, rejected)
			             VALUES (1, 'rule.csv', 2, 2, 0) RETURNING id)
			INSERT INTO import_rows (import_id, row_number, collection, chapter, position, video_url, media_id)
			SELECT imp.id, n, $1, 1, n, 'https://example.com/l.mp4', m FROM imp, unnest($2::bigint[]) WITH ORDINALITY AS l(m, n)`,
			course, []int64{first, second}); err != nil {
			t.Fatal(err)
		}
		key := playback.Key{Member: member, Media: first}
		var courseMarked bool
		for _, s := range tc.steps {
			courseMarked = courseMarked || s.course
			at := start.Add(time.Duration(s.at) * time.Second)
			var err error
			switch {
			case s.credits > 0:
				_, err = v.pool.Exec(ctx, `UPDATE media SET credits_start_ms = $2, credits_end_ms = duration_ms WHERE id = $1`, first, s.credits)
			case s.open:
				_, err = v.store.Open(ctx, key, at, course)
			case s.report:
				err = v.store.Flush(ctx, []buffer.Entry[playback.Key, playback.Position]{{Key: key, Value: playback.Position{PositionMS: s.pos, EventTime: at}}})
			case s.course:
				err = v.store.Mark(ctx, member, []int64{first, second}, s.watched, at)
			default:
				err = v.store.Mark(ctx, member, []int64{first}, s.watched, at)
			}
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
		}

		items, _, err := v.store.List(ctx, member, nil, 50)
		if err != nil {
			t.Fatal(err)
		}
		var listed, upNext bool
		for _, it := range items {
			listed = listed || it.MediaID == first && it.UpNext == nil
			upNext = upNext || it.MediaID == second && it.UpNext != nil && it.UpNext.AfterMediaID == first
		}
		if listed != tc.listed || upNext != tc.upNext || len(items) != btoi(tc.listed)+btoi(tc.upNext) {
			t.Errorf("%s: continue watching %+v: lesson 1 listed %v, lesson 2 up next %v; want %v, %v",
				tc.name, items, listed, upNext, tc.listed, tc.upNext)
		}
		p, err := collection.NewStore(v.pool).Progress(ctx, course, member)
		if err != nil {
			t.Fatal(err)
		}
		if it := p.Items[0]; it.State != tc.state || it.PositionMS != tc.position {
			t.Errorf("%s: course progress of lesson 1: %s at %d; want %s at %d", tc.name, it.State, it.PositionMS, tc.state, tc.position)
		}
		if courseMarked && p.Items[1].State != collection.Watched {
			t.Errorf("%s: course progress of lesson 2: %s; want watched", tc.name, p.Items[1].State)
		}
		// The rollup releases figures from MinViewers viewers: as many other members finished the
		// lesson, so the figure is theirs plus this member's finish.
		for o := range int64(audience.MinViewers) {
			other := playback.Key{Member: 10_000 + o, Media: first}
			if err := v.store.Flush(ctx, []buffer.Entry[playback.Key, playback.Position]{
				{Key: other, Value: playback.Position{PositionMS: int32(tc.duration), EventTime: start}}}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := audience.RollupWithoutNoise(ctx, v.pool); err != nil {
			t.Fatal(err)
		}
		var finished int64
		if err := v.pool.QueryRow(ctx, `SELECT coalesce((SELECT finished FROM media_audience WHERE media_id = $1), 0)`, first).Scan(&finished); err != nil {
			t.Fatal(err)
		}
		if finished != audience.MinViewers+tc.finished {
			t.Errorf("%s: audience rollup: %d finished; want %d", tc.name, finished-audience.MinViewers, tc.finished)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// lesson creates a READY public media lasting durationMS, whose credits start at creditsMS
// (and run to the end) unless that is 0.
func (v *viewing) lesson(t *testing.T, durationMS, creditsMS int64) int64 {
	t.Helper()
	m, err := v.media.Create(context.Background(), media.Media{OwnerID: 1, Title: "lesson", Status: media.StatusReady,
		Visibility: media.VisibilityPublic, DurationMS: durationMS})
	if err != nil {
		t.Fatal(err)
	}
	if creditsMS > 0 {
		if _, err := v.pool.Exec(context.Background(), `UPDATE media SET credits_start_ms = $2, credits_end_ms = duration_ms WHERE id = $1`,
			m.ID, creditsMS); err != nil {
			t.Fatal(err)
		}
	}
	return m.ID
}
