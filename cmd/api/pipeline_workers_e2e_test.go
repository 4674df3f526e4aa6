package main

// The pipeline with workers that die or stop mid-encode: a role=api process and role=worker
// processes on one database and storage directory (see pipeline_e2e_test.go for the setting).

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/encodejobs"
	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/testvideo"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
)

// TestPipeline_Kill9MidEncodeIsReclaimed kills the only worker with SIGKILL in the middle of
// an encode. Its lease runs out, a second worker reclaims the job (attempt 2) and completes
// it, and a completion under the dead worker's claim token is fenced out: ErrClaimLost, no
// write to the media row or the outbox (the "must show 2").
func TestPipeline_Kill9MidEncodeIsReclaimed(t *testing.T) {
	api, pool, storageDir := startPipeline(t)
	a, tmpA := startWorker(t, api, storageDir, "kill-a")
	if status, _, err := a.Do(http.MethodGet, a.HTTPURL+"/healthz", "", nil); err == nil {
		t.Errorf("a role=worker process answered %d on the public address %s: it must open no public port", status, a.HTTPURL)
	}
	src := testvideo.MP4(t, t.TempDir(), slowSpec)
	owner := binarytest.Token(t, 31, false)
	id := api.Upload(t, owner, binarytest.Upload{Path: src, FileName: "slow.mp4", Title: "e2e kill", Visibility: "PUBLIC"})

	first := waitJob(t, pool, id, "claimed by kill-a", claimedBy("kill-a"), isDone, api, a)
	claimedAt := time.Now()
	waitEncoding(t, pool, id, "kill-a", tmpA, api, a)
	a.Kill(t)
	killedAt := time.Now()
	// A died before finishing: its claim is still on the row, waiting for the lease to run out.
	atKill := mediaJob(t, pool, id)
	if !claimedBy("kill-a")(atKill) || str(atKill.ClaimToken) != str(first.ClaimToken) || atKill.AttemptCount != 1 {
		t.Fatalf("right after SIGKILL: %v, want still A's claim %s at attempt 1 (A was mid-encode)", atKill, str(first.ClaimToken))
	}
	// Nothing kills a SIGKILLed worker's ffmpeg: it runs on, orphaned, into A's scratch dir.
	// End those processes so they neither compete with B for the CPU nor outlive the test.
	orphans := encoderProcs(t, tmpA)
	for _, p := range orphans {
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
	t.Logf("SIGKILL of worker A %s after its claim was seen left %d ffmpeg process(es) of its encode running (killed by the test) "+
		"and %d scratch dir(s) in its TMPDIR", killedAt.Sub(claimedAt).Round(time.Millisecond), len(orphans), len(scratchDirs(t, tmpA)))

	b, _ := startWorker(t, api, storageDir, "kill-b")
	bReady := time.Now()
	second := waitJob(t, pool, id, "reclaimed by kill-b", claimedBy("kill-b"), isDone, api, b)
	reclaimedAt := time.Now()
	t.Logf("SIGKILL → reclaimed by worker B: %s (lease 3s; B was ready %s after the kill)",
		reclaimedAt.Sub(killedAt).Round(time.Millisecond), bReady.Sub(killedAt).Round(time.Millisecond))
	if second.AttemptCount != 2 || str(second.ClaimToken) == str(first.ClaimToken) {
		t.Errorf("reclaimed: %v, want attempt 2 under a new claim token (A's was %s)", second, str(first.ClaimToken))
	}

	q, err := jobqueue.NewQueue(pool, time.Minute, media.JobKind(encodejobs.KindEncode))
	if err != nil {
		t.Fatal(err)
	}
	stale := jobqueue.Job{ID: first.ID, Kind: encodejobs.KindEncode, Subject: id, ClaimToken: str(first.ClaimToken), Attempt: 1, MaxAttempts: 3}
	zombie := func(ranDomain *bool) func(context.Context, pgx.Tx) error {
		return func(ctx context.Context, tx pgx.Tx) error {
			*ranDomain = true
			return media.MarkReady(ctx, tx, id, media.Encoded{HLSKey: "hls/zombie/master.m3u8", ThumbnailKey: "hls/zombie/thumb.jpg", DurationMS: 1}, map[string]any{"zombie": true})
		}
	}
	// Each stale completion gets its own deadline, made just before it: one context made here
	// also had to outlast B's whole encode below, and on a loaded machine the second completion
	// then failed with "context deadline exceeded" instead of ErrClaimLost.
	staleComplete := func(ranDomain *bool) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return q.Complete(ctx, stale, zombie(ranDomain))
	}

	// While B holds the claim, A's token cannot complete the job.
	var ranWhileB bool
	if err := staleComplete(&ranWhileB); !errors.Is(err, jobqueue.ErrClaimLost) {
		t.Errorf("Complete with A's stale token while B holds the claim = %v, want ErrClaimLost", err)
	}
	if status, hlsKey, _ := mediaRow(t, pool, id); status != string(media.StatusProcessing) || hlsKey != "" {
		t.Errorf("after the fenced-out completion during B's claim the media is %s with hls_key %q, want PROCESSING and none", status, hlsKey)
	}
	if n := outboxCount(t, pool, id, ""); n != 0 {
		t.Errorf("after the fenced-out completion during B's claim the outbox has %d rows for the media, want 0", n)
	}
	if j := mediaJob(t, pool, id); isDone(j) || (j.Status == string(jobqueue.StatusProcessing) && str(j.ClaimToken) != str(second.ClaimToken)) {
		t.Errorf("after the fenced-out completion during B's claim: %v, want B's claim %s untouched", j, str(second.ClaimToken))
	}

	done := waitJob(t, pool, id, "COMPLETED", func(j jobRow) bool { return j.Status == string(jobqueue.StatusCompleted) },
		func(j jobRow) bool { return j.Status == string(jobqueue.StatusDead) }, api, b)
	if done.CompletedAt != nil {
		t.Logf("worker B: reclaimed → COMPLETED in about %s (10 s 720p, veryfast, 4 renditions); upload → READY %s overall",
			done.CompletedAt.Sub(reclaimedAt).Round(10*time.Millisecond), done.CompletedAt.Sub(done.EnqueuedAt).Round(10*time.Millisecond))
	}
	if done.AttemptCount != 2 || str(done.ClaimedBy) != "kill-b" || str(done.ClaimToken) != str(second.ClaimToken) {
		t.Errorf("completed: %v, want attempt 2 by kill-b under its claim %s", done, str(second.ClaimToken))
	}
	v := waitMedia(t, api, owner, id, media.StatusReady)
	wantPrefix := fmt.Sprintf("/objects/hls/%d/%s/", id, str(second.ClaimToken))
	if !strings.HasPrefix(v.HLSURL, wantPrefix) {
		t.Errorf("hls_url %q, want it under B's claim prefix %s", v.HLSURL, wantPrefix)
	}
	if status, _ := fetch(t, api, "", api.HTTPURL+v.HLSURL); status != http.StatusOK {
		t.Errorf("GET %s: status %d, want 200", v.HLSURL, status)
	}
	if dirs := objectDirs(t, storageDir, id); len(dirs) != 1 || dirs[0] != str(second.ClaimToken) {
		t.Errorf("storage hls/%d/ holds %v, want only B's claim prefix %s (A never stored outputs)", id, dirs, str(second.ClaimToken))
	}
	_, hlsBefore, _ := mediaRow(t, pool, id)
	if n := outboxCount(t, pool, id, media.OutboxReady); n != 1 {
		t.Errorf("outbox has %d media_ready rows for the media, want 1", n)
	}

	// After B completed, A's late completion is fenced out too and changes nothing.
	var ranAfter bool
	if err := staleComplete(&ranAfter); !errors.Is(err, jobqueue.ErrClaimLost) {
		t.Errorf("Complete with A's stale token after B completed = %v, want ErrClaimLost", err)
	}
	if status, hlsKey, _ := mediaRow(t, pool, id); status != string(media.StatusReady) || hlsKey != hlsBefore {
		t.Errorf("after the late completion the media is %s with hls_key %q, want READY with %q unchanged", status, hlsKey, hlsBefore)
	}
	if n, ready := outboxCount(t, pool, id, ""), outboxCount(t, pool, id, media.OutboxReady); n != 1 || ready != 1 {
		t.Errorf("after the late completion the outbox has %d rows (%d media_ready) for the media, want exactly 1 media_ready", n, ready)
	}
	if j := mediaJob(t, pool, id); j.Status != string(jobqueue.StatusCompleted) || str(j.ClaimToken) != str(second.ClaimToken) || j.AttemptCount != 2 {
		t.Errorf("after the late completion: %v, want B's completed job unchanged", j)
	}
	t.Logf("stale-token completions: their domain writes ran inside the fenced transaction (during B's claim: %v, after B completed: %v)",
		ranWhileB, ranAfter)
	b.MustDo(t, http.StatusOK, http.MethodGet, b.MetricsURL+"/readyz", "", nil)
}

// TestPipeline_SIGTERMReleasesForAnotherWorker stops the only worker with SIGTERM in the
// middle of an encode: it exits 0, the job is PENDING again with its attempt given back and no
// claim, before any other worker exists; a second worker then completes it at attempt 1 (the
// issue's "must show 3").
func TestPipeline_SIGTERMReleasesForAnotherWorker(t *testing.T) {
	api, pool, storageDir := startPipeline(t)
	a, tmpA := startWorker(t, api, storageDir, "term-a")
	src := testvideo.MP4(t, t.TempDir(), slowSpec)
	owner := binarytest.Token(t, 41, false)
	id := api.Upload(t, owner, binarytest.Upload{Path: src, FileName: "slow.mp4", Title: "e2e sigterm", Visibility: "PRIVATE"})

	waitJob(t, pool, id, "claimed by term-a", claimedBy("term-a"), isDone, api, a)
	waitEncoding(t, pool, id, "term-a", tmpA, api, a)
	signalled := time.Now()
	a.Signal(t, syscall.SIGTERM)
	if code := a.Wait(t, binarytest.ExitTimeout); code != 0 {
		t.Errorf("worker A exited with status %d after SIGTERM, want 0", code)
	}
	t.Logf("worker A exited %s after SIGTERM (mid-encode)", time.Since(signalled).Round(time.Millisecond))

	// Before any other worker exists: the claim was given back, attempt returned, due now.
	released := mediaJob(t, pool, id)
	if released.Status != string(jobqueue.StatusPending) || released.AttemptCount != 0 ||
		released.ClaimToken != nil || released.ClaimedBy != nil || released.LeaseUntil != nil || !released.Due {
		t.Fatalf("right after worker A's graceful exit: %v (due now: %v); want PENDING, attempt_count 0, no claim, due at once",
			released, released.Due)
	}
	if status, hlsKey, _ := mediaRow(t, pool, id); status != string(media.StatusProcessing) || hlsKey != "" {
		t.Errorf("after the release the media is %s with hls_key %q, want PROCESSING and none", status, hlsKey)
	}
	if n := outboxCount(t, pool, id, ""); n != 0 {
		t.Errorf("after the release the outbox has %d rows for the media, want 0 (a graceful stop is not a failure)", n)
	}
	if procs := encoderProcs(t, tmpA); len(procs) > 0 {
		t.Errorf("ffmpeg still running after worker A's graceful exit: %v", procs)
	}
	if left := scratchDirs(t, tmpA); len(left) > 0 {
		t.Errorf("worker A left encode scratch directories after its graceful exit: %v", left)
	}
	if dirs := objectDirs(t, storageDir, id); len(dirs) != 0 {
		t.Errorf("worker A left outputs under hls/%d/: %v", id, dirs)
	}

	started := time.Now()
	b, _ := startWorker(t, api, storageDir, "term-b")
	done := waitJob(t, pool, id, "COMPLETED", func(j jobRow) bool { return j.Status == string(jobqueue.StatusCompleted) },
		func(j jobRow) bool { return j.Status == string(jobqueue.StatusDead) }, api, b)
	t.Logf("worker B: start → job COMPLETED in %s (10 s 720p, veryfast, 4 renditions)", time.Since(started).Round(10*time.Millisecond))
	if done.AttemptCount != 1 || str(done.ClaimedBy) != "term-b" {
		t.Errorf("completed: %v, want attempt 1 (the released attempt reused) by term-b", done)
	}
	v := waitMedia(t, api, owner, id, media.StatusReady)
	if want := fmt.Sprintf("/objects/hls/%d/%s/master.m3u8?", id, str(done.ClaimToken)); !strings.HasPrefix(v.HLSURL, want) {
		t.Errorf("hls_url %q, want %q…", v.HLSURL, want)
	}
	// PRIVATE: its files are the owner's alone, like its playback: another member gets no
	// links, and the owner's work without a token.
	if status, _ := fetch(t, api, binarytest.Token(t, 32, false), api.URL("/v1/media/%d", id)); status != http.StatusNotFound {
		t.Errorf("GET /v1/media/%d by another member: status %d, want 404 (private media)", id, status)
	}
	if status, _ := fetch(t, api, "", api.HTTPURL+v.HLSURL); status != http.StatusOK {
		t.Errorf("GET %s (the owner's signed link): status %d, want 200", v.HLSURL, status)
	}
	if n := outboxCount(t, pool, id, media.OutboxReady); n != 1 {
		t.Errorf("outbox has %d media_ready rows for the media, want 1", n)
	}
	b.MustDo(t, http.StatusOK, http.MethodGet, b.MetricsURL+"/readyz", "", nil)
}
