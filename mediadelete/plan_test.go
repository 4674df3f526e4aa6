package mediadelete_test

import (
	"slices"
	"testing"

	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/internal/plantest"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/mediadelete"
)

// TestDeleteJob_StatementsReadTheMediaNotTheTables: with 200 media of 500 positions each (and
// as many finished-lesson rows, 100 events, deliveries and import rows, 20 jobs), a batch of the
// playback delete examines one batch of rows, and no statement of the completion reads a
// table sequentially: the deletion of one media costs its own rows, whatever the others hold.
func TestDeleteJob_StatementsReadTheMediaNotTheTables(t *testing.T) {
	pool, _ := pgtest.Pool(t)
	for _, sql := range []string{
		`INSERT INTO members (id) SELECT g FROM generate_series(1, 500) g`,
		`INSERT INTO media (owner_id, title, status, visibility) SELECT 1, 'm' || g, 'READY', 'PUBLIC' FROM generate_series(1, 200) g`,
		`INSERT INTO playback (member_id, media_id, position_ms, event_time, updated_at) SELECT p, m, 1, now(), now() FROM generate_series(1, 500) p, generate_series(1, 200) m`,
		`INSERT INTO playback_last_finished (member_id, collection, media_id, event_time) SELECT p, 'c' || m, m, now() FROM generate_series(1, 500) p, generate_series(1, 200) m`,
		`INSERT INTO imports (created_by, filename, total_rows, accepted, rejected) VALUES (1, 'c.csv', 200, 200, 0)`,
		`INSERT INTO import_rows (import_id, row_number, collection, video_url, media_id) SELECT 1, m * 100 + r, 'c', 'u', m FROM generate_series(1, 200) m, generate_series(1, 100) r`,
		`INSERT INTO notification_outbox (member_id, media_id, kind, relayed_at) SELECT 1, m, 'media_ready', now() FROM generate_series(1, 200) m, generate_series(1, 100)`,
		`INSERT INTO webhook_endpoints (url, events, secret, created_by) VALUES ('https://hooks.example.com', '{media.ready}', 'k', 1)`,
		`INSERT INTO webhook_deliveries (endpoint_id, outbox_id, media_id, status, job_id, event_at) SELECT 1, id, media_id, 'DELIVERED', 1, created_at FROM notification_outbox`,
		`INSERT INTO jobs (kind, subject_id, status, completed_at) SELECT 'encode', m, 'COMPLETED', now() FROM generate_series(1, 200) m, generate_series(1, 20)`,
		`ANALYZE`,
	} {
		exec(t, pool, sql)
	}
	const id = 100
	plan := plantest.Analyze(t, pool, mediadelete.DeletePlaybackBatchSQL, id, mediadelete.PlaybackBatch)
	if n := plan.RowsExaminedFrom("playback"); n > 2*mediadelete.PlaybackBatch || len(plan.SeqScans()) > 0 {
		t.Errorf("a batch of the playback delete examined %v playback rows (sequential scans: %q), want at most %d", n, plan.SeqScans(), 2*mediadelete.PlaybackBatch)
	}
	sqls, args := mediadelete.CompletionStatements(jobqueue.Job{ID: 1 << 40, Subject: id})
	// The last deletes the media row by its primary key, and needs the others to have run
	// first: each plan here is rolled back.
	sqls = sqls[:len(sqls)-1]
	big := []string{"playback", "playback_last_finished", "import_rows", "notification_outbox", "webhook_deliveries", "jobs", "media"}
	for i, sql := range sqls {
		plan := plantest.Analyze(t, pool, sql, args[i]...)
		for _, table := range plan.SeqScans() {
			if slices.Contains(big, table) {
				t.Errorf("%s\nreads %s sequentially", sql, table)
			}
		}
	}
}
