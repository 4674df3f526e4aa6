package playback_test

import (
	"context"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/media"
)

// TestProgress_DatabaseAndGoAgree: the flush stores playhead_progress (SQL), the open's answer
// uses media.Completion.State (Go); both must give the same state on a grid of durations
// (unknown, 1 and 2 ms, under and at the shortest resumable one, a lesson, a film), credits
// (none, marked at 0, inside, at the end), positions around each threshold (0, the resume
// minimum, the completion point, the credits) and past the end, and thresholds (the defaults,
// none, others, and the bounds Validate takes).
func TestProgress_DatabaseAndGoAgree(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Pool(t)
	configs := []media.Completion{
		media.DefaultCompletion,
		{Ratio: 0.95, Tail: 30 * time.Second},
		{Ratio: 0.9, Tail: 0, MinRatio: 0.5, Min: 10 * time.Minute, MinDuration: 5 * time.Minute},
		// The bounds Validate takes: finished only at the end, or from the middle.
		{Ratio: 1, Tail: 0, MinRatio: 0, Min: 0, MinDuration: 0},
		{Ratio: 0.5, Tail: time.Hour, MinRatio: 0.5, Min: time.Hour, MinDuration: time.Hour},
	}
	seen := map[media.Progress]int{}
	for _, c := range configs {
		for _, d := range []int64{0, 1, 2, 60_000, 90_000, 119_999, 120_000, 300_000, 1_200_000, 7_200_000} {
			// Credits marked at 0 (stored, not NULL: no credits for the rule) and at the end too.
			for _, credits := range []int64{-1, 0, d * 8 / 10, d} {
				positions := []int64{0, 1, 2_000, 59_999, 60_000, d / 20, d/20 - 1, d / 2, d - 30_001, d - 30_000, d * 95 / 100, d, d + 1, 2*d + 5}
				if p, ok := c.Point(d); ok {
					positions = append(positions, int64(p), int64(p)-1)
				}
				positions = append(positions, int64(c.ResumeMinMS(d)), int64(c.ResumeMinMS(d))-1, credits, credits-1)
				for _, pos := range positions {
					if pos < 0 {
						continue
					}
					var duration, creditsStart *int64
					if d > 0 {
						duration = &d
					}
					if credits >= 0 {
						creditsStart = &credits
					}
					var db int16
					if err := pool.QueryRow(context.Background(), `SELECT playhead_progress($1, $2, $3, $4, $5, $6, $7, $8)`,
						pos, duration, creditsStart, c.Ratio, c.TailMS(), c.MinRatio, c.Min.Milliseconds(), c.MinDuration.Milliseconds()).
						Scan(&db); err != nil {
						t.Fatal(err)
					}
					got := c.State(pos, d, max(credits, 0))
					seen[got]++
					if media.Progress(db) != got {
						t.Errorf("%+v, position %d of %d, credits at %d: SQL %d, Go %d", c, pos, d, credits, db, got)
					}
				}
			}
		}
	}
	if seen[media.NotStarted] == 0 || seen[media.InProgress] == 0 || seen[media.Finished] == 0 {
		t.Errorf("the grid does not reach every state: %v", seen)
	}
}
