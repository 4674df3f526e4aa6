package history_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/history"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/jobqueue"
)

// TestKind_NeverRemovesARowBeforeItsTime: with a retention that is not a whole number of
// hours (90m, which the setting takes), a run removes no row last reported within the
// retention: a row 75 minutes old shares its listed_at hour with one 91 minutes old, so the
// cutoff goes down to the hour, and the older row goes at the next run instead (up to an
// hour late, never early).
func TestKind_NeverRemovesARowBeforeItsTime(t *testing.T) {
	pool, _ := pgtest.Pool(t)
	exec(t, pool, `INSERT INTO members (id) VALUES (1)`)
	exec(t, pool, `INSERT INTO media (owner_id, title, status, duration_ms) VALUES (1, 'a', 'READY', 1000)`)
	keep := 90 * time.Minute
	runTime := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	for member, age := range map[int64]time.Duration{
		1: 75 * time.Minute,             // within the retention: kept
		2: 91 * time.Minute,             // past it, in the same hour as member 1's: kept until the next run
		3: 2*time.Hour + 31*time.Minute, // in an hour that ended before the cutoff: removed
	} {
		exec(t, pool, `INSERT INTO playback (member_id, media_id, position_ms, event_time, updated_at) VALUES ($1, 1, 0, $2, $2)`,
			member, runTime.Add(-age))
	}
	run := history.Kind(keep, pool, history.NewMetrics(prometheus.NewRegistry())).Run
	left := func() []int64 {
		if _, err := run(context.Background(), jobqueue.Job{Kind: history.KindRetention, Subject: runTime.UnixMilli()}); err != nil {
			t.Fatal(err)
		}
		rows, err := pool.Query(context.Background(), `SELECT member_id FROM playback ORDER BY member_id`)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	if ids := left(); !slices.Equal(ids, []int64{1, 2}) {
		t.Errorf("after the run at %s, members %v keep their row; want 1 and 2", runTime.Format(time.TimeOnly), ids)
	}
	runTime = runTime.Add(time.Hour)
	if ids := left(); !slices.Equal(ids, []int64{}) && !slices.Equal(ids, []int64(nil)) {
		t.Errorf("after the run at %s, members %v keep their row; want none", runTime.Format(time.TimeOnly), ids)
	}
}
