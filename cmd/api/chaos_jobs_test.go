package main

// The reliability suite's media-job faults (see chaos_test.go).

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/testvideo"
)

// TestChaos_MediaJobs runs uploads through two workers and, at a random moment of each encode,
// kills the worker (SIGKILL), stops it (SIGTERM), or makes it lose its claim by expiring its
// lease under it. No job is lost or completed twice, no notification is duplicated, and no
// losing claim's files remain.
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
	faults := map[string]int{}
	for round := range rounds {
		id := api.Upload(t, member, binarytest.Upload{Path: video, FileName: "clip.mp4", Title: fmt.Sprintf("round %d", round), Visibility: "PRIVATE"})
		var alive []*binarytest.Server
		for _, w := range workers {
			alive = append(alive, w)
		}
		j := waitJob(t, pool, id, "claimed", func(j jobRow) bool { return j.Status == "PROCESSING" || isDone(j) }, nil, alive...)
		time.Sleep(time.Duration(rand.Int64N(int64(1500 * time.Millisecond))))
		j = mediaJob(t, pool, id)
		fault := []string{"kill -9", "SIGTERM", "lost claim"}[rand.IntN(3)]
		if j.Status != "PROCESSING" || j.ClaimedBy == nil {
			fault = "none (finished first)"
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
				if _, err := pool.Exec(context.Background(),
					`UPDATE jobs SET lease_until = statement_timestamp() - interval '1 second' WHERE id = $1 AND status = 'PROCESSING'`, j.ID); err != nil {
					t.Fatal(err)
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
		status, hlsKey, _ := mediaRow(t, pool, id)
		if status != "READY" {
			t.Fatalf("round %d (%s): media is %s", round, fault, status)
		}
		if n := outboxCount(t, pool, id, ""); n != 1 {
			t.Fatalf("round %d (%s): %d notifications, want exactly 1", round, fault, n)
		}
		if dirs := objectDirs(t, storageDir, id); len(dirs) != 1 || !strings.Contains(hlsKey, dirs[0]) {
			t.Fatalf("round %d (%s): output prefixes %v, want only the winner's (%s)", round, fault, dirs, hlsKey)
		}
		var jobs int
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM jobs WHERE subject_id = $1`, id).Scan(&jobs); err != nil || jobs != 1 {
			t.Fatalf("round %d: %d jobs for one upload (%v)", round, jobs, err)
		}
		t.Logf("round %d: %s → COMPLETED after %d attempt(s)", round, fault, done.AttemptCount)
	}
	t.Logf("%d rounds, faults: %v; every job completed once, one notification each, no losing claim's files left", rounds, faults)
}
