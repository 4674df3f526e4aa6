package mediadelete_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/encodejobs"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/internal/s3test"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
)

// TestDeleteJob_RemovesTheFilesBeforeItWaitsForARunningJob: a media playable while it
// encodes is deleted with a rendition job still running. Links given before the deletion
// reach its files without Playhead (S3's presigned links), so the files must go at the
// deletion job's first attempt, not when the running job ends (up to the encode's timeout);
// what that job writes until then goes at the attempt after it.
func TestDeleteJob_RemovesTheFilesBeforeItWaitsForARunningJob(t *testing.T) {
	for name, open := range s3test.Backends() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			pool, _ := pgtest.Pool(t)
			st := open(t)
			exec(t, pool, `INSERT INTO members (id) VALUES (3)`)
			var id int64
			if err := pool.QueryRow(ctx, `INSERT INTO media (owner_id, title, status, visibility, source_key, playable_at) VALUES (3, 'clip', 'PROCESSING', 'PUBLIC', 'uploads/u/source', now()) RETURNING id`).Scan(&id); err != nil {
				t.Fatal(err)
			}
			first := fmt.Sprintf("hls/%d/done/v0/seg0.ts", id)
			for _, k := range []string{first, "uploads/u/source"} {
				if _, err := st.Put(ctx, k, strings.NewReader(k)); err != nil {
					t.Fatal(err)
				}
			}
			rendition := media.JobKind(encodejobs.KindRendition)
			q, err := jobqueue.NewQueue(pool, time.Hour, rendition)
			if err != nil {
				t.Fatal(err)
			}
			if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				_, err := jobqueue.Enqueue(ctx, tx, encodejobs.KindRendition, id, 3)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			running, err := q.Claim(ctx, encodejobs.KindRendition, 1, "worker")
			if err != nil || len(running) != 1 {
				t.Fatalf("claim: %v %v", running, err)
			}
			if err := deleteMedia(ctx, pool, id); err != nil {
				t.Fatal(err)
			}
			startDeletions(t, pool, st, prometheus.NewRegistry())
			waitUntil(t, "the deletion to wait for the running rendition", func() bool {
				return count(t, pool, `SELECT count(*) FROM jobs WHERE kind = 'media_delete' AND subject_id = $1 AND attempt_count >= 1 AND status = 'PENDING'`, id) == 1
			})
			if left := keys(t, st); len(left) != 0 {
				t.Errorf("while the deletion waits for the running rendition, the store still holds %q", left)
			}
			// The rendition writes a last file and completes; the next attempt removes it.
			late := encodejobs.OutputPrefix(id, running[0].ClaimToken) + "v1/seg0.ts"
			if _, err := st.Put(ctx, late, strings.NewReader("late")); err != nil {
				t.Fatal(err)
			}
			if err := q.Complete(ctx, running[0], nil); err != nil {
				t.Fatal(err)
			}
			exec(t, pool, `UPDATE jobs SET available_at = now() WHERE kind = 'media_delete' AND subject_id = $1`, id)
			deletionDone(t, pool, id)
			if left := keys(t, st); len(left) != 0 {
				t.Errorf("after the deletion the store holds %q", left)
			}
		})
	}
}
