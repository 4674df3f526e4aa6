package encodejobs_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/encodejobs"
	"github.com/playhead/playhead/encoder"
	"github.com/playhead/playhead/internal/testvideo"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/storage"
)

// The encode job of Single makes the media READY with outputs under its own claim's prefix,
// and removes what a worker killed mid-encode left under its claim's prefix.
func TestEncode_CompletesAndRemovesDeadClaimsOutputs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dir := t.TempDir()
	store, m := uploaded(t, b, dir, testvideo.Spec{Seconds: 2, Width: 320, Height: 240, Audio: true})
	ctx := context.Background()
	// What a worker killed by SIGKILL mid-upload of its outputs leaves behind.
	orphan := encodejobs.OutputPrefix(m.ID, "00000000-dead-dead-dead-000000000000") + "v0/seg_000.ts"
	if _, err := store.Put(ctx, orphan, strings.NewReader("half a segment")); err != nil {
		t.Fatal(err)
	}
	// A caption track of the media, which belongs to the media and not to an encode: kept.
	captionFolder := "captions-0123456789abcdef0123456789abcdef"
	if _, err := store.Put(ctx, fmt.Sprintf("hls/%d/%s/index.m3u8", m.ID, captionFolder), strings.NewReader("#EXTM3U\n")); err != nil {
		t.Fatal(err)
	}

	enc, err := encoder.New(encoder.Config{Preset: "ultrafast"})
	if err != nil {
		t.Fatal(err)
	}
	kind := (&encodejobs.Encode{Pool: b.pool, Store: store, Encoder: enc, ScratchDir: dir, Single: true}).Kinds()[0]
	runner := startRunner(t, b, kind)
	waitFor(t, "READY", func() bool {
		got, err := b.media.Get(ctx, m.ID)
		return err == nil && got.Status == media.StatusReady
	})
	// READY is the fenced completion; the winner removes the other claims' outputs only after
	// it (before, it is not yet the winner). Stop returns once the job's goroutine, that
	// cleanup included, has ended.
	if err := runner.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := b.media.Get(ctx, m.ID)
	var token string
	if err := b.pool.QueryRow(ctx, `SELECT claim_token::text FROM jobs WHERE subject_id = $1`, m.ID).Scan(&token); err != nil {
		t.Fatal(err)
	}
	if want := encodejobs.OutputPrefix(m.ID, token) + "master.m3u8"; got.HLSKey != want || got.DurationMS < 1900 {
		t.Fatalf("media = %+v, want hls_key %s and a duration", got, want)
	}
	children, err := store.Children(ctx, filepath.Dir(filepath.Dir(got.HLSKey))+"/")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(children)
	if want := slices.Sorted(slices.Values([]string{captionFolder, token})); !slices.Equal(children, want) {
		t.Fatalf("folders left for the media: %v, want only the winner's and the caption track's: %v", children, want)
	}
	if n := b.count(t, `SELECT count(*) FROM notification_outbox WHERE media_id = $1 AND kind = 'media_ready' AND member_id = 3`, m.ID); n != 1 {
		t.Fatalf("%d media_ready notifications, want 1", n)
	}
}

// TestEncode_FailureReasonIsForTheUploader: failure_reason must not show the uploader
// ffprobe's stderr with the server's scratch paths. The media gets a short reason meant for
// its owner; the whole error stays in the job row for administrators.
func TestEncode_FailureReasonIsForTheUploader(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dir := t.TempDir()
	store, err := storage.NewLocal(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	huge := filepath.Join(dir, "huge.mp4")
	if out, err := exec.Command("ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i", "color=c=black:s=8000x8000:r=1",
		"-t", "1", "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", huge).CombinedOutput(); err != nil {
		t.Fatalf("generate: %v %s", err, out)
	}
	hugeBytes, err := os.ReadFile(huge)
	if err != nil {
		t.Fatal(err)
	}
	sources := map[string][]byte{
		"text": []byte("meeting notes, not a video"),
		"hls":  []byte("#EXTM3U\n#EXTINF:2,\nfile:///etc/passwd\n#EXT-X-ENDLIST\n"),
		"huge": hugeBytes,
	}
	wantReason := map[string]string{
		"text": "not a playable video: the file is not an MP4, MOV, MKV, WebM, AVI, MPEG-TS or FLV video",
		"hls":  "not a playable video: the file is not an MP4, MOV, MKV, WebM, AVI, MPEG-TS or FLV video",
		"huge": "too large: the video is 8000×8000 pixels; the limit is 4096×4096",
	}
	ids := map[string]int64{}
	for name, content := range sources {
		key := "uploads/" + name + "/source"
		if _, err := store.Put(ctx, key, strings.NewReader(string(content))); err != nil {
			t.Fatal(err)
		}
		m, err := b.media.Create(ctx, media.Media{OwnerID: 3, Title: name, Status: media.StatusProcessing, Visibility: media.VisibilityPrivate})
		if err != nil {
			t.Fatal(err)
		}
		err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `UPDATE media SET source_key = $2 WHERE id = $1`, m.ID, key); err != nil {
				return err
			}
			_, err := jobqueue.Enqueue(ctx, tx, encodejobs.KindEncode, m.ID, 3)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		ids[name] = m.ID
	}
	enc, err := encoder.New(encoder.Config{Preset: "ultrafast"})
	if err != nil {
		t.Fatal(err)
	}
	scratch := filepath.Join(dir, "scratch")
	if err := os.Mkdir(scratch, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, kind := range (&encodejobs.Encode{Pool: b.pool, Store: store, Encoder: enc, ScratchDir: scratch}).Kinds() {
		startRunner(t, b, kind)
	}
	waitFor(t, "every upload FAILED", func() bool {
		return b.count(t, `SELECT count(*) FROM media WHERE status = 'FAILED'`) == len(sources)
	})
	for name, id := range ids {
		m, err := b.media.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if m.FailureReason != wantReason[name] {
			t.Errorf("%s: failure_reason %q, want %q", name, m.FailureReason, wantReason[name])
		}
		for _, leak := range []string{scratch, dir, "ffprobe", "/tmp"} {
			if strings.Contains(m.FailureReason, leak) {
				t.Errorf("%s: failure_reason %q shows %q", name, m.FailureReason, leak)
			}
		}
		var lastError string
		var attempts int
		if err := b.pool.QueryRow(ctx, `SELECT last_error, attempt_count FROM jobs WHERE subject_id = $1`, id).Scan(&lastError, &attempts); err != nil {
			t.Fatal(err)
		}
		if attempts != 1 || len(lastError) <= len(m.FailureReason) || (name != "huge" && !strings.Contains(lastError, "ffprobe")) {
			t.Errorf("%s: job last_error %q after %d attempts, want the whole error after 1 attempt", name, lastError, attempts)
		}
	}
}
