package encodejobs_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/encodejobs"
	"github.com/playhead/playhead/mediadelete"
)

// TestEncode_AProbeOfADeletedMediaPlansNothing: a media deleted while its probe runs gets no
// rendition jobs and no rendition plan from the probe's completion: the probe just ends.
func TestEncode_AProbeOfADeletedMediaPlansNothing(t *testing.T) {
	ctx := context.Background()
	f := newGroupFixture(t, 2)
	claimed, err := f.queue.Claim(ctx, encodejobs.KindEncode, 1, "worker")
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim the probe: %v %v", claimed, err)
	}
	if err := pgx.BeginFunc(ctx, f.b.pool, func(tx pgx.Tx) error { return mediadelete.Delete(ctx, tx, f.media) }); err != nil {
		t.Fatal(err)
	}
	res, err := f.kinds[0].Run(ctx, claimed[0])
	if err != nil {
		t.Fatalf("the probe: %v", err)
	}
	if err := f.queue.Complete(ctx, claimed[0], res.Commit); err != nil {
		t.Fatalf("the probe's completion: %v", err)
	}
	if n := f.b.count(t, `SELECT count(*) FROM jobs WHERE subject_id = $1 AND kind = ANY($2) AND status <> 'COMPLETED'`, f.media, encodejobs.Kinds); n != 0 {
		t.Errorf("the probe of the deleted media left %d encode jobs to run", n)
	}
	if n := f.b.count(t, `SELECT count(*) FROM media WHERE id = $1 AND (status <> 'DELETED' OR duration_ms IS NOT NULL OR playable_at IS NOT NULL)`, f.media); n != 0 {
		t.Error("the probe of the deleted media wrote its plan into the media row")
	}
}
