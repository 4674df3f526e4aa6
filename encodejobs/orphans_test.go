package encodejobs_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/encodejobs"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
)

// OrphanRules' InUse against a real database: outputs a media row points at (whatever its
// status) and outputs of a running claim are in use; a finished or lost claim's outputs, a
// media's old outputs, garbage names and an unrecorded upload are not.
func TestOrphanRules_InUse(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	queue, err := jobqueue.NewQueue(b.pool, time.Minute, media.JobKind(encodejobs.KindEncode))
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, 3)
	for i := range ids {
		m, err := b.media.Create(ctx, media.Media{OwnerID: 3, Title: "clip", Status: media.StatusProcessing, Visibility: media.VisibilityPrivate})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = m.ID
		if err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			_, err := jobqueue.Enqueue(ctx, tx, encodejobs.KindEncode, m.ID, 3)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	ready, running, failed := ids[0], ids[1], ids[2]
	jobs, err := queue.Claim(ctx, encodejobs.KindEncode, 3, "test")
	if err != nil || len(jobs) != 3 {
		t.Fatalf("claim: %d jobs, %v", len(jobs), err)
	}
	claims := map[int64]string{}
	for _, j := range jobs {
		claims[j.Subject] = j.ClaimToken
	}
	// ready: completed under its claim; its media row points at the outputs.
	// failed: completed too, then an administrator marked it FAILED: its row still points at them.
	for _, id := range []int64{ready, failed} {
		j := jobs[slices.IndexFunc(jobs, func(j jobqueue.Job) bool { return j.Subject == id })]
		prefix := encodejobs.OutputPrefix(id, j.ClaimToken)
		if _, err := b.pool.Exec(ctx, `UPDATE media SET status = 'READY', hls_key = $2, thumbnail_key = $3 WHERE id = $1`,
			id, prefix+"master.m3u8", prefix+"thumb.jpg"); err != nil {
			t.Fatal(err)
		}
		if _, err := b.pool.Exec(ctx, `UPDATE jobs SET status = 'COMPLETED', completed_at = now() WHERE id = $1`, j.ID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.pool.Exec(ctx, `UPDATE media SET status = 'FAILED' WHERE id = $1`, failed); err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(ctx, `UPDATE media SET source_key = 'uploads/abc/source' WHERE id = $1`, ready); err != nil {
		t.Fatal(err)
	}

	// A caption track that was recorded, and one whose row is gone (or was never written).
	kept, dropped := fmt.Sprintf("hls/%d/captions-aa/", ready), fmt.Sprintf("hls/%d/captions-bb/", ready)
	if _, err := b.pool.Exec(ctx, `INSERT INTO captions (media_id, language, label, folder, cues, created_by)
		VALUES ($1, 'en', 'English', $2, 1, 3)`, ready, kept); err != nil {
		t.Fatal(err)
	}

	want := map[string]bool{
		kept:    true,  // a caption track's files
		dropped: false, // files no caption row names
		encodejobs.OutputPrefix(ready, claims[ready]):                          true,  // the READY media's outputs
		encodejobs.OutputPrefix(failed, claims[failed]):                        true,  // still pointed at
		encodejobs.OutputPrefix(running, claims[running]):                      true,  // the running claim's
		encodejobs.OutputPrefix(ready, claims[running]):                        false, // a running claim's token under another media
		encodejobs.OutputPrefix(ready, "00000000-0000-0000-0000-000000000001"): false, // a lost claim's
		fmt.Sprintf("hls/%d/%s/", running+1000, claims[running]):               false,
		"hls/not-a-number/x/":                                                  false,
		"uploads/abc/":                                                         true, // the ready media's source
		"uploads/ab/":                                                          false,
		"uploads/ingest-7-0123456789abcdef/":                                   false, // a killed import's download
	}
	rules := encodejobs.OrphanRules(b.pool)
	got := map[string]bool{}
	for _, r := range rules {
		var groups []string
		for g := range maps.Keys(want) {
			if len(g) > len(r.Prefix) && g[:len(r.Prefix)] == r.Prefix {
				groups = append(groups, g)
			}
		}
		inUse, err := r.InUse(ctx, groups)
		if err != nil {
			t.Fatalf("%s InUse: %v", r.Prefix, err)
		}
		for _, g := range groups {
			got[g] = inUse[g]
		}
	}
	for g, w := range want {
		if got[g] != w {
			t.Errorf("%s: in use %v, want %v", g, got[g], w)
		}
	}

	// The lock: one holder at a time.
	lock := encodejobs.OrphanSweepLock(b.pool)
	unlock, ok, err := lock(ctx)
	if err != nil || !ok {
		t.Fatalf("first lock: %v %v", ok, err)
	}
	if unlockSecond, ok2, err := lock(ctx); err != nil || ok2 {
		// Release both before failing: the pool's Close in the cleanup waits for every
		// acquired connection, so a held one would hang the test until its timeout.
		if ok2 {
			unlockSecond()
		}
		unlock()
		t.Fatalf("second lock while the first is held: %v %v, want refused", ok2, err)
	}
	unlock()
	unlock2, ok, err := lock(ctx)
	if err != nil || !ok {
		t.Fatalf("lock after unlock: %v %v", ok, err)
	}
	unlock2()
}
