package media_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
)

// TestCommit_TheEncodeTakesItsOwnersTurnAtHighPriorityOnce: an upload's encode job is in its
// owner's fairness partition (one for everyone with FIFO), at high priority, and unique per
// media: the same encode enqueued again while it waits is the first job, not a second encode.
func TestCommit_TheEncodeTakesItsOwnersTurnAtHighPriorityOnce(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Pool(t)
	ctx := context.Background()
	commit := func(c media.Committer, owner int64) int64 {
		t.Helper()
		var id int64
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var err error
			id, err = c.Commit(ctx, tx, media.Upload{Owner: owner, Details: media.UploadDetails{Title: "clip", Visibility: media.VisibilityPrivate},
				SourceKey: "uploads/x/source"})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	job := func(mediaID int64) (id int64, partition string, priority int) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT id, partition_key, priority FROM jobs WHERE kind = 'encode' AND subject_id = $1`, mediaID).
			Scan(&id, &partition, &priority); err != nil {
			t.Fatal(err)
		}
		return id, partition, priority
	}

	fair := commit(media.Committer{JobKind: "encode", MaxAttempts: 3}, 41)
	first, partition, priority := job(fair)
	if partition != "41" || priority != int(jobqueue.PriorityHigh) {
		t.Errorf("the encode of member 41's upload: partition %q, priority %d; want 41, high", partition, priority)
	}
	if _, partition, _ := job(commit(media.Committer{JobKind: "encode", MaxAttempts: 3, FIFO: true}, 41)); partition != "" {
		t.Errorf("with FIFO the encode's partition is %q, want the one for everyone", partition)
	}

	spec, err := media.EncodeSpec("encode", fair, 3, "")
	if err != nil {
		t.Fatal(err)
	}
	var again jobqueue.Enqueued
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) (err error) {
		again, err = jobqueue.Insert(ctx, tx, spec)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE kind = 'encode' AND subject_id = $1`, fair).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if !again.Existing || again.ID != first || n != 1 {
		t.Errorf("the same media's encode enqueued again (another partition): %+v, %d jobs; want the existing job %d, alone", again, n, first)
	}
}
