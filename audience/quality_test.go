package audience_test

import (
	"context"
	"testing"

	"github.com/playhead/playhead/audience"
	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/quality"
)

// Twenty sessions' quality reports, through an Aggregator's write, rolled up: startup times of
// 100, 200, … 1 900 ms and one session failed before its first frame; 60 s played at 720 lines
// and 20 s at 360 with 4 s rebuffering in 2 stalls. By hand: p50 the 10th of 19 startups
// (1 000), p95 the 19th (18.05 of 19: 1 900; the 90th percentile would be the 18th),
// rebuffering 4/80 = 0.05, error rate 1/20, renditions 360: 0.25, 720: 0.75.
// The figures are withheld with the audience's, below audience.MinViewers viewers: another
// media with ten sessions reported by one member's player shows none, nor one with four
// sessions.
func TestRollup_PlaybackQuality(t *testing.T) {
	t.Parallel()
	v := setup(t)
	ctx := context.Background()
	const owner = 7
	id, few, one := v.video(t, owner, "lecture"), v.video(t, owner, "few"), v.video(t, owner, "one viewer")
	errs := v.video(t, owner, "more errors than sessions")
	var reports []report
	for member := int64(100); member < 100+audience.MinViewers; member++ {
		reports, _ = play(reports, member, id, 0, 0, 20)
		reports, _ = play(reports, member, few, 0, 0, 20)
		reports, _ = play(reports, member, errs, 0, 0, 20)
	}
	reports, _ = play(reports, 100, one, 0, 0, 20)
	v.flush(t, reports)
	agg, err := quality.New(quality.Config{Pool: v.pool})
	if err != nil {
		t.Fatal(err)
	}
	for ms := int32(100); ms <= 1900; ms += 100 {
		agg.Add(id, quality.Report{StartupMS: ms, Has: quality.HasStartup})
	}
	agg.Add(id, quality.Report{StartupMS: 5000, Error: 2, Has: quality.HasStartup | quality.HasError})
	for range 12 {
		agg.Add(id, quality.Report{PlayedMS: 5000, Height: 720, Has: quality.HasPlayed | quality.HasHeight})
	}
	for range 4 {
		agg.Add(id, quality.Report{PlayedMS: 5000, Height: 360, Has: quality.HasPlayed | quality.HasHeight})
	}
	agg.Add(id, quality.Report{RebufferCount: 2, RebufferMS: 4000, Has: quality.HasRebufferCount | quality.HasRebufferMS})
	for range 4 {
		agg.Add(few, quality.Report{StartupMS: 100, Has: quality.HasStartup})
	}
	for range 10 {
		agg.Add(one, quality.Report{StartupMS: 600_000, Has: quality.HasStartup})
	}
	// Players may say any height: the shares list the quality.MaxHeights most played, the rest
	// as of an unknown height (0).
	for h := int32(1); h <= quality.MaxHeights+4; h++ {
		agg.Add(errs, quality.Report{PlayedMS: 1000 + h, Height: h, Has: quality.HasPlayed | quality.HasHeight})
		if err := agg.Write(ctx); err != nil { // a period each, as a node's writes would
			t.Fatal(err)
		}
	}
	// Players may send an error without a session: the rate stays a share of the sessions.
	for range 5 {
		agg.Add(errs, quality.Report{StartupMS: 100, Has: quality.HasStartup})
	}
	for range 20 {
		agg.Add(errs, quality.Report{Error: 2, Has: quality.HasError})
	}
	if err := agg.Write(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := audience.RollupWithoutNoise(ctx, v.pool); err != nil {
		t.Fatal(err)
	}
	a, err := audience.NewStore(v.pool).Media(ctx, id, auth.Identity{MemberID: owner})
	if err != nil {
		t.Fatal(err)
	}
	q := a.Quality
	if q == nil {
		t.Fatalf("no quality: %+v", a)
	}
	if q.Sessions != 20 || q.StartupP50MS == nil || *q.StartupP50MS != 1000 || q.StartupP95MS == nil || *q.StartupP95MS != 1900 ||
		q.RebufferRatio == nil || *q.RebufferRatio != 0.05 || q.Rebuffers != 2 || q.ErrorRate != 0.05 {
		t.Errorf("quality %+v (p50 %v, p95 %v, ratio %v); want 20 sessions, p50 1000, p95 1900, ratio 0.05, 2 rebuffers, error rate 0.05",
			q, deref(q.StartupP50MS), deref(q.StartupP95MS), deref(q.RebufferRatio))
	}
	want := []audience.Rendition{{Height: 360, Share: 0.25}, {Height: 720, Share: 0.75}}
	if len(q.Renditions) != 2 || q.Renditions[0] != want[0] || q.Renditions[1] != want[1] {
		t.Errorf("renditions %+v; want %+v", q.Renditions, want)
	}
	if a, err := audience.NewStore(v.pool).Media(ctx, few, auth.Identity{MemberID: owner}); err != nil || a.Quality != nil {
		t.Errorf("four sessions: quality %+v, %v; want withheld (null)", a.Quality, err)
	}
	if a, err := audience.NewStore(v.pool).Media(ctx, errs, auth.Identity{MemberID: owner}); err != nil || a.Quality == nil || a.Quality.ErrorRate != 1 {
		t.Errorf("20 errors in 5 sessions: quality %+v, %v; want an error rate of 1", a.Quality, err)
	} else if r := a.Quality.Renditions; len(r) != quality.MaxHeights+1 || r[0].Height != 0 || r[1].Height != 5 || r[len(r)-1].Height != quality.MaxHeights+4 {
		t.Errorf("renditions of %d heights: %+v; want 0 (the 4 least played) and 5 … %d", quality.MaxHeights+4, r, quality.MaxHeights+4)
	}
	if a, err := audience.NewStore(v.pool).Media(ctx, one, auth.Identity{MemberID: owner}); err != nil || a.Quality != nil || !a.Withheld {
		t.Errorf("ten sessions of one viewer: quality %+v, withheld %v, %v; want withheld (null)", a.Quality, a.Withheld, err)
	}
}
