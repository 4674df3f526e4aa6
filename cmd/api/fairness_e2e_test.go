package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/testvideo"
	"github.com/playhead/playhead/media"
)

// fairRatioBound is the most an upload's time to playable may grow behind another member's
// import, with fairness on: 1.5 times its time on an idle queue.
const fairRatioBound = 1.5

// TestFairness_UploadBehindAnImport: an administrator imports a sheet of rows (40 here; 500
// with PLAYHEAD_FAIRNESS_IMPORT_ROWS=500, the figure of docs/benchmarks/runs/2026-12-08-fair-queue.md),
// each a tiny clip on a loopback host; once every row is downloaded and queued for encoding, a
// member uploads a video. Its time to playable (media.created_at, the upload's commit with its
// encode job, to media.playable_at, its lowest rendition recorded: what the member waits for)
// is compared with the same upload's on the idle queue of the same node just before. Twice, on
// a fresh node each: with PLAYHEAD_JOBS_FAIR on (the media kinds take turns by member) the
// upload behind the import takes at most 1.5 times its idle time; with it off (first in, first
// out) it waits behind the import's encodes, and its ratio is larger than the fair one. The
// import finishes every row READY in both.
//
// The bound holds against noise because the upload is the larger video (its lowest rung takes
// seconds to encode) while the import's clips take a fraction of that: fair turns cost the
// upload at most about one import job of each encode kind, first in, first out all of them.
func TestFairness_UploadBehindAnImport(t *testing.T) {
	rows := roundsFromEnv(t, "PLAYHEAD_FAIRNESS_IMPORT_ROWS", 40)
	dir := t.TempDir()
	clip, err := os.ReadFile(testvideo.MP4(t, dir, testvideo.Spec{Seconds: 1, Width: 160, Height: 120, Audio: true}))
	if err != nil {
		t.Fatal(err)
	}
	host := binarytest.VideoHost(t, clip)
	upload := testvideo.MP4(t, dir, testvideo.Spec{Seconds: 120, Width: 640, Height: 360, Audio: true})
	var sheet strings.Builder
	sheet.WriteString("collection,chapter,order,video_url\n")
	for i := range rows {
		fmt.Fprintf(&sheet, "fair,%d,1,%s/direct/row-%d.mp4\n", i+1, host.URL, i)
	}

	ratios := map[bool]float64{}
	for _, fair := range []bool{true, false} {
		env := pipelineEnv("all", "fairness", t.TempDir(), t.TempDir(), "medium")
		env["PLAYHEAD_INGEST_ALLOW_PRIVATE"] = "true"
		env["PLAYHEAD_JOBS_FAIR"] = strconv.FormatBool(fair)
		s := binarytest.Start(t, env)
		pool := s.Pool(t)
		admin, member := binarytest.Token(t, 1, true), binarytest.Token(t, 77, false)
		uploadOnce := func(title string) (int64, time.Duration) {
			id := s.Upload(t, member, binarytest.Upload{Path: upload, FileName: "lecture.mp4", Title: title, Visibility: "PRIVATE"})
			waitFair(t, s, rows, fmt.Sprintf("media %d playable", id), func() bool { return mediaOf(t, s, member, id).Playable })
			return id, timeToPlayable(t, pool, id)
		}

		first, idle := uploadOnce("on an idle queue")
		// Idle again before the import: the upload's other renditions done.
		waitMedia(t, s, member, first, media.StatusReady)
		started := time.Now()
		created := s.Import(t, admin, "fair.csv", sheet.String())
		if created.Accepted != rows {
			t.Fatalf("the import accepted %d rows of %d", created.Accepted, rows)
		}
		// Queued: every row downloaded, its encode waiting behind the others'.
		waitFair(t, s, rows, "every imported row downloaded", func() bool {
			return countRows(t, pool, `SELECT count(*) FROM jobs WHERE kind = 'ingest' AND status NOT IN ('COMPLETED', 'DEAD')`) == 0
		})
		backlog := countRows(t, pool, `SELECT count(*) FROM jobs WHERE kind LIKE 'encode%' AND status IN ('PENDING', 'WAITING')`)
		_, behind := uploadOnce("behind the import")
		ratio := behind.Seconds() / idle.Seconds()
		ratios[fair] = ratio

		var done int
		waitFair(t, s, rows, "the import finished", func() bool {
			unfinished, ready := importRows(t, s, admin, created.ID)
			done = ready
			return unfinished == 0
		})
		t.Logf("PLAYHEAD_JOBS_FAIR=%v: the upload playable after %v on the idle queue, %v behind an import of %d rows "+
			"(%d encode jobs queued at the upload): %.2fx; the import finished %d rows READY in %v",
			fair, idle.Round(time.Millisecond), behind.Round(time.Millisecond), rows, backlog, ratio, done,
			time.Since(started).Round(time.Second))
		if done != rows {
			t.Errorf("PLAYHEAD_JOBS_FAIR=%v: %d of %d imported rows READY", fair, done, rows)
		}
		s.Stop(t)
	}
	if ratios[true] > fairRatioBound {
		t.Errorf("with fairness the upload took %.2fx its idle time behind the import, want at most %.1fx", ratios[true], fairRatioBound)
	}
	if ratios[false] <= ratios[true] {
		t.Errorf("first in, first out the upload took %.2fx its idle time, fair %.2fx: the import did not hold it up, so fairness was not tested",
			ratios[false], ratios[true])
	}
}

// timeToPlayable is media id's time from its upload's commit (created_at, with its encode job)
// to its first rendition that can play (playable_at), by the database's clock.
func timeToPlayable(t *testing.T, pool *pgxpool.Pool, id int64) time.Duration {
	t.Helper()
	var d time.Duration
	if err := pool.QueryRow(t.Context(), `SELECT playable_at - created_at FROM media WHERE id = $1`, id).Scan(&d); err != nil {
		t.Fatal(err)
	}
	return d
}

// waitFair waits until cond holds, failing when s exits or after the safety net of the
// fairness test: 5 s per imported row beyond encodeTimeout, since first in, first out an
// upload waits for the whole import.
func waitFair(t *testing.T, s *binarytest.Server, rows int, what string, cond func() bool) {
	t.Helper()
	giveUp := time.Now().Add(encodeTimeout + time.Duration(rows)*5*time.Second)
	for !cond() {
		checkAlive(t, what, s)
		if time.Now().After(giveUp) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(pollEvery)
	}
}

// importRows reads import id's rows and returns how many are unfinished (PENDING, INGESTING
// or UPLOADED) and how many READY.
func importRows(t *testing.T, s *binarytest.Server, admin string, id int64) (unfinished, ready int) {
	t.Helper()
	out := s.MustDo(t, http.StatusOK, http.MethodGet, s.URL("/v1/admin/imports/%d", id), admin, nil)
	var v binarytest.Import
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatal(err)
	}
	for _, r := range v.Rows {
		switch r.State {
		case "PENDING", "INGESTING", "UPLOADED":
			unfinished++
		case "READY":
			ready++
		}
	}
	return unfinished, ready
}
