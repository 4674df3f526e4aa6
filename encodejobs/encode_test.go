package encodejobs_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/encodejobs"
	"github.com/playhead/playhead/encoder"
	"github.com/playhead/playhead/internal/testvideo"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/storage"
)

// The encode job makes the media READY with outputs under its own claim's prefix, and removes
// what a worker killed mid-encode left under its claim's prefix.
func TestEncode_CompletesAndRemovesDeadClaimsOutputs(t *testing.T) {
	t.Parallel()
	b := setup(t, time.Minute)
	dir := t.TempDir()
	store, err := storage.NewLocal(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	src := testvideo.MP4(t, dir, testvideo.Spec{Seconds: 2, Width: 320, Height: 240, Audio: true})
	if err := storage.PutFile(ctx, store, "uploads/x/source", src); err != nil {
		t.Fatal(err)
	}
	m, err := b.media.Create(ctx, media.Media{OwnerID: 3, Title: "clip", Status: media.StatusProcessing, Visibility: media.VisibilityPrivate})
	if err != nil {
		t.Fatal(err)
	}
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE media SET source_key = 'uploads/x/source' WHERE id = $1`, m.ID); err != nil {
			return err
		}
		_, err := encodejobs.Enqueue(ctx, tx, encodejobs.KindEncode, m.ID, 3)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// What a worker killed by SIGKILL mid-upload of its outputs leaves behind.
	orphan := encodejobs.OutputPrefix(m.ID, "00000000-dead-dead-dead-000000000000") + "v0/seg_000.ts"
	if _, err := store.Put(ctx, orphan, strings.NewReader("half a segment")); err != nil {
		t.Fatal(err)
	}

	enc, err := encoder.New(encoder.Config{Preset: "ultrafast"})
	if err != nil {
		t.Fatal(err)
	}
	kind := (&encodejobs.Encode{Pool: b.pool, Store: store, Encoder: enc, ScratchDir: dir}).Kind()
	startWorker(t, b.queue, encodejobs.WorkerConfig{Node: "n", PollInterval: 20 * time.Millisecond}, kind)
	waitFor(t, "READY", func() bool {
		got, err := b.media.Get(ctx, m.ID)
		return err == nil && got.Status == media.StatusReady
	})
	got, _ := b.media.Get(ctx, m.ID)
	var token string
	if err := b.pool.QueryRow(ctx, `SELECT claim_token::text FROM jobs WHERE media_id = $1`, m.ID).Scan(&token); err != nil {
		t.Fatal(err)
	}
	if want := encodejobs.OutputPrefix(m.ID, token) + "master.m3u8"; got.HLSKey != want || got.DurationMS < 1900 {
		t.Fatalf("media = %+v, want hls_key %s and a duration", got, want)
	}
	children, err := store.Children(ctx, filepath.Dir(filepath.Dir(got.HLSKey))+"/")
	if err != nil {
		t.Fatal(err)
	}
	if len(children) != 1 || children[0] != token {
		t.Fatalf("claim prefixes left for the media: %v, want only the winner %s", children, token)
	}
	if n := b.count(t, `SELECT count(*) FROM notification_outbox WHERE media_id = $1 AND kind = 'media_ready' AND member_id = 3`, m.ID); n != 1 {
		t.Fatalf("%d media_ready notifications, want 1", n)
	}
}
