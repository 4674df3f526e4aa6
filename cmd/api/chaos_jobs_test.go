package main

// The reliability suite's media-job faults (see chaos_test.go).

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/testvideo"
	"github.com/playhead/playhead/media"
)

// TestChaos_MediaJobs runs uploads through two workers and, at a random moment of each
// upload's encode group (its probe, a rendition, its finish: whichever jobs run then, on
// either worker), takes one running job of the group and kills its worker (SIGKILL), stops it
// (SIGTERM), or makes it lose its claim by expiring its lease under it; each kind of fault at
// least once per three rounds. Every job of the group (one encode, one per rung, one finish,
// all in the encode job's group) completes exactly once, none lost or left WAITING, PENDING
// or PROCESSING; every job of the group, the faulted one too, completes on its first attempt
// (a kill and a lost claim take the job's lease: it counts one lost lease and no attempt; a
// graceful stop gives the attempt back): a fault costs the work of the job it hit and no
// attempt. No notification is duplicated (one media_playable, one media_ready), and no losing claim's files remain: before
// each fault the test leaves a dead claim's output prefix in storage (what a worker killed
// while storing a rendition leaves), and the orphan sweep (every 200 ms here, 4 s grace) must
// remove it with whatever the fault's loser left, while it keeps every folder a rendition row
// names, even once the test has made its files older than the grace: in the end storage holds
// exactly the folders of the claims that completed the renditions. (A group's winning
// rendition does not remove other claims' folders, as the single encode's winner does: the
// other renditions' folders are beside them.)
func TestChaos_MediaJobs(t *testing.T) {
	rounds := chaosRounds(t)
	api, pool, storageDir := startPipeline(t)
	member := binarytest.Token(t, 77, false)
	dir := t.TempDir()
	spec := testvideo.Spec{Seconds: 8, Width: 640, Height: 360, Audio: true}
	video := testvideo.MP4(t, dir, spec)
	split := renditionSplit(spec.Height)

	workers := map[string]*binarytest.Server{}
	next := 0
	spawn := func() {
		next++
		node := fmt.Sprintf("chaos-w%d", next)
		w, _ := startTunedWorker(t, api, storageDir, node, func(env map[string]string) {
			// The grace must exceed the upload time limit (a worker takes no upload) and the
			// lease (3 s).
			env["PLAYHEAD_ORPHAN_SWEEP_INTERVAL"] = "200ms"
			env["PLAYHEAD_ORPHAN_GRACE"] = "4s"
			env["PLAYHEAD_UPLOAD_TIMEOUT"] = "1s"
		})
		workers[node] = w
	}
	spawn()
	spawn()
	aliveWorkers := func() []*binarytest.Server {
		var alive []*binarytest.Server
		for _, w := range workers {
			alive = append(alive, w)
		}
		return alive
	}
	kinds := []string{"kill -9", "SIGTERM", "lost claim"}
	faults := map[string]int{}
	hit := map[string]int{} // the kinds of the jobs the faults landed on
	untested := func() bool {
		return slices.ContainsFunc(kinds, func(k string) bool { return faults[k] == 0 })
	}
	// A group that finishes before its fault lands tests nothing, so with enough rounds asked
	// for every kind, up to one more round per kind runs while a kind has not landed yet
	// (otherwise a run can draw kill -9, a group that finished first, and a lost claim, and
	// leave SIGTERM untested).
	ran := 0
	for round := 0; round < rounds || (rounds >= len(kinds) && untested() && round < rounds+len(kinds)); round++ {
		ran++
		id := api.Upload(t, member, binarytest.Upload{Path: video, FileName: "clip.mp4", Title: fmt.Sprintf("round %d", round), Visibility: "PRIVATE"})
		waitGroup(t, pool, id, "running", func(g encodeGroup) bool { return len(g.processing()) > 0 || g.over() }, nil, aliveWorkers()...)
		dead := filepath.Join(storageDir, "hls", strconv.FormatInt(id, 10), "00000000-0000-4000-8000-00000000dead")
		if err := os.MkdirAll(dead, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dead, "master.m3u8"), []byte("#EXTM3U\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		backdate(t, dead) // older than the grace: it was left by a claim long dead
		// The moment of the fault, from the probe's claim: in the probe (about 0.5 s here), or in
		// the renditions (two workers, two at a time; about 2.5 s), now and then in the finish. A
		// wider window lands after the group more often, and a kind of fault then goes untested.
		time.Sleep(rand.N(1500 * time.Millisecond))
		running := groupOf(mediaJobs(t, pool, id)).processing()
		// The kind landed least so far (the first of them in kinds' order), so that a kind
		// whose group finished first is tried again in the next round.
		fault := kinds[0]
		for _, k := range kinds {
			if faults[k] < faults[fault] {
				fault = k
			}
		}
		// want: the attempt each faulted job must complete on (every other job: 1); lost: the
		// leases each must have lost by then (every other job: none).
		want, lost := map[int64]int{}, map[int64]int{}
		var target jobRow
		if len(running) == 0 || running[0].ClaimedBy == nil {
			fault = none
		} else {
			target = running[rand.N(len(running))]
			holder := *target.ClaimedBy
			switch fault {
			case "kill -9":
				workers[holder].Kill(t)
				delete(workers, holder)
				// A dead worker's claims stay as they were until their leases run out: the jobs
				// it held at the kill are the fault's (the target, unless it finished first and
				// the worker had claimed the next one).
				for _, j := range groupOf(mediaJobs(t, pool, id)).held(holder) {
					want[j.ID] = j.AttemptCount // its lost lease spends no attempt
					lost[j.ID] = j.LostCount + 1
				}
				spawn()
			case "SIGTERM":
				w := workers[holder]
				w.Stop(t)
				delete(workers, holder)
				g := groupOf(mediaJobs(t, pool, id))
				for _, jobID := range releasedJobs(w.Stderr.String()) {
					if slices.ContainsFunc(g.all, func(j jobRow) bool { return j.ID == jobID }) {
						want[jobID] = 1
					}
				}
				spawn()
			case "lost claim":
				// The lease runs out under the running worker: its next heartbeat finds the claim
				// gone and kills its ffmpeg (a completion is fenced out by the lease too); a
				// worker claims the job again.
				tag, err := pool.Exec(context.Background(),
					`UPDATE jobs SET lease_until = statement_timestamp() - interval '1 second'
					 WHERE id = $1 AND status = 'PROCESSING' AND claim_token = $2::uuid AND attempt_count = 1`, target.ID, str(target.ClaimToken))
				if err != nil {
					t.Fatal(err)
				}
				if tag.RowsAffected() == 1 {
					want[target.ID] = 1 // its lost lease spends no attempt
					lost[target.ID] = target.LostCount + 1
				}
			}
			if len(want) == 0 {
				fault = none // the job finished between the read and the fault
			}
		}
		faults[fault]++
		var on []string
		for jobID := range want {
			j := groupOf(mediaJobs(t, pool, id)).job(t, jobID)
			hit[j.Kind]++
			on = append(on, fmt.Sprintf("job %d %s %s", j.ID, j.Kind, str(j.Args)))
		}
		slices.Sort(on)

		done := waitGroupFinished(t, pool, id, aliveWorkers()...)
		for _, f := range done.faults(split) {
			t.Errorf("round %d (%s on %v): %s", round, fault, on, f)
		}
		for _, f := range attemptFaults(done, want) {
			t.Errorf("round %d (%s on %v): %s", round, fault, on, f)
		}
		for _, j := range done.all {
			if j.LostCount != lost[j.ID] {
				t.Errorf("round %d (%s on %v): job %d (%s) lost %d leases, want %d", round, fault, on, j.ID, j.Kind, j.LostCount, lost[j.ID])
			}
		}
		if t.Failed() {
			t.Fatalf("round %d (%s on %v): the group:%v", round, fault, on, done)
		}
		status, hlsKey, _ := mediaRow(t, pool, id)
		if status != "READY" || hlsKey != media.AssembledMaster(id) {
			t.Fatalf("round %d (%s on %v): media is %s with hls_key %q, want READY with %q", round, fault, on, status, hlsKey, media.AssembledMaster(id))
		}
		if f := readyEventsFault(mediaEvents(t, pool, id)); f != "" {
			t.Fatalf("round %d (%s on %v): %s", round, fault, on, f)
		}
		// The sweep removes the dead claim's prefix and any loser's files once they are past
		// the grace; it must leave every rendition's folder.
		claims := map[string]bool{}
		for _, j := range done.renditions {
			claims[str(j.ClaimToken)] = true
		}
		waitFor(t, encodeTimeout, fmt.Sprintf("round %d: storage hls/%d/ holding only the completed renditions' folders", round, id), func() bool {
			dirs := objectDirs(t, storageDir, id)
			for claim := range claims {
				if !slices.Contains(dirs, claim) { // a folder removed never comes back
					t.Fatalf("round %d (%s on %v): the folder of rendition claim %s is gone from storage (it holds %v)", round, fault, on, claim, dirs)
				}
			}
			return len(dirs) == len(claims)
		}, aliveWorkers()...)
		// And it keeps what a rendition row names, however old: with every rendition file made
		// older than the grace, a whole sweep pass (two passes counted: one may have been under
		// way) leaves them all.
		for claim := range claims {
			backdate(t, filepath.Join(storageDir, "hls", strconv.FormatInt(id, 10), claim))
		}
		sweeps := func() float64 {
			n := 0.0
			for _, w := range workers {
				n += w.Metric(t, `playhead_storage_orphan_sweeps_total{result="ok"}`)
			}
			return n
		}
		before := sweeps()
		waitFor(t, time.Minute, fmt.Sprintf("round %d: two sweep passes over the backdated renditions", round),
			func() bool { return sweeps() >= before+2 }, aliveWorkers()...)
		for _, f := range outputFaults(id, done, renditionFolders(t, pool, id), objectDirs(t, storageDir, id), spec.Audio) {
			t.Fatalf("round %d (%s on %v): %s", round, fault, on, f)
		}
		t.Logf("round %d: %s on %v → group of %d jobs COMPLETED, attempts %v and lost leases %v (by job id; every other job at 1 and 0)",
			round, fault, on, len(done.all), want, lost)
	}
	if rounds >= len(kinds) {
		for _, k := range kinds {
			if faults[k] == 0 {
				t.Errorf("no %s fault landed in %d rounds (faults: %v): that promise was not tested", k, ran, faults)
			}
		}
	}
	t.Logf("%d rounds, faults: %v, on jobs of kinds %v; every job of each group completed once and on its first attempt, the faulted one "+
		"with the lost lease its fault implies, one media_playable and one media_ready each, no losing or dead claim's files left",
		ran, faults, hit)
}

// backdate makes every file under dir an hour old: past any orphan grace of these tests.
func backdate(t *testing.T, dir string) {
	t.Helper()
	old := time.Now().Add(-time.Hour)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		return os.Chtimes(p, old, old)
	})
	if err != nil {
		t.Fatalf("backdate %s: %v", dir, err)
	}
}

// none is the fault of a round whose group had no job running, or whose job finished before
// the fault could land.
const none = "none (finished first)"
