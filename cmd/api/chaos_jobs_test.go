package main

// The reliability suite's media-job faults (see chaos_test.go).

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/testvideo"
)

// TestChaos_MediaJobs runs uploads through two workers and, at a random moment of each encode,
// kills the worker (SIGKILL), stops it (SIGTERM), or makes it lose its claim by expiring its
// lease under it; each kind of fault at least once per three rounds. No job is lost or
// completed twice, each fault ends on the attempt it must (a kill or a lost claim costs an
// attempt, a graceful stop gives it back), no notification is duplicated, and no losing
// claim's files remain: before each fault the test leaves a dead claim's output prefix in
// storage (what a worker killed while storing its outputs leaves), and the winner must remove
// it with whatever the fault's loser left.
func TestChaos_MediaJobs(t *testing.T) {
	rounds := chaosRounds(t)
	api, pool, storageDir := startPipeline(t)
	member := binarytest.Token(t, 77, false)
	dir := t.TempDir()
	video := testvideo.MP4(t, dir, testvideo.Spec{Seconds: 8, Width: 640, Height: 360, Audio: true})

	workers := map[string]*binarytest.Server{}
	next := 0
	spawn := func() {
		next++
		node := fmt.Sprintf("chaos-w%d", next)
		w, _ := startWorker(t, api, storageDir, node)
		workers[node] = w
	}
	spawn()
	spawn()
	kinds := []string{"kill -9", "SIGTERM", "lost claim"}
	// The attempt each fault's job must complete on.
	wantAttempts := map[string]int{"kill -9": 2, "SIGTERM": 1, "lost claim": 2, none: 1}
	faults := map[string]int{}
	completedBy := map[string]int{} // encode jobs each worker completed
	for round := range rounds {
		id := api.Upload(t, member, binarytest.Upload{Path: video, FileName: "clip.mp4", Title: fmt.Sprintf("round %d", round), Visibility: "PRIVATE"})
		var alive []*binarytest.Server
		for _, w := range workers {
			alive = append(alive, w)
		}
		j := waitJob(t, pool, id, "claimed", func(j jobRow) bool { return j.Status == "PROCESSING" || isDone(j) }, nil, alive...)
		dead := filepath.Join(storageDir, "hls", strconv.FormatInt(id, 10), "00000000-0000-4000-8000-00000000dead")
		if err := os.MkdirAll(dead, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dead, "master.m3u8"), []byte("#EXTM3U\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rand.Int64N(int64(1500 * time.Millisecond))))
		j = mediaJob(t, pool, id)
		// The kind injected least so far, so that every kind lands even when a job finishes first.
		fault := kinds[round%len(kinds)]
		for _, k := range kinds {
			if faults[k] < faults[fault] {
				fault = k
			}
		}
		if j.Status != "PROCESSING" || j.ClaimedBy == nil {
			fault = none
		} else {
			holder := *j.ClaimedBy
			switch fault {
			case "kill -9":
				workers[holder].Kill(t)
				delete(workers, holder)
				spawn()
			case "SIGTERM":
				workers[holder].Stop(t)
				delete(workers, holder)
				spawn()
			case "lost claim":
				// The lease runs out under the running worker: its next heartbeat finds the claim
				// gone and kills its ffmpeg; a worker claims the job again.
				tag, err := pool.Exec(context.Background(),
					`UPDATE jobs SET lease_until = statement_timestamp() - interval '1 second' WHERE id = $1 AND status = 'PROCESSING' AND attempt_count = 1`, j.ID)
				if err != nil {
					t.Fatal(err)
				}
				if tag.RowsAffected() != 1 {
					fault = none // it finished between the read and the update
				}
			}
		}
		faults[fault]++
		alive = alive[:0]
		for _, w := range workers {
			alive = append(alive, w)
		}
		done := waitJob(t, pool, id, "completed", isDone, nil, alive...)
		if done.Status != "COMPLETED" {
			t.Fatalf("round %d (%s): job ended %v", round, fault, done)
		}
		if done.AttemptCount != wantAttempts[fault] {
			t.Fatalf("round %d (%s): completed on attempt %d, want %d", round, fault, done.AttemptCount, wantAttempts[fault])
		}
		status, hlsKey, _ := mediaRow(t, pool, id)
		if status != "READY" {
			t.Fatalf("round %d (%s): media is %s", round, fault, status)
		}
		if n := outboxCount(t, pool, id, ""); n != 1 {
			t.Fatalf("round %d (%s): %d notifications, want exactly 1", round, fault, n)
		}
		// The winner removes the other claims' prefixes after its completion committed (only
		// then is it the winner): COMPLETED can be seen before that cleanup ran. Its outcome
		// metric counts the job once the cleanup has returned. A winner this round stopped has
		// exited, and a graceful stop waits for its jobs' cleanup.
		if winner, ok := workers[*done.ClaimedBy]; ok {
			completedBy[*done.ClaimedBy]++
			waitMetric(t, winner, `playhead_jobs_outcomes_total{kind="encode",outcome="completed"}`, float64(completedBy[*done.ClaimedBy]))
		}
		if dirs := objectDirs(t, storageDir, id); len(dirs) != 1 || !strings.Contains(hlsKey, dirs[0]) {
			t.Fatalf("round %d (%s): output prefixes %v, want only the winner's (%s)", round, fault, dirs, hlsKey)
		}
		var jobs int
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM jobs WHERE subject_id = $1`, id).Scan(&jobs); err != nil || jobs != 1 {
			t.Fatalf("round %d: %d jobs for one upload (%v)", round, jobs, err)
		}
		t.Logf("round %d: %s → COMPLETED on attempt %d", round, fault, done.AttemptCount)
	}
	if rounds >= len(kinds) {
		for _, k := range kinds {
			if faults[k] == 0 {
				t.Errorf("no %s fault landed in %d rounds (faults: %v): that promise was not tested", k, rounds, faults)
			}
		}
	}
	t.Logf("%d rounds, faults: %v; every job completed once on the attempt its fault implies, one notification each, "+
		"no losing or dead claim's files left", rounds, faults)
}

// none is the fault of a round whose job finished before a fault could be injected.
const none = "none (finished first)"
