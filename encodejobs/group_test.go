package encodejobs_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/encodejobs"
	"github.com/playhead/playhead/encoder"
	"github.com/playhead/playhead/internal/testvideo"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/storage"
)

// groupFixture is an uploaded 480p source with audio (a ladder of 480p, 360p, 240p) and its
// encode job, in a local store, with the three encode kinds ready to run, splitting the
// ladder into at most renditionJobs rendition jobs (0: the default).
type groupFixture struct {
	b     *bundle
	store *storage.Local
	dir   string
	media int64
	kinds []jobqueue.Kind
	queue *jobqueue.Queue
}

func newGroupFixture(t *testing.T, renditionJobs int) *groupFixture {
	t.Helper()
	b := setup(t)
	dir := t.TempDir()
	store, m := uploaded(t, b, dir, testvideo.Spec{Seconds: 3, Width: 640, Height: 480, Audio: true})
	enc, err := encoder.New(encoder.Config{Preset: "ultrafast", SegmentSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	kinds := (&encodejobs.Encode{Pool: b.pool, Store: store, Encoder: enc, ScratchDir: dir, RenditionJobs: renditionJobs}).Kinds()
	q, err := jobqueue.NewQueue(b.pool, time.Minute, kinds...)
	if err != nil {
		t.Fatal(err)
	}
	return &groupFixture{b: b, store: store, dir: dir, media: m.ID, kinds: kinds, queue: q}
}

// probed runs the fixture's probe until its group has n rendition jobs, and returns their ids
// in claim order.
func (f *groupFixture) probed(t *testing.T, n int) []int64 {
	t.Helper()
	startRunner(t, f.b, f.kinds[0])
	waitFor(t, "the rendition jobs", func() bool {
		return f.b.count(t, `SELECT count(*) FROM jobs WHERE kind = $1 AND subject_id = $2`, encodejobs.KindRendition, f.media) == n
	})
	rows, err := f.b.pool.Query(context.Background(), `SELECT id FROM jobs WHERE kind = $1 AND subject_id = $2 ORDER BY id`, encodejobs.KindRendition, f.media)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// outbox lists the media's notification kinds in the order they were written.
func (f *groupFixture) outbox(t *testing.T) []string {
	t.Helper()
	rows, err := f.b.pool.Query(context.Background(), `SELECT kind FROM notification_outbox WHERE media_id = $1 ORDER BY id`, f.media)
	if err != nil {
		t.Fatal(err)
	}
	kinds, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return kinds
}

// probeMaster writes the media's assembled master beside its files in the local store and has
// ffprobe read it end to end; it returns the master.
func (f *groupFixture) probeMaster(t *testing.T) string {
	t.Helper()
	master, err := f.b.media.AssembledMaster(context.Background(), f.media)
	if err != nil || master == nil {
		t.Fatalf("assembled master: %q, %v", master, err)
	}
	file := filepath.Join(f.dir, "objects", filepath.FromSlash(media.AssembledMaster(f.media)))
	if err := os.WriteFile(file, master, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ffprobe", "-v", "error", "-show_entries", "stream=height", "-of", "csv=p=0", file).CombinedOutput(); err != nil {
		t.Fatalf("ffprobe of the assembled master: %v: %s\n%s", err, out, master)
	}
	return string(master)
}

// An upload's encode is a group: the probe hands on to rendition jobs, by default two (the
// lowest rung alone, then the others in one ffmpeg run), and a finish. The media is playable
// (media_playable, then the assembled master lists the 240p variant with the audio, alone)
// before it is READY, and READY (media_ready, once) with every rendition in its master, the
// thumbnail and the storyboard. With one rendition job at a time the order is certain: the
// lowest rung, which carries the audio, is the first to play.
func TestEncodeGroup_PlayableAtTheFirstRenditionThenReady(t *testing.T) {
	t.Parallel()
	f := newGroupFixture(t, 0)
	ctx := context.Background()
	f.probed(t, 2)
	rows, err := f.b.pool.Query(ctx, `SELECT args->>'heights' FROM jobs WHERE kind = $1 ORDER BY id`, encodejobs.KindRendition)
	if err != nil {
		t.Fatal(err)
	}
	if heights, err := pgx.CollectRows(rows, pgx.RowTo[string]); err != nil || strings.Join(heights, " ") != "[240] [480, 360]" {
		t.Fatalf("rendition jobs' heights in claim order: %q (%v), want [240] then [480,360]", heights, err)
	}
	// The group is in its owner's partition (member 3, the probe's), the lowest rung's job
	// alone at high priority: claimed first (the renditions in their claim order, then the finish).
	rows, err = f.b.pool.Query(ctx, `SELECT kind || ' ' || partition_key || ' ' || priority FROM jobs WHERE kind <> $1 ORDER BY kind DESC, claim_order, id`, encodejobs.KindEncode)
	if err != nil {
		t.Fatal(err)
	}
	if order, err := pgx.CollectRows(rows, pgx.RowTo[string]); err != nil ||
		strings.Join(order, ", ") != "encode_rendition 3 1, encode_rendition 3 2, encode_finish 3 2" {
		t.Fatalf("the group's jobs in claim order (kind, partition, priority): %q (%v), want the lowest rung's at 1, then the others' at 2, all in 3", order, err)
	}
	if m, _ := f.b.media.Get(ctx, f.media); m.Playable || m.DurationMS < 2900 {
		t.Fatalf("after the probe: %+v, want not yet playable, with its duration", m)
	}
	// One rendition, then look: playable with the 240p alone.
	renditions := startRunner(t, f.b, f.kinds[1])
	waitFor(t, "playable", func() bool {
		m, err := f.b.media.Get(ctx, f.media)
		return err == nil && m.Playable
	})
	if err := renditions.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	m, _ := f.b.media.Get(ctx, f.media)
	if m.Status != media.StatusProcessing || m.HLSKey != media.AssembledMaster(f.media) {
		t.Fatalf("playable media: %+v, want PROCESSING with the assembled master", m)
	}
	early := f.probeMaster(t)
	if n := strings.Count(early, "#EXT-X-STREAM-INF"); n != 1 || !strings.Contains(early, "x240") || !strings.Contains(early, `TYPE=AUDIO`) {
		t.Fatalf("the master while encoding lists %d variants, want the 240p alone with its audio:\n%s", n, early)
	}
	startRunner(t, f.b, f.kinds[1])
	startRunner(t, f.b, f.kinds[2])
	waitFor(t, "READY", func() bool {
		m, err := f.b.media.Get(ctx, f.media)
		return err == nil && m.Status == media.StatusReady
	})
	m, _ = f.b.media.Get(ctx, f.media)
	if m.HLSKey != media.AssembledMaster(f.media) || m.ThumbnailKey == "" || m.StoryboardKey == "" || m.HLSStartUS < 0 || !m.Playable {
		t.Fatalf("READY media: %+v, want the assembled master, a thumbnail, a storyboard and a start", m)
	}
	full := f.probeMaster(t)
	if n := strings.Count(full, "#EXT-X-STREAM-INF"); n != 3 || strings.Index(full, "x480") > strings.Index(full, "x240") {
		t.Fatalf("the READY master lists %d variants, want 3, highest first:\n%s", n, full)
	}
	if got := strings.Join(f.outbox(t), " "); got != "media_playable media_ready" {
		t.Errorf("outbox %q, want media_playable then media_ready, once each", got)
	}
	for _, key := range []string{m.ThumbnailKey, m.StoryboardKey} {
		if _, err := os.Stat(filepath.Join(f.dir, "objects", filepath.FromSlash(key))); err != nil {
			t.Errorf("%s: %v", key, err)
		}
	}
}

// With a job per rung (PLAYHEAD_ENCODE_RENDITION_JOBS at the ladder's length), a rendition
// that fails for good fails the media with its reason and cancels the finish; the renditions
// already written are kept (their rows name their folders, so the orphan sweep keeps them),
// and an administrator's retry of the dead rendition alone finishes the group: the media
// READY with all three renditions, the others not encoded again.
func TestEncodeGroup_ADeadRenditionFailsTheMediaAndItsRetryFinishesIt(t *testing.T) {
	t.Parallel()
	f := newGroupFixture(t, 3)
	ctx := context.Background()
	f.probed(t, 3)
	var top int64
	if err := f.b.pool.QueryRow(ctx, `SELECT id FROM jobs WHERE kind = $1 AND args->'heights' = '[480]'`, encodejobs.KindRendition).Scan(&top); err != nil {
		t.Fatal(err)
	}
	if err := f.queue.Cancel(ctx, top); err != nil {
		t.Fatal(err)
	}
	startRunner(t, f.b, f.kinds[1])
	startRunner(t, f.b, f.kinds[2])
	waitFor(t, "the other renditions", func() bool {
		return f.b.count(t, `SELECT count(*) FROM jobs WHERE kind = $1 AND status = 'COMPLETED'`, encodejobs.KindRendition) == 2
	})
	m, _ := f.b.media.Get(ctx, f.media)
	if m.Status != media.StatusFailed || m.FailureReason != jobqueue.CancelReason {
		t.Fatalf("media after its rendition died: %s %q, want FAILED with the rendition's reason", m.Status, m.FailureReason)
	}
	if got := f.b.count(t, `SELECT count(*) FROM jobs WHERE kind = $1 AND status = 'DEAD'`, encodejobs.KindFinish); got != 1 {
		t.Fatalf("%d finish jobs DEAD, want the one cancelled with the rendition", got)
	}
	kept := f.b.count(t, `SELECT count(*) FROM media_renditions WHERE media_id = $1`, f.media)
	if kept != 3 { // 240p, its audio, 360p
		t.Fatalf("%d rendition rows kept, want 3", kept)
	}
	rule := encodejobs.OrphanRules(f.b.pool)[0]
	var folders []string
	rows, err := f.b.pool.Query(ctx, `SELECT DISTINCT folder FROM media_renditions WHERE media_id = $1`, f.media)
	if err != nil {
		t.Fatal(err)
	}
	if folders, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	inUse, err := rule.InUse(ctx, folders)
	if err != nil {
		t.Fatal(err)
	}
	for _, folder := range folders {
		if !inUse[folder] {
			t.Errorf("the orphan sweep would remove %s, a kept rendition's folder", folder)
		}
	}

	if err := f.queue.RetryDead(ctx, top); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "READY after the retry", func() bool {
		m, err := f.b.media.Get(ctx, f.media)
		return err == nil && m.Status == media.StatusReady
	})
	if n := strings.Count(f.probeMaster(t), "#EXT-X-STREAM-INF"); n != 3 {
		t.Errorf("the master after the retry lists %d variants, want 3", n)
	}
	if runs := f.b.count(t, `SELECT count(*) FROM jobs WHERE kind = $1 AND attempt_count > 1`, encodejobs.KindRendition); runs != 0 {
		t.Errorf("%d renditions encoded again", runs)
	}
}
