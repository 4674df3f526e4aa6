package main

// End-to-end tests of the media pipeline: the real binary (built once by TestMain through
// internal/binarytest), real PostgreSQL, real ffmpeg, real HTTP over loopback. Uploads go
// through POST /v1/media; the jobs table is read directly to see claims. Timeouts only bound
// how long a test waits before giving up; no test asserts how fast anything is, the figures
// are logged.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/encoder"
	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/testvideo"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
)

// TestPipeline_UploadBecomesPlayable uploads a small video through a role=all process in
// PLAYHEAD_ENCODE_MODE=single (one job per upload; the default, a group of jobs, is followed by
// encodejobs.TestEncodeGroup_*, the browser test of watching while it encodes and the workers'
// tests) and follows it to a playable HLS stream: not playable while PROCESSING, then master
// playlist, segment and thumbnail served over HTTP from the winning claim's prefix,
// ffprobe-able, and the source never served.
func TestPipeline_UploadBecomesPlayable(t *testing.T) {
	storageDir, tmpDir := t.TempDir(), t.TempDir()
	env := pipelineEnv("all", "e2e-all", storageDir, tmpDir, "ultrafast")
	env["PLAYHEAD_ENCODE_MODE"] = "single"
	s := binarytest.Start(t, env)
	pool := s.Pool(t)
	src := testvideo.MP4(t, t.TempDir(), testvideo.Spec{Seconds: 3, Width: 320, Height: 240, Audio: true})
	const ownerID, viewerID = 11, 12
	owner, viewer := binarytest.Token(t, ownerID, false), binarytest.Token(t, viewerID, false)

	id := s.Upload(t, owner, binarytest.Upload{Path: src, FileName: "clip.mp4", Title: "e2e clip", Visibility: "PUBLIC"})
	// Not playable before READY: the PUT goes first, and a PROCESSING status read after it
	// proves the media was not READY when the PUT was answered (status only moves forward).
	status, out := putPosition(t, s, owner, id, 1000)
	if v := mediaOf(t, s, owner, id); v.Status != string(media.StatusProcessing) {
		t.Fatalf("media %d is already %s right after its upload's 202 (failure_reason %q): "+
			"the not-playable-while-processing check could not be made", id, v.Status, v.FailureReason)
	}
	if status != http.StatusNotFound {
		t.Errorf("PUT /v1/playback/%d while PROCESSING by the owner: status %d %s, want 404", id, status, out)
	}
	// Keep checking while polling, counting only PUTs followed by a PROCESSING read.
	observed := 1
	deadline := time.Now().Add(encodeTimeout)
	var v mediaView
	for {
		putStatus, putBody := putPosition(t, s, viewer, id, 1000)
		v = mediaOf(t, s, owner, id)
		if v.Status != string(media.StatusProcessing) {
			break
		}
		observed++
		if putStatus != http.StatusNotFound {
			t.Fatalf("PUT /v1/playback/%d by another member while PROCESSING: status %d %s, want 404", id, putStatus, putBody)
		}
		if time.Now().After(deadline) {
			t.Fatalf("media %d still PROCESSING after %s", id, encodeTimeout)
		}
		time.Sleep(pollEvery)
	}
	if v.Status != string(media.StatusReady) {
		t.Fatalf("media %d ended %s (failure_reason %q), want READY; job: %v", id, v.Status, v.FailureReason, mediaJob(t, pool, id))
	}
	job := mediaJob(t, pool, id)
	if job.Status != string(jobqueue.StatusCompleted) || job.AttemptCount != 1 || job.CompletedAt == nil {
		t.Errorf("after READY: %v, want COMPLETED at attempt 1", job)
	}
	var encodeTook time.Duration
	if job.CompletedAt != nil {
		encodeTook = job.CompletedAt.Sub(job.EnqueuedAt)
	}
	t.Logf("3 s 320x240 upload: enqueued → COMPLETED in %s (ultrafast); %d PUTs answered 404 while PROCESSING",
		encodeTook.Round(time.Millisecond), observed)
	if v.DurationMS < 2500 || v.DurationMS > 3500 {
		t.Errorf("READY media has duration_ms %d, want about 3000", v.DurationMS)
	}

	// The outputs are under the completed claim's prefix, and nowhere else.
	token := str(job.ClaimToken)
	wantHLS := fmt.Sprintf("/objects/hls/%d/%s/master.m3u8?member=%d&expires=", id, token, ownerID)
	if token == "" || !strings.HasPrefix(v.HLSURL, wantHLS) {
		t.Errorf("hls_url %q, want %q… (the completed claim's prefix, signed for the owner)", v.HLSURL, wantHLS)
	}
	if wantThumb := fmt.Sprintf("/objects/hls/%d/%s/thumb.jpg?member=%d&expires=", id, token, ownerID); !strings.HasPrefix(v.ThumbnailURL, wantThumb) {
		t.Errorf("thumbnail_url %q, want %q…", v.ThumbnailURL, wantThumb)
	}
	if dirs := objectDirs(t, storageDir, id); len(dirs) != 1 || dirs[0] != token {
		t.Errorf("storage hls/%d/ holds %v, want only the claim prefix %s", id, dirs, token)
	}
	claimDir := filepath.Join(storageDir, "hls", strconv.FormatInt(id, 10), token)
	for _, f := range []string{"master.m3u8", "thumb.jpg", "v0/index.m3u8", "v0/media.mp4", "v0/iframes.m3u8",
		"storyboard/storyboard.vtt", "storyboard/sprite_000.jpg"} {
		if fi, err := os.Stat(filepath.Join(claimDir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("output %s under %s: %v (want a non-empty file)", f, claimDir, err)
		}
	}
	if left := scratchDirs(t, tmpDir); len(left) > 0 {
		t.Errorf("encode scratch directories left behind after READY: %v", left)
	}
	if t.Failed() {
		t.FailNow()
	}

	// Playable now, by the owner and (PUBLIC) by anyone. The cache entry loaded while
	// PROCESSING is evicted by the READY notification, asynchronously: a few tries are allowed,
	// far fewer than the 60 s cache TTL would take.
	for _, who := range []struct {
		name  string
		token string
	}{{"the owner", owner}, {"another member", viewer}} {
		tries := 0
		giveUp := time.Now().Add(5 * time.Second)
		for {
			tries++
			status, out := putPosition(t, s, who.token, id, 1000)
			if status == http.StatusNoContent {
				if tries > 1 {
					t.Logf("PUT by %s after READY answered 204 at try %d", who.name, tries)
				}
				break
			}
			if status != http.StatusNotFound || time.Now().After(giveUp) {
				t.Errorf("PUT /v1/playback/%d by %s after READY: status %d %s after %d tries, want 204 "+
					"(is the media cache evicted when the media becomes READY?)", id, who.name, status, out, tries)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// Served through the signed URLs, without a token (now that the cache knows it is READY):
	// master, a variant playlist, a segment, the thumbnail.
	masterURL := s.HTTPURL + v.HLSURL
	unsigned, _, _ := strings.Cut(masterURL, "?")
	if status, _ := fetch(t, s, owner, unsigned); status != http.StatusForbidden {
		t.Errorf("GET %s without its signature (with a token): status %d, want 403", unsigned, status)
	}
	status, master := fetch(t, s, "", masterURL)
	if status != http.StatusOK || !bytes.HasPrefix(master, []byte("#EXTM3U")) || !bytes.Contains(master, []byte("#EXT-X-STREAM-INF")) {
		t.Fatalf("GET %s: status %d, body %q; want 200 and a master playlist", masterURL, status, master)
	}
	variantURL := firstURI(t, masterURL, master)
	status, variant := fetch(t, s, "", variantURL)
	if status != http.StatusOK || !bytes.Contains(variant, []byte("#EXTINF")) {
		t.Fatalf("GET %s: status %d, body %q; want 200 and a media playlist", variantURL, status, variant)
	}
	// The first segment: a byte range of the rendition's fMP4 file, its first box a sidx or moof.
	segmentURL := firstURI(t, variantURL, variant)
	first, last := firstByteRange(t, variant)
	status, header, segment := fetchRange(t, segmentURL, first, last)
	if box := string(segment[4:min(8, len(segment))]); status != http.StatusPartialContent || int64(len(segment)) != last-first+1 ||
		(box != "sidx" && box != "moof" && box != "styp") || header.Get("Content-Type") != "video/mp4" {
		t.Errorf("GET %s bytes %d-%d: status %d, %d bytes (box %q, %s); want 206 and an fMP4 segment", segmentURL, first, last,
			status, len(segment), box, header.Get("Content-Type"))
	}
	// The storyboard: its sprites are signed links that open JPEGs.
	status, board := fetch(t, s, "", s.HTTPURL+v.StoryboardURL)
	sprite := regexp.MustCompile(`(?m)^(/objects/\S+sprite_000\.jpg\?\S+)#xywh=\d+,\d+,\d+,\d+$`).FindSubmatch(board)
	if status != http.StatusOK || !bytes.HasPrefix(board, []byte("WEBVTT")) || sprite == nil {
		t.Fatalf("GET storyboard_url %q: status %d %q, want WebVTT with signed sprites", v.StoryboardURL, status, board)
	}
	if status, jpeg := fetch(t, s, "", s.HTTPURL+string(sprite[1])); status != http.StatusOK || http.DetectContentType(jpeg) != "image/jpeg" {
		t.Errorf("GET sprite %s: status %d, want a JPEG", sprite[1], status)
	}
	status, thumb := fetch(t, s, "", s.HTTPURL+v.ThumbnailURL)
	if ct := http.DetectContentType(thumb); status != http.StatusOK || ct != "image/jpeg" {
		t.Errorf("GET %s: status %d, %d bytes detected as %q; want 200 and a JPEG", v.ThumbnailURL, status, len(thumb), ct)
	}
	ctx, cancel := context.WithTimeout(context.Background(), encodeTimeout)
	defer cancel()
	probe := exec.CommandContext(ctx, "ffprobe", "-v", "error", masterURL)
	if b, err := probe.CombinedOutput(); err != nil {
		t.Errorf("ffprobe -v error %s: %v\n%s", masterURL, err, b)
	}

	// The source exists in storage but is never served, directly or by climbing out of /hls.
	_, _, sourceKey := mediaRow(t, pool, id)
	source, err := os.ReadFile(filepath.Join(storageDir, filepath.FromSlash(sourceKey)))
	if err != nil || !strings.HasPrefix(sourceKey, "uploads/") {
		t.Fatalf("uploaded source %q should be in storage under uploads/: %v", sourceKey, err)
	}
	if status, body := fetch(t, s, owner, s.HTTPURL+"/objects/"+sourceKey); status != http.StatusNotFound {
		t.Errorf("GET /objects/%s: status %d (%d bytes), want 404: uploaded sources must never be public", sourceKey, status, len(body))
	}
	for _, p := range []string{"/objects/hls/../" + sourceKey, "/objects/hls/%2e%2e/" + sourceKey, "/objects/hls/..%2f" + sourceKey} {
		if status, body := fetch(t, s, owner, s.HTTPURL+p); status == http.StatusOK || bytes.Equal(body, source) {
			t.Errorf("GET %s: status %d (%d bytes): the uploaded source is reachable", p, status, len(body))
		}
	}
}

// TestPipeline_NonVideoUploadFails uploads a text file: the job fails permanently at its first
// attempt (no retries), the media is FAILED with a reason, the owner gets exactly one
// notification, and the process stays healthy. An admin retry runs it once more, with the
// same outcome.
func TestPipeline_NonVideoUploadFails(t *testing.T) {
	storageDir := t.TempDir()
	s := binarytest.Start(t, pipelineEnv("all", "e2e-all", storageDir, t.TempDir(), "ultrafast"))
	pool := s.Pool(t)
	const ownerID = 21
	owner, admin := binarytest.Token(t, ownerID, false), binarytest.Token(t, 1, true)
	notes := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(notes, []byte(strings.Repeat("These are meeting notes, not a video.\n", 50)), 0o644); err != nil {
		t.Fatal(err)
	}

	id := s.Upload(t, owner, binarytest.Upload{Path: notes, FileName: "notes.txt", Visibility: "PRIVATE"})
	v := waitMedia(t, s, owner, id, media.StatusFailed)
	if v.FailureReason == "" || !strings.Contains(v.FailureReason, encoder.ErrNotVideo.Error()) {
		t.Errorf("failure_reason %q, want one saying %q", v.FailureReason, encoder.ErrNotVideo.Error())
	}
	if v.HLSURL != "" || v.ThumbnailURL != "" {
		t.Errorf("FAILED media shows hls_url %q thumbnail_url %q, want none", v.HLSURL, v.ThumbnailURL)
	}
	job := mediaJob(t, pool, id) // exactly one job
	if job.Status != string(jobqueue.StatusDead) || job.AttemptCount != 1 || job.CompletedAt == nil {
		t.Errorf("%v; want DEAD after exactly 1 attempt (a permanent error is not retried)", job)
	}
	if !strings.Contains(str(job.LastError), encoder.ErrNotVideo.Error()) {
		t.Errorf("job last_error %q, want the not-a-video reason", str(job.LastError))
	}

	// The admin API shows the same single DEAD job.
	var list struct {
		Jobs []jobqueue.Row `json:"jobs"`
	}
	out := s.MustDo(t, http.StatusOK, http.MethodGet, s.HTTPURL+"/v1/admin/jobs?status=DEAD", admin, nil)
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("GET /v1/admin/jobs?status=DEAD: %s: %v", out, err)
	}
	if len(list.Jobs) != 1 || list.Jobs[0].ID != job.ID || list.Jobs[0].Subject != id || list.Jobs[0].AttemptCount != 1 {
		t.Errorf("GET /v1/admin/jobs?status=DEAD = %s, want exactly job %d of media %d at attempt 1", out, job.ID, id)
	}
	out = s.MustDo(t, http.StatusOK, http.MethodGet, s.HTTPURL+"/v1/admin/jobs", admin, nil)
	if err := json.Unmarshal(out, &list); err != nil || len(list.Jobs) != 1 {
		t.Errorf("GET /v1/admin/jobs = %s (%v), want exactly one job in the whole queue", out, err)
	}
	if n := outboxCount(t, pool, id, ""); n != 1 || outboxCount(t, pool, id, media.OutboxFailed) != 1 {
		t.Errorf("notification_outbox has %d rows for media %d, want exactly 1 of kind %s", n, id, media.OutboxFailed)
	}
	var member int64
	if err := pool.QueryRow(context.Background(), `SELECT member_id FROM notification_outbox WHERE media_id = $1`, id).Scan(&member); err != nil || member != ownerID {
		t.Errorf("the media_failed notification is for member %d (%v), want the owner %d", member, err, ownerID)
	}
	if dirs := objectDirs(t, storageDir, id); len(dirs) != 0 {
		t.Errorf("a failed encode left outputs under hls/%d/: %v", id, dirs)
	}
	s.MustDo(t, http.StatusOK, http.MethodGet, s.MetricsURL+"/readyz", "", nil)
	s.MustDo(t, http.StatusOK, http.MethodGet, s.HTTPURL+"/readyz", "", nil)

	// An admin retry gives the job fresh attempts: it runs again and dies again at attempt 1,
	// with a second notification.
	s.MustDo(t, http.StatusAccepted, http.MethodPost, s.URL("/v1/admin/jobs/%d/retry", job.ID), admin, nil)
	again := waitJob(t, pool, id, "DEAD again after the admin retry", func(j jobRow) bool {
		return j.Status == string(jobqueue.StatusDead) && outboxCount(t, pool, id, media.OutboxFailed) == 2
	}, func(j jobRow) bool { return j.Status == string(jobqueue.StatusCompleted) }, s)
	if again.AttemptCount != 1 || again.ID != job.ID {
		t.Errorf("after the admin retry: %v, want job %d DEAD at attempt 1", again, job.ID)
	}
	if v := mediaOf(t, s, owner, id); v.Status != string(media.StatusFailed) || v.FailureReason == "" {
		t.Errorf("after the admin retry the media is %s (failure_reason %q), want FAILED with a reason", v.Status, v.FailureReason)
	}
	s.MustDo(t, http.StatusNotFound, http.MethodPost, s.URL("/v1/admin/jobs/%d/retry", job.ID+1000), admin, nil)
	s.MustDo(t, http.StatusOK, http.MethodGet, s.MetricsURL+"/readyz", "", nil)
}
