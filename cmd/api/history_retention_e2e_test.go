package main

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/pgtest"
)

// TestHistoryRetention_ANodeExpiresOldHistory: a node with PLAYHEAD_HISTORY_RETENTION=30d
// schedules the history_retention kind and runs it: the playback rows last reported 40 days
// ago go, with the course progress that names them, a row reported an hour ago stays, and
// playhead_history_expired_rows_total counts the two removed. (The kind's schedule row says its last run was two hours ago, so the run of the
// last hour is due at the node's start instead of at the next hour.)
func TestHistoryRetention_ANodeExpiresOldHistory(t *testing.T) {
	dbURL := pgtest.URL(t)
	pool, err := pgxpool.New(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	for _, sql := range []string{
		`INSERT INTO members (id) VALUES (1)`,
		`INSERT INTO media (owner_id, title, status, duration_ms) SELECT 1, 'lesson ' || g, 'READY', 600000 FROM generate_series(1, 3) g`,
		`INSERT INTO playback (member_id, media_id, position_ms, event_time, updated_at, finished) VALUES
		 (7, 1, 1000, statement_timestamp() - interval '40 days', statement_timestamp(), false),
		 (7, 2, 600000, statement_timestamp() - interval '40 days', statement_timestamp(), true),
		 (8, 3, 1000, statement_timestamp() - interval '1 hour', statement_timestamp(), false)`,
		`INSERT INTO playback_last_finished (member_id, collection, media_id, event_time)
		 SELECT member_id, 'course', media_id, event_time FROM playback WHERE finished`,
		`INSERT INTO job_schedules (kind, schedule, last_run) VALUES ('history_retention', 'every 1h0m0s', statement_timestamp() - interval '2 hours')`,
	} {
		if _, err := pool.Exec(t.Context(), sql); err != nil {
			t.Fatal(err)
		}
	}
	env := pipelineEnv("all", "retention", t.TempDir(), t.TempDir(), "ultrafast")
	env["DATABASE_URL"] = dbURL
	env["PLAYHEAD_HISTORY_RETENTION"] = "30d"
	s := binarytest.Start(t, env)
	for s.Metric(t, "playhead_history_expired_rows_total") < 2 {
		time.Sleep(50 * time.Millisecond)
	}
	if n := s.Metric(t, "playhead_history_expired_rows_total"); n != 2 {
		t.Errorf("playhead_history_expired_rows_total %v, want 2", n)
	}
	rows, err := pool.Query(t.Context(), `SELECT member_id FROM playback`)
	if err != nil {
		t.Fatal(err)
	}
	left, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil || len(left) != 1 || left[0] != 8 {
		t.Errorf("playback rows of members %v left (%v), want member 8's recent one", left, err)
	}
	var progress int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM playback_last_finished`).Scan(&progress); err != nil {
		t.Fatal(err)
	}
	if progress != 0 {
		t.Errorf("%d course progress rows left, want none", progress)
	}
}
