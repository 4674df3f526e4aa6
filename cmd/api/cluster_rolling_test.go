package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/testvideo"
	"github.com/playhead/playhead/media"
)

// rollingRounds is PLAYHEAD_ROLLING_ROUNDS, 5 unless set (make test runs 1 round).
func rollingRounds(t *testing.T) int {
	t.Helper()
	return roundsFromEnv(t, "PLAYHEAD_ROLLING_ROUNDS", 5)
}

// TestCluster_RollingRestart: HAProxy in front of 3 api nodes (health-checked on /readyz, each
// with a drain delay) and 2 worker nodes on one database; players report positions through
// HAProxy and uploads are encoded while every api node, then every worker node, is stopped
// with SIGTERM and started again, PLAYHEAD_ROLLING_ROUNDS times. Then everything stops
// gracefully and the test counts: requests not answered 204/200 (transport errors included),
// positions answered 204 and not stored, keys whose stored position is not the newest
// accepted, uploads not READY, uploads whose encode group (an encode job, one job per rung,
// a finish, in one group) did not complete every job exactly once at its first attempt (a
// stopping worker gives its job back with its attempt: a rendition released mid-encode is
// started again by the other worker, and nothing is retried after a lease ran out) with one
// media_playable and one media_ready notification. Every count must be 0.
func TestCluster_RollingRestart(t *testing.T) {
	rounds := rollingRounds(t)
	began := time.Now()
	c := startCluster(t, nil)
	lb := c.lb

	owner := binarytest.Token(t, 7, false)
	// Each player reports about once a second (a real one every 5 s), under the per-member
	// limit of 1/s with its burst of 10.
	players := binarytest.NewPlayers(t, lb, 150, 1000, 6)
	load := binarytest.StartLoad(t, lb, players, binarytest.LoadConfig{Workers: 6, Pace: time.Second, ReadEvery: 10})
	// A read through another node than the report's finds nothing until a flush (every
	// second) has stored the player's first position (write-behind): 404 then is no failure.
	// After a few rounds every player has a stored row, and a 404 is one.
	load.WaitRounds(t, 4)
	notFoundBefore := load.Counts().Reads[http.StatusNotFound]

	smallSpec := testvideo.Spec{Seconds: 3, Width: 320, Height: 240, Audio: true}
	small := testvideo.MP4(t, t.TempDir(), smallSpec)
	slow := testvideo.MP4(t, t.TempDir(), slowSpec)
	var uploads []rollingUpload
	upload := func(path string, spec testvideo.Spec, title string) {
		id := lb.Upload(t, owner, binarytest.Upload{Path: path, Title: title})
		uploads = append(uploads, rollingUpload{id: id, split: renditionSplit(spec.Height)})
	}
	for r := 1; r <= rounds; r++ {
		upload(small, smallSpec, fmt.Sprintf("round %d before the api nodes", r))
		for _, n := range c.apis {
			n.restart(t)
			c.waitBalancer(t, n.name, "UP")
		}
		// Encode groups under way while the workers stop: each releases the job it runs (a
		// rendition, mostly) for the other.
		upload(slow, slowSpec, fmt.Sprintf("round %d before the workers", r))
		upload(slow, slowSpec, fmt.Sprintf("round %d before the workers, second", r))
		for _, n := range c.workers {
			n.restart(t)
		}
		t.Logf("round %d of %d done after %s: %d reports accepted so far", r, rounds, time.Since(began).Round(time.Second), load.Accepted.Load())
	}
	for _, u := range uploads {
		waitMedia(t, lb, owner, u.id, media.StatusReady)
	}
	load.WaitRounds(t, 2)
	load.Stop()

	c.stop(t)

	counts := load.Counts()
	failed := failedRequests(counts)
	failed += counts.Reads[http.StatusNotFound] - notFoundBefore
	stored := binarytest.StoredPositions(t, c.dbURL)
	lost, bad := binarytest.Audit(players, stored)
	notNewest := 0
	for _, p := range players {
		if got := stored[binarytest.PlaybackKey{Member: p.Member, Media: p.Media}]; got != p.LastAcked {
			notNewest++
			if notNewest <= 5 {
				t.Errorf("member %d media %d: stored %d, newest accepted %d", p.Member, p.Media, got, p.LastAcked)
			}
		}
	}
	notReady, jobFaults := auditEncodes(t, lb, uploads)
	released := 0
	for _, n := range c.workers {
		released += n.released
	}

	t.Logf("rolling restart: %d rounds (%d api + %d worker restarts) in %s", rounds, rounds*clusterAPINodes,
		rounds*clusterWorkerNodes, time.Since(began).Round(time.Second))
	t.Logf("requests: %d reports sent, %d accepted; %s", load.Sent.Load(), load.Accepted.Load(), counts)
	t.Logf("requests failed (reports not 204, reads not 200, or no answer; 404 before the first restart excepted): %d", failed)
	t.Logf("reads answered 404 before the first restart (first position not flushed yet): %d", notFoundBefore)
	t.Logf("positions accepted and not stored: %d; keys not at their newest accepted position: %d of %d; bad rows: %d",
		len(lost), notNewest, len(players), len(bad))
	t.Logf("uploads: %d, not READY: %d; encode groups not completed exactly once at attempt 1 (every job, one "+
		"media_playable, one media_ready): %d; jobs a stopping worker released mid-encode: %d", len(uploads), notReady, len(jobFaults), released)

	if failed != 0 {
		t.Errorf("%d requests failed through HAProxy during the rolling restart, want 0", failed)
	}
	for i, l := range lost {
		if i == 5 {
			break
		}
		t.Errorf("member %d media %d: position %d answered 204 at %s, not stored", l.Player.Member, l.Player.Media, l.Pos, l.At.Format(time.RFC3339Nano))
	}
	if len(lost) != 0 {
		t.Errorf("%d accepted positions not stored, want 0", len(lost))
	}
	for _, b := range bad {
		t.Error(b)
	}
	if notReady != 0 {
		t.Errorf("%d uploads not READY, want 0", notReady)
	}
	for _, f := range jobFaults {
		t.Error(f)
	}
}

// rollingUpload is an upload of the rolling restart and the rendition jobs its encode plans
// (renditionSplit).
type rollingUpload struct {
	id    int64
	split [][]int
}

// auditEncodes reads every upload's media row, encode group and outbox rows from the database
// (every node has stopped): it returns how many uploads are not READY, and one line per upload
// whose encode group is not whole (an encode job, one job per rung, a finish, all in the
// encode job's group), not every job COMPLETED exactly once at its first attempt, or not one
// media_playable and one media_ready notification (a job lost, or run twice, or retried after
// a lease ran out).
func auditEncodes(t *testing.T, lb *binarytest.Server, uploads []rollingUpload) (notReady int, faults []string) {
	t.Helper()
	pool := lb.Pool(t)
	for _, u := range uploads {
		if status, _, _ := mediaRow(t, pool, u.id); status != string(media.StatusReady) {
			notReady++
			faults = append(faults, fmt.Sprintf("media %d: %s, want READY", u.id, status))
		}
		g := groupOf(mediaJobs(t, pool, u.id))
		wrong := append(g.faults(u.split), attemptFaults(g, nil)...)
		if f := readyEventsFault(mediaEvents(t, pool, u.id)); f != "" {
			wrong = append(wrong, f)
		}
		if len(wrong) > 0 {
			faults = append(faults, fmt.Sprintf("media %d (rendition jobs %v): %s; its jobs:%v", u.id, u.split, strings.Join(wrong, "; "), g))
		}
	}
	return notReady, faults
}
