package mediadelete_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/media"
)

// TestPipelineWrites_LeaveADeletedMediaAlone: each write of the media pipeline, run in a late
// job's completion on a DELETED media, leaves its row as it was (status, keys, duration,
// pictures) and tells its owner nothing.
func TestPipelineWrites_LeaveADeletedMediaAlone(t *testing.T) {
	ctx := context.Background()
	pool, _ := pgtest.Pool(t)
	exec(t, pool, `INSERT INTO members (id) VALUES (3)`)
	var id int64
	if err := pool.QueryRow(ctx, `INSERT INTO media (owner_id, title, status, visibility) VALUES (3, 'clip', 'PROCESSING', 'PUBLIC') RETURNING id`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if err := deleteMedia(ctx, pool, id); err != nil {
		t.Fatal(err)
	}
	row := func() string {
		var s string
		if err := pool.QueryRow(ctx, `SELECT row(status, hls_key, thumbnail_key, storyboard_key, duration_ms, playable_at, failure_reason)::text FROM media WHERE id = $1`, id).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := row()
	prefix := media.AssembledMaster(id)[:len(media.AssembledMaster(id))-len("master.m3u8")] + "claim/"
	for name, write := range map[string]func(tx pgx.Tx) error{
		"MarkReady": func(tx pgx.Tx) error {
			return media.MarkReady(ctx, tx, id, media.Encoded{HLSKey: prefix + "master.m3u8", ThumbnailKey: prefix + "thumb.jpg", DurationMS: 1000, StartUS: -1}, nil)
		},
		"SetStatus":      func(tx pgx.Tx) error { return media.SetStatus(ctx, tx, id, media.StatusProcessing) },
		"PlanRenditions": func(tx pgx.Tx) error { return media.PlanRenditions(ctx, tx, id, 5000) },
		"RecordPictures": func(tx pgx.Tx) error { return media.RecordPictures(ctx, tx, id, prefix+"thumb.jpg", prefix+"sb.vtt") },
	} {
		if err := pgx.BeginFunc(ctx, pool, write); err != nil {
			t.Errorf("%s on a deleted media: %v", name, err)
		}
		if got := row(); got != before {
			t.Errorf("%s changed the deleted media: %s, was %s", name, got, before)
		}
	}
	if n := count(t, pool, `SELECT count(*) FROM notification_outbox WHERE media_id = $1 AND kind <> 'media_deleted'`, id); n != 0 {
		t.Errorf("the late writes told the owner %d things", n)
	}
}
