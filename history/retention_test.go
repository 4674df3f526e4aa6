package history_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/history"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/internal/plantest"
	"github.com/playhead/playhead/jobqueue"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func exec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatal(err)
	}
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// batches is a counter that keeps every Add: one per batch of Expire.
type batches struct {
	prometheus.Counter
	mu   sync.Mutex
	adds []float64
}

func (b *batches) Add(v float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.adds = append(b.adds, v)
	b.Counter.Add(v)
}

// TestExpire_AMillionRowsInBatchesWithoutASeqScan: with 1 000 000 playback rows older than
// the retention and a few recent ones, the batch statement reads playback through
// playback_listed_idx (no sequential scan, about a batch of rows examined), and one pass
// removes every old row, Batch at a time, with their collection progress, and marks their
// media for the rollup; the recent rows and their progress stay.
func TestExpire_AMillionRowsInBatchesWithoutASeqScan(t *testing.T) {
	pool, _ := pgtest.Pool(t)
	ctx := context.Background()
	exec(t, pool, `INSERT INTO members (id) VALUES (1)`)
	exec(t, pool, `INSERT INTO media (owner_id, title, status, duration_ms)
		SELECT 1, 'lesson ' || g, 'READY', 600000 FROM generate_series(1, 1000) g`)
	// 1 000 members × 1 000 media, last watched 600 to 601 days ago; member 5000 watched 10
	// of them an hour ago.
	exec(t, pool, `INSERT INTO playback (member_id, media_id, position_ms, event_time, updated_at, finished)
		SELECT mb, md, 1000, statement_timestamp() - interval '600 days' - (mb * 1000 + md) * interval '80 ms',
		       statement_timestamp(), md % 10 = 0
		FROM generate_series(1, 1000) mb, generate_series(1, 1000) md`)
	exec(t, pool, `INSERT INTO playback (member_id, media_id, position_ms, event_time, updated_at, finished)
		SELECT 5000, md, 1000, statement_timestamp() - interval '1 hour', statement_timestamp(), true
		FROM generate_series(1, 10) md`)
	exec(t, pool, `INSERT INTO playback_last_finished (member_id, collection, media_id, event_time)
		SELECT member_id, 'course', media_id, event_time FROM playback WHERE media_id = 10`)
	exec(t, pool, `ANALYZE playback`)
	cutoff := time.Now().Add(-540 * 24 * time.Hour)

	plan := plantest.Analyze(t, pool, history.ExpireSQL, cutoff, history.Batch)
	if scans := plan.SeqScans(); slices.Contains(scans, "playback") {
		t.Errorf("the batch statement scans playback sequentially (%v)", scans)
	}
	// A batch's rows are read twice: through the index, then by their key for the DELETE.
	if examined := plan.RowsExaminedFrom("playback"); examined > 2*history.Batch {
		t.Errorf("one batch examined %.0f rows of playback, want at most %d", examined, 2*history.Batch)
	}
	var text []string
	rows, err := pool.Query(ctx, "EXPLAIN "+history.ExpireSQL, cutoff, history.Batch)
	if err != nil {
		t.Fatal(err)
	}
	if text, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(text, "\n"), "playback_listed_idx") {
		t.Errorf("the batch statement does not use playback_listed_idx:\n%s", strings.Join(text, "\n"))
	}

	counter := &batches{Counter: prometheus.NewCounter(prometheus.CounterOpts{Name: "removed"})}
	start := time.Now()
	removed, err := history.Expire(ctx, pool, cutoff, history.Batch, counter)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("one pass removed %d rows in %d batches in %s", removed, len(counter.adds), time.Since(start).Round(time.Millisecond))
	if removed != 1_000_000 {
		t.Errorf("removed %d rows, want 1 000 000", removed)
	}
	if len(counter.adds) != 1_000_000/history.Batch+1 || slices.Max(counter.adds) != history.Batch {
		t.Errorf("%d batches, the largest %.0f; want %d of %d and a last empty one", len(counter.adds), slices.Max(counter.adds),
			1_000_000/history.Batch, history.Batch)
	}
	if n := count(t, pool, `SELECT count(*) FROM playback`); n != 10 {
		t.Errorf("%d playback rows left, want member 5000's 10 recent ones", n)
	}
	if n := count(t, pool, `SELECT count(*) FROM playback_last_finished`); n != 1 {
		t.Errorf("%d collection progress rows left, want member 5000's one", n)
	}
	if n := count(t, pool, `SELECT count(*) FROM audience_dirty`); n != 1000 {
		t.Errorf("%d media marked for the rollup, want every one of the 1000", n)
	}
}

// TestKind_RunsOnTheHourWhileSet: the kind is periodic (hourly) only with a retention; a run
// removes what was last watched before its run time minus the retention, to the hour of the
// last report, and keeps the rest.
func TestKind_RunsOnTheHourWhileSet(t *testing.T) {
	if history.Kind(0, nil, nil).Periodic != nil {
		t.Error("the retention off still schedules the kind")
	}
	keep := 30 * 24 * time.Hour
	k := history.Kind(keep, nil, nil)
	if k.Periodic == nil || k.Periodic.Schedule.String() != "every 1h0m0s" {
		t.Fatalf("the kind's schedule is %v, want every hour", k.Periodic)
	}

	pool, _ := pgtest.Pool(t)
	exec(t, pool, `INSERT INTO members (id) VALUES (1)`)
	exec(t, pool, `INSERT INTO media (owner_id, title, status, duration_ms) VALUES (1, 'a', 'READY', 1000)`)
	runTime := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	cutoff := runTime.Add(-keep)
	for member, at := range map[int64]time.Time{
		1: cutoff.Add(-time.Hour - time.Second), // in the hour before the cutoff's: removed
		2: cutoff.Add(-time.Second),             // in that hour: removed (the cutoff is on the hour)
		3: cutoff,                               // at the cutoff: kept
		4: cutoff.Add(59 * time.Minute),         // kept
	} {
		exec(t, pool, `INSERT INTO playback (member_id, media_id, position_ms, event_time, updated_at) VALUES ($1, 1, 0, $2, $2)`, member, at)
	}
	run := history.Kind(keep, pool, history.NewMetrics(prometheus.NewRegistry())).Run
	if _, err := run(context.Background(), jobqueue.Job{Kind: history.KindRetention, Subject: runTime.UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(context.Background(), `SELECT member_id FROM playback ORDER BY member_id`)
	if err != nil {
		t.Fatal(err)
	}
	left, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(left, []int64{3, 4}) {
		t.Errorf("members %v keep their row, want 3 and 4", left)
	}
	off := history.Kind(0, pool, nil).Run
	exec(t, pool, `UPDATE playback SET event_time = $1`, cutoff.Add(-1000*time.Hour))
	if _, err := off(context.Background(), jobqueue.Job{Kind: history.KindRetention, Subject: runTime.UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	if n := count(t, pool, `SELECT count(*) FROM playback`); n != 2 {
		t.Errorf("a run with the retention off removed rows: %d left, want 2", n)
	}
}
