package main

// The pipeline with workers that die or stop mid-encode: a role=api process and role=worker
// processes on one database and storage directory (see pipeline_e2e_test.go for the setting),
// each upload encoded as a group of jobs (the default, PLAYHEAD_ENCODE_MODE=renditions).

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/encodejobs"
	"github.com/playhead/playhead/encoder"
	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/testvideo"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
)

// TestPipeline_Kill9MidEncodeIsReclaimed kills the only worker with SIGKILL in the middle of a
// rendition of an upload's encode group: its probe and its lowest rendition are done (the media
// is playable), its second rendition is being encoded. The kill costs that rendition one lost
// lease and nothing else (no attempt): its lease runs out, a second worker reclaims that job
// (attempt 1 still, lost_count 1) and completes it and the rest of the group, while every other
// job of the group completes once at attempt 1 (the renditions the dead worker finished are not encoded again). A completion under
// the dead worker's claim token is fenced out: ErrClaimLost, no write to the media row or the
// outbox.
func TestPipeline_Kill9MidEncodeIsReclaimed(t *testing.T) {
	api, pool, storageDir := startPipeline(t)
	a, tmpA := startWorker(t, api, storageDir, "kill-a")
	if status, _, err := a.Do(http.MethodGet, a.HTTPURL+"/healthz", "", nil); err == nil {
		t.Errorf("a role=worker process answered %d on the public address %s: it must open no public port", status, a.HTTPURL)
	}
	src := testvideo.MP4(t, t.TempDir(), slowSpec)
	rungs, split := len(encoder.PlanLadder(slowSpec.Height)), renditionSplit(slowSpec.Height)
	owner := binarytest.Token(t, 31, false)
	id := api.Upload(t, owner, binarytest.Upload{Path: src, FileName: "slow.mp4", Title: "e2e kill", Visibility: "PUBLIC"})

	// One worker runs one rendition at a time, lowest first: the second is A's claim once the
	// lowest is COMPLETED.
	g := waitGroup(t, pool, id, "at its second rendition, claimed by kill-a", func(g encodeGroup) bool {
		return len(g.renditions) == len(split) && g.renditions[0].Status == string(jobqueue.StatusCompleted) && claimedBy("kill-a")(g.renditions[1])
	}, func(g encodeGroup) bool {
		return g.dead() || len(g.renditions) > 1 && isDone(g.renditions[1])
	}, api, a)
	first := g.renditions[1]
	claimedAt := time.Now()
	waitEncoding(t, pool, id, first.ID, "kill-a", tmpA, api, a)
	a.Kill(t)
	killedAt := time.Now()
	// A died before finishing: its claim is still on the row, waiting for the lease to run out;
	// what it completed stays completed.
	atKill := groupOf(mediaJobs(t, pool, id))
	if j := atKill.job(t, first.ID); !claimedBy("kill-a")(j) || str(j.ClaimToken) != str(first.ClaimToken) || j.AttemptCount != 1 {
		t.Fatalf("right after SIGKILL: %v, want still A's claim %s at attempt 1 (A was mid-rendition)", j, str(first.ClaimToken))
	}
	for _, j := range []jobRow{atKill.probe[0], atKill.renditions[0]} {
		if j.Status != string(jobqueue.StatusCompleted) || j.AttemptCount != 1 || str(j.ClaimedBy) != "kill-a" {
			t.Errorf("right after SIGKILL: %v, want COMPLETED by kill-a at attempt 1", j)
		}
	}
	// Playable from its first rendition on: the kill of the second changes nothing of that.
	if v := mediaOf(t, api, owner, id); v.Status != string(media.StatusProcessing) || !v.Playable || v.HLSURL == "" {
		t.Errorf("right after SIGKILL the media is %s, playable %v, hls_url %q; want PROCESSING, playable, with a link", v.Status, v.Playable, v.HLSURL)
	}
	// The encoder starts ffmpeg with Pdeathsig (encoder/procattr_linux.go), so it should die
	// with A; any still running, orphaned, into A's scratch dir is ended here, so that it
	// neither competes with B for the CPU nor outlives the test.
	orphans := encoderProcs(t, tmpA)
	for _, p := range orphans {
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
	t.Logf("SIGKILL of worker A %s after its claim of rendition job %d (%s) was seen left %d ffmpeg process(es) of its encode running "+
		"(killed by the test) and %d scratch dir(s) in its TMPDIR", killedAt.Sub(claimedAt).Round(time.Millisecond), first.ID, str(first.Args),
		len(orphans), len(scratchDirs(t, tmpA)))

	b, _ := startWorker(t, api, storageDir, "kill-b")
	bReady := time.Now()
	second := waitGroup(t, pool, id, "with the killed rendition reclaimed by kill-b", func(g encodeGroup) bool {
		return claimedBy("kill-b")(g.job(t, first.ID))
	}, func(g encodeGroup) bool { return isDone(g.job(t, first.ID)) }, api, b).job(t, first.ID)
	reclaimedAt := time.Now()
	t.Logf("SIGKILL → rendition reclaimed by worker B: %s (lease 3s; B was ready %s after the kill)",
		reclaimedAt.Sub(killedAt).Round(time.Millisecond), bReady.Sub(killedAt).Round(time.Millisecond))
	if second.AttemptCount != 1 || second.LostCount != 1 || str(second.ClaimToken) == str(first.ClaimToken) {
		t.Errorf("reclaimed: %v, want attempt 1 still (the lost lease spent none) and 1 lost lease, under a new claim token (A's was %s)", second, str(first.ClaimToken))
	}

	q, err := jobqueue.NewQueue(pool, time.Minute, media.JobKind(encodejobs.KindRendition))
	if err != nil {
		t.Fatal(err)
	}
	stale := jobqueue.Job{ID: first.ID, Kind: encodejobs.KindRendition, Subject: id, ClaimToken: str(first.ClaimToken), Attempt: 1, MaxAttempts: 3,
		Group: *first.GroupID, Args: []byte(str(first.Args))}
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

	// While B holds the claim, A's token cannot complete the job. The media stays as the
	// lowest rendition left it: PROCESSING, playable from its assembled master, one
	// media_playable row.
	var ranWhileB bool
	if err := staleComplete(&ranWhileB); !errors.Is(err, jobqueue.ErrClaimLost) {
		t.Errorf("Complete with A's stale token while B holds the claim = %v, want ErrClaimLost", err)
	}
	if status, hlsKey, _ := mediaRow(t, pool, id); status != string(media.StatusProcessing) || hlsKey != media.AssembledMaster(id) {
		t.Errorf("after the fenced-out completion during B's claim the media is %s with hls_key %q, want PROCESSING and %q",
			status, hlsKey, media.AssembledMaster(id))
	}
	if events := mediaEvents(t, pool, id); !maps.Equal(events, map[string]int{media.OutboxPlayable: 1}) {
		t.Errorf("after the fenced-out completion during B's claim the outbox rows of the media are %v, want one %s", events, media.OutboxPlayable)
	}
	if j := groupOf(mediaJobs(t, pool, id)).job(t, first.ID); isDone(j) || (j.Status == string(jobqueue.StatusProcessing) && str(j.ClaimToken) != str(second.ClaimToken)) {
		t.Errorf("after the fenced-out completion during B's claim: %v, want B's claim %s untouched", j, str(second.ClaimToken))
	}

	done := waitGroupFinished(t, pool, id, api, b)
	if fin := done.finish[0]; fin.CompletedAt != nil {
		t.Logf("worker B: rendition job reclaimed → group finished in about %s (10 s 720p, veryfast, %d rendition jobs, %d of them left to B); upload → READY %s overall",
			fin.CompletedAt.Sub(reclaimedAt).Round(10*time.Millisecond), len(split), len(split)-1, fin.CompletedAt.Sub(done.probe[0].EnqueuedAt).Round(10*time.Millisecond))
	}
	for _, f := range done.faults(split) {
		t.Error(f)
	}
	// The kill cost the killed rendition a lost lease, no attempt, and nothing else.
	for _, f := range attemptFaults(done, nil) {
		t.Error(f)
	}
	if j := done.job(t, first.ID); str(j.ClaimedBy) != "kill-b" || str(j.ClaimToken) != str(second.ClaimToken) {
		t.Errorf("completed: %v, want the killed rendition completed by kill-b under its claim %s", j, str(second.ClaimToken))
	}
	for _, j := range done.all {
		if j.ID > first.ID && str(j.ClaimedBy) != "kill-b" {
			t.Errorf("%v, want completed by kill-b (A was dead before it ran)", j)
		}
	}
	v := waitMedia(t, api, owner, id, media.StatusReady)
	wantURL := fmt.Sprintf("/objects/hls/%d/master.m3u8?", id)
	if !strings.HasPrefix(v.HLSURL, wantURL) {
		t.Errorf("hls_url %q, want the assembled master %s…", v.HLSURL, wantURL)
	}
	if status, master := fetch(t, api, "", api.HTTPURL+v.HLSURL); status != http.StatusOK || masterVariants(master) != rungs {
		t.Errorf("GET %s: status %d with %d variants, want 200 with %d:\n%s", v.HLSURL, status, masterVariants(master), rungs, master)
	}
	// Every rendition row names the folder of the claim that completed it (the killed one B's),
	// and storage holds those folders alone: A never stored outputs for the rendition it was
	// killed in.
	for _, f := range outputFaults(id, done, renditionFolders(t, pool, id), objectDirs(t, storageDir, id), slowSpec.Audio) {
		t.Error(f)
	}
	_, hlsBefore, _ := mediaRow(t, pool, id)
	if f := readyEventsFault(mediaEvents(t, pool, id)); f != "" {
		t.Error(f)
	}

	// After B completed, A's late completion is fenced out too and changes nothing.
	var ranAfter bool
	if err := staleComplete(&ranAfter); !errors.Is(err, jobqueue.ErrClaimLost) {
		t.Errorf("Complete with A's stale token after B completed = %v, want ErrClaimLost", err)
	}
	if status, hlsKey, _ := mediaRow(t, pool, id); status != string(media.StatusReady) || hlsKey != hlsBefore {
		t.Errorf("after the late completion the media is %s with hls_key %q, want READY with %q unchanged", status, hlsKey, hlsBefore)
	}
	if f := readyEventsFault(mediaEvents(t, pool, id)); f != "" {
		t.Errorf("after the late completion: %s", f)
	}
	if j := groupOf(mediaJobs(t, pool, id)).job(t, first.ID); j.Status != string(jobqueue.StatusCompleted) || str(j.ClaimToken) != str(second.ClaimToken) || j.AttemptCount != 1 || j.LostCount != 1 {
		t.Errorf("after the late completion: %v, want B's completed job unchanged", j)
	}
	t.Logf("stale-token completions: their domain writes ran inside the fenced transaction (during B's claim: %v, after B completed: %v)",
		ranWhileB, ranAfter)
	b.MustDo(t, http.StatusOK, http.MethodGet, b.MetricsURL+"/readyz", "", nil)
}

// longLease gives a worker a lease far longer than pipelineEnv's 3 s, for a test that waits on
// no lease to run out. Leases are PostgreSQL's wall-clock time, so a step of this machine's wall
// clock longer than the lease expires every claim: a CI run saw the wall clock move 30 s while
// the monotonic clock moved 7 s, and worker B lost its claim to the released job and ran it at
// attempt 2. A graceful release is fenced by an unexpired lease too, so this keeps A's valid
// through such a step. (Heartbeats come every 40 s then, so the test no longer sees one beside
// the release.)
func longLease(env map[string]string) { env["PLAYHEAD_JOB_LEASE"] = "2m" }

// TestPipeline_SIGTERMReleasesForAnotherWorker stops the only worker with SIGTERM in the
// middle of a rendition of an upload's encode group (its probe and lowest rendition done, its
// second rendition being encoded): it exits 0, and before any other worker exists that
// rendition job is PENDING again with its attempt given back and no claim, while what the
// worker completed stays completed and the media stays playable. A second worker then
// completes the released rendition at attempt 1 and the rest of the group, every job of it
// completed once at attempt 1.
func TestPipeline_SIGTERMReleasesForAnotherWorker(t *testing.T) {
	api, pool, storageDir := startPipeline(t)
	a, tmpA := startTunedWorker(t, api, storageDir, "term-a", longLease)
	src := testvideo.MP4(t, t.TempDir(), slowSpec)
	rungs, split := len(encoder.PlanLadder(slowSpec.Height)), renditionSplit(slowSpec.Height)
	owner := binarytest.Token(t, 41, false)
	id := api.Upload(t, owner, binarytest.Upload{Path: src, FileName: "slow.mp4", Title: "e2e sigterm", Visibility: "PRIVATE"})

	g := waitGroup(t, pool, id, "at its second rendition, claimed by term-a", func(g encodeGroup) bool {
		return len(g.renditions) == len(split) && g.renditions[0].Status == string(jobqueue.StatusCompleted) && claimedBy("term-a")(g.renditions[1])
	}, func(g encodeGroup) bool {
		return g.dead() || len(g.renditions) > 1 && isDone(g.renditions[1])
	}, api, a)
	running := g.renditions[1]
	waitEncoding(t, pool, id, running.ID, "term-a", tmpA, api, a)
	signalled := time.Now()
	a.Signal(t, syscall.SIGTERM)
	if code := a.Wait(t, binarytest.ExitTimeout); code != 0 {
		t.Errorf("worker A exited with status %d after SIGTERM, want 0", code)
	}
	t.Logf("worker A exited %s after SIGTERM (mid-rendition, job %d %s)", time.Since(signalled).Round(time.Millisecond), running.ID, str(running.Args))
	if ids := releasedJobs(a.Stderr.String()); !slices.Equal(ids, []int64{running.ID}) {
		t.Errorf("worker A logged the release of jobs %v, want [%d] (the rendition it was encoding)", ids, running.ID)
	}

	// Before any other worker exists: the claim was given back, attempt returned, due now. The
	// rest of the group is as A left it: the probe and the lowest rendition COMPLETED at
	// attempt 1, the higher renditions PENDING, never claimed, the finish WAITING for them.
	after := groupOf(mediaJobs(t, pool, id))
	released := after.job(t, running.ID)
	if released.Status != string(jobqueue.StatusPending) || released.AttemptCount != 0 ||
		released.ClaimToken != nil || released.ClaimedBy != nil || released.LeaseUntil != nil || !released.Due {
		t.Fatalf("right after worker A's graceful exit: %v (due now: %v); want PENDING, attempt_count 0, no claim, due at once",
			released, released.Due)
	}
	for _, j := range after.all {
		var want string
		switch {
		case j.ID == running.ID:
			continue
		case j.Kind == encodejobs.KindEncode || j.ID == after.renditions[0].ID:
			want = string(jobqueue.StatusCompleted)
		case j.Kind == encodejobs.KindRendition:
			want = string(jobqueue.StatusPending)
		default:
			want = string(jobqueue.StatusWaiting)
		}
		if j.Status != want || (want == string(jobqueue.StatusCompleted)) != (j.AttemptCount == 1) {
			t.Errorf("right after worker A's graceful exit: %v, want %s (attempt 1 if completed, else 0)", j, want)
		}
	}
	if status, hlsKey, _ := mediaRow(t, pool, id); status != string(media.StatusProcessing) || hlsKey != media.AssembledMaster(id) {
		t.Errorf("after the release the media is %s with hls_key %q, want PROCESSING and %q (playable from its lowest rendition)",
			status, hlsKey, media.AssembledMaster(id))
	}
	if events := mediaEvents(t, pool, id); !maps.Equal(events, map[string]int{media.OutboxPlayable: 1}) {
		t.Errorf("after the release the outbox rows of the media are %v, want one %s (a graceful stop is not a failure)", events, media.OutboxPlayable)
	}
	if procs := encoderProcs(t, tmpA); len(procs) > 0 {
		t.Errorf("ffmpeg still running after worker A's graceful exit: %v", procs)
	}
	if left := scratchDirs(t, tmpA); len(left) > 0 {
		t.Errorf("worker A left encode scratch directories after its graceful exit: %v", left)
	}
	if dirs, want := objectDirs(t, storageDir, id), []string{str(after.renditions[0].ClaimToken)}; !slices.Equal(dirs, want) {
		t.Errorf("storage hls/%d/ holds %v after worker A's graceful exit, want only its lowest rendition's folder %v", id, dirs, want)
	}

	started := time.Now()
	b, _ := startTunedWorker(t, api, storageDir, "term-b", longLease)
	done := waitGroupFinished(t, pool, id, api, b)
	t.Logf("worker B: start → group finished in %s (10 s 720p, veryfast, %d rendition jobs, %d of them left to B)",
		time.Since(started).Round(10*time.Millisecond), len(split), len(split)-1)
	for _, f := range done.faults(split) {
		t.Error(f)
	}
	// A graceful stop costs no attempt: every job, the released one included, at attempt 1.
	for _, f := range attemptFaults(done, nil) {
		t.Error(f)
	}
	if j := done.job(t, running.ID); str(j.ClaimedBy) != "term-b" {
		t.Errorf("completed: %v, want the released rendition completed by term-b at attempt 1 (the released attempt reused)", j)
	}
	v := waitMedia(t, api, owner, id, media.StatusReady)
	if want := fmt.Sprintf("/objects/hls/%d/master.m3u8?", id); !strings.HasPrefix(v.HLSURL, want) {
		t.Errorf("hls_url %q, want the assembled master %q…", v.HLSURL, want)
	}
	// PRIVATE: its files are the owner's alone, like its playback: another member gets no
	// links, and the owner's work without a token.
	if status, _ := fetch(t, api, binarytest.Token(t, 32, false), api.URL("/v1/media/%d", id)); status != http.StatusNotFound {
		t.Errorf("GET /v1/media/%d by another member: status %d, want 404 (private media)", id, status)
	}
	if status, master := fetch(t, api, "", api.HTTPURL+v.HLSURL); status != http.StatusOK || masterVariants(master) != rungs {
		t.Errorf("GET %s (the owner's signed link): status %d with %d variants, want 200 with %d:\n%s", v.HLSURL, status, masterVariants(master), rungs, master)
	}
	for _, f := range outputFaults(id, done, renditionFolders(t, pool, id), objectDirs(t, storageDir, id), slowSpec.Audio) {
		t.Error(f)
	}
	if f := readyEventsFault(mediaEvents(t, pool, id)); f != "" {
		t.Error(f)
	}
	b.MustDo(t, http.StatusOK, http.MethodGet, b.MetricsURL+"/readyz", "", nil)
}
