package audience_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/audience"
	"github.com/playhead/playhead/auth"
)

// 200 scripted viewers of a 100 s video (a bucket is a second; finished is at 70 s, the last
// 30 s), reporting every 5 s: 50 watch it all; 60 stop at 30 s; 50 watch 10 s, skip to 60 s
// and watch to the end; 40 watch to 50 s, go back to 20 s and watch to 50 s again. By hand:
// buckets 0–10 are watched by all 200, 11–30 by 150 (all but the skippers), 31–50 by 90 (the
// full watchers and the rewatchers), 51–59 by 50, 60–99 by 100; 100 finished (completion
// 0.5); watched buckets 50·100 + 60·31 + 50·51 + 40·51 = 11 450, so a watch time of
// 11 450 s.
func TestRollup_ScriptedViewersGiveTheHandComputedFigures(t *testing.T) {
	t.Parallel()
	v := setup(t)
	ctx := context.Background()
	const owner = 7
	id := v.video(t, owner, "lecture")
	var reports []report
	member := int64(100)
	next := func() int64 { member++; return member }
	for range 50 {
		reports, _ = play(reports, next(), id, 0, 0, 100)
	}
	for range 60 {
		reports, _ = play(reports, next(), id, 0, 0, 30)
	}
	for range 50 {
		var at int
		reports, at = play(reports, next(), id, 0, 0, 10)
		reports, _ = play(reports, member, id, at, 60, 100)
	}
	for range 40 {
		var at int
		reports, at = play(reports, next(), id, 0, 0, 50)
		reports, _ = play(reports, member, id, at, 20, 50)
	}
	v.flush(t, reports)

	before, err := audience.NewStore(v.pool).Media(ctx, id, auth.Identity{MemberID: owner})
	if err != nil || before.ComputedAt != nil || before.Views != 0 {
		t.Fatalf("before any rollup: %+v, %v; want no figures yet", before, err)
	}
	// Exact figures (no noise), to check the counting against the hand's.
	if n, err := audience.RollupWithoutNoise(ctx, v.pool); err != nil || n != 1 {
		t.Fatalf("rollup: %d media, %v; want 1", n, err)
	}
	a, err := audience.NewStore(v.pool).Media(ctx, id, auth.Identity{MemberID: owner})
	if err != nil {
		t.Fatal(err)
	}
	if a.Views != 200 || a.Viewers != 200 || a.FiguresViewers != 200 || a.Withheld || a.Finished == nil || *a.Finished != 100 || a.CompletionRate == nil || *a.CompletionRate != 0.5 ||
		a.WatchTimeMS == nil || *a.WatchTimeMS != 11_450_000 || a.ComputedAt == nil || len(a.Retention) != 100 {
		t.Fatalf("figures %+v; want 200 views, viewers and figures' viewers, 100 finished, completion 0.5, watch time 11 450 s, 100 points", a)
	}
	for i, share := range a.Retention {
		var want float64
		switch {
		case i <= 10:
			want = 200
		case i <= 30:
			want = 150
		case i <= 50:
			want = 90
		case i <= 59:
			want = 50
		default:
			want = 100
		}
		if want /= 200; math.Abs(share-want) > 1e-9 {
			t.Errorf("retention at %d %%: %v, want %v", i, share, want)
		}
	}

	// Only media with new positions are read again; a new position marks its media again.
	if n, err := audience.Rollup(ctx, v.pool); err != nil || n != 0 {
		t.Errorf("a second rollup without new positions: %d media, %v; want 0", n, err)
	}
	reports, _ = play(nil, next(), id, 500, 0, 5)
	v.flush(t, reports)
	if n, err := audience.Rollup(ctx, v.pool); err != nil || n != 1 {
		t.Errorf("a rollup after a new viewer: %d media, %v; want 1", n, err)
	}
	// The counts follow; the other figures stay those released at 200 viewers until the
	// audience grows by an eighth (225).
	if a, err = audience.NewStore(v.pool).Media(ctx, id, auth.Identity{MemberID: 1, Admin: true}); err != nil || a.Viewers != 201 ||
		a.FiguresViewers != 200 || a.Finished == nil || *a.Finished != 100 {
		t.Errorf("an admin reads %d viewers, figures over %d with %v finished (%v); want 201, and the figures released over 200 (100 finished)",
			a.Viewers, a.FiguresViewers, a.Finished, err)
	}

	// Another member reads nothing, as if the media did not exist.
	for _, who := range []auth.Identity{{MemberID: 8}, {MemberID: 101}} {
		if _, err := audience.NewStore(v.pool).Media(ctx, id, who); apperr.CodeOf(err) != apperr.NotFound {
			t.Errorf("member %d reading the audience: %v, want not found", who.MemberID, err)
		}
	}
	if _, err := audience.NewStore(v.pool).Media(ctx, id+1000, auth.Identity{MemberID: 1, Admin: true}); apperr.CodeOf(err) != apperr.NotFound {
		t.Errorf("no such media: %v, want not found", err)
	}
}

// A course of five lessons with 30 scripted students: 10 finish every lesson, 12 finish the
// first two and never start the third, 8 finish the first two and stop halfway through the
// third. The funnel: started 30, 30, 18, 10, 10; finished 30, 30, 10, 10, 10; the drops 0, 12,
// 8, 0: where the script makes them stop.
func TestCollection_TheFunnelShowsWhereStudentsStop(t *testing.T) {
	t.Parallel()
	v := setup(t)
	ctx := context.Background()
	const admin = 1
	if _, err := v.pool.Exec(ctx, `INSERT INTO members (id) VALUES ($1) ON CONFLICT DO NOTHING`, admin); err != nil {
		t.Fatal(err)
	}
	var importID int64
	if err := v.pool.QueryRow(ctx, `INSERT INTO imports (created_by, filename, total_rows, accepted, rejected) VALUES ($1, 'course.xlsx', 5, 5, 0) RETURNING id`,
		admin).Scan(&importID); err != nil {
		t.Fatal(err)
	}
	lessons := make([]int64, 5)
	for i := range lessons {
		lessons[i] = v.video(t, admin, fmt.Sprintf("lesson %d", i+1))
		if _, err := v.pool.Exec(ctx, `INSERT INTO import_rows (import_id, row_number, collection, chapter, position, video_url, media_id)
			VALUES ($1, $2, '파이썬 기초', 1, $2, 'https://example.com/v.mp4', $3)`, importID, i+1, lessons[i]); err != nil {
			t.Fatal(err)
		}
	}
	var reports []report
	student := int64(1000)
	watch := func(n, finishedLessons int, halfOfNext bool) {
		for range n {
			student++
			at := 0
			for l := range finishedLessons {
				reports, at = play(reports, student, lessons[l], at, 0, 100)
			}
			if halfOfNext {
				reports, _ = play(reports, student, lessons[finishedLessons], at, 0, 50)
			}
		}
	}
	watch(10, 5, false)
	watch(12, 2, false)
	watch(8, 2, true)
	v.flush(t, reports)
	if _, err := audience.RollupWithoutNoise(ctx, v.pool); err != nil { // exact figures, to check the funnel's
		t.Fatal(err)
	}
	c, err := audience.NewStore(v.pool).Collection(ctx, "파이썬 기초", auth.Identity{MemberID: admin})
	if err != nil {
		t.Fatal(err)
	}
	wantStarted, wantFinished, wantDropped := []int64{30, 30, 18, 10, 10}, []int64{30, 30, 10, 10, 10}, []int64{0, 12, 8, 0}
	if len(c.Lessons) != 5 || c.ComputedAt == nil {
		t.Fatalf("funnel %+v, want five lessons rolled up", c)
	}
	for i, l := range c.Lessons {
		if l.MediaID != lessons[i] || l.Started != wantStarted[i] || l.Finished == nil || *l.Finished != wantFinished[i] {
			t.Errorf("lesson %d: %+v, want media %d started by %d, finished by %d", i+1, l, lessons[i], wantStarted[i], wantFinished[i])
		}
		switch {
		case i < 4 && (l.Dropped == nil || *l.Dropped != wantDropped[i]):
			t.Errorf("lesson %d: dropped %v, want %d", i+1, l.Dropped, wantDropped[i])
		case i == 4 && l.Dropped != nil:
			t.Errorf("the last lesson: dropped %d, want none", *l.Dropped)
		}
	}
	// A member who owns none of the lessons, and a collection nobody imported: not found.
	if _, err := audience.NewStore(v.pool).Collection(ctx, "파이썬 기초", auth.Identity{MemberID: 1001}); apperr.CodeOf(err) != apperr.NotFound {
		t.Errorf("a student reading the funnel: %v, want not found", err)
	}
	if _, err := audience.NewStore(v.pool).Collection(ctx, "none", auth.Identity{MemberID: admin, Admin: true}); apperr.CodeOf(err) != apperr.NotFound {
		t.Errorf("a collection nobody imported: %v, want not found", err)
	}
}
