package main

// The player page end to end: the real binary (built once by TestMain, with the pages and
// hls.js embedded), real PostgreSQL and ffmpeg, and a real browser — Debian's Chromium driven
// by playwright-core from web/e2e/player.mjs, which uploads, watches, leaves and resumes
// through the pages while this test reads the database. Timeouts only bound how long the test
// waits; the tolerances checked are those the player promises, on media and position time.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/s3test"
	"github.com/playhead/playhead/internal/testvideo"
	"github.com/playhead/playhead/web"
)

// chromiumPath is Debian's chromium package: the only browser the test uses (never one that
// playwright downloads).
const chromiumPath = "/usr/bin/chromium"

// screenshotsEnv names the folder the test saves the player's screenshots in; a temporary
// one when it is not set.
const screenshotsEnv = "PLAYHEAD_TEST_SCREENSHOTS"

// playerTimeout bounds the whole browser script.
const playerTimeout = 10 * time.Minute

// playerEvent is one line the browser script prints.
type playerEvent struct {
	Event   string `json:"event"`
	Message string `json:"message"`
	MediaID int64  `json:"media_id"`
	// checkpoint, closed
	CurrentTimeMS int64  `json:"current_time_ms"`
	PlayedMS      int64  `json:"played_ms"`
	Engine        string `json:"engine"`
	LastPutMS     *int64 `json:"last_put_ms"`
	StoredMS      int64  `json:"stored_ms"`
	UploadBar     int    `json:"upload_bar"`
	// uploaded, polled: how the page learned the upload's final status ("events" or "poll"),
	// its GET /v1/media/{id} meanwhile, and its GET /v1/events.
	Via                   string `json:"via"`
	StatusGets            int    `json:"status_gets"`
	EventStreams          int    `json:"event_streams"`
	EventStreamsWithToken int    `json:"event_streams_with_token"`
	Status                string `json:"status"`
	// resumed
	ResumePointMS int64 `json:"resume_point_ms"`
	ResumedAtMS   int64 `json:"resumed_at_ms"`
	// home
	Items    int     `json:"items"`
	Title    string  `json:"title"`
	Progress float64 `json:"progress"`
	Facts    string  `json:"facts"`
	// MediaGets counts the home page's GET /v1/media/{id}; PlaybackGets its GET /v1/playback.
	MediaGets    int `json:"mediaGets"`
	PlaybackGets int `json:"playbackGets"`
	// done
	Browser        string `json:"browser"`
	TokenLeftInURL bool   `json:"tokenLeftInURL"`
	Upload         struct {
		Seconds float64 `json:"seconds"`
	} `json:"upload"`
	Second struct {
		Engine   string `json:"engine"`
		PlayedMS int64  `json:"playedMS"`
	} `json:"second"`
	SecondClose closeResult `json:"secondClose"`
	Problems    []string    `json:"problems"`
	Media       struct {
		PlaylistOrigins  []string `json:"playlistOrigins"`
		SegmentOrigins   []string `json:"segmentOrigins"`
		ThumbnailOrigins []string `json:"thumbnailOrigins"`
		Failed           []string `json:"failed"`
	} `json:"media"`
	Cookies []string `json:"cookies"`
}

type closeResult struct {
	CurrentTimeMS      int64  `json:"currentTimeMS"`
	LastPutMS          *int64 `json:"lastPutMS"`
	ReportsBeforeClose int    `json:"reportsBeforeClose"`
	StoredMS           int64  `json:"storedMS"`
}

// requireBrowser returns node's path, failing (never skipping) with the command that installs
// whatever the browser test is missing.
func requireBrowser(t *testing.T, root string) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("the player test needs Node.js: run `make deps` as root, or `apt-get install -y nodejs npm`")
	}
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("the player test drives Debian's Chromium at %s, which is missing: run `make deps` as root, or `apt-get install -y chromium`", chromiumPath)
	}
	if _, err := os.Stat(filepath.Join(root, "node_modules", "playwright-core", "package.json")); err != nil {
		t.Fatalf("the player test needs playwright-core from package-lock.json: run `make web` (or `npm ci` in %s)", root)
	}
	if _, err := os.Stat(filepath.Join(root, "web", "static", filepath.FromSlash(web.HLSAsset))); err != nil {
		t.Fatalf("hls.js is not in web/static/vendor, so the binary under test does not embed it: run `make web` before `go test`")
	}
	return node
}

// dbPosition reads the stored position of (member, media); -1 when there is no row.
func dbPosition(t *testing.T, pool *pgxpool.Pool, member, mediaID int64) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var pos int64
	err := pool.QueryRow(ctx, `SELECT position_ms FROM playback WHERE member_id = $1 AND media_id = $2`, member, mediaID).Scan(&pos)
	if errors.Is(err, pgx.ErrNoRows) {
		return -1
	}
	if err != nil {
		t.Fatalf("read the position of member %d, media %d: %v", member, mediaID, err)
	}
	return pos
}

func absMS(d int64) int64 {
	if d < 0 {
		return -d
	}
	return d
}

// TestPlayer_UploadWatchLeaveResumeInChromium: upload through the page to READY and play; after
// ≥ 10 s of playback the database is within 6 s of currentTime; closed and reopened, the player
// resumes within 1 s of the stored position and the home page lists the item with its progress;
// the last position, sent on pagehide, is in the database after a graceful stop; the
// screenshots are PNGs (in docs/img with `make screenshots`).
//
// It runs on both storages: local, where the page fetches every file from Playhead, and S3
// (SeaweedFS), where the page fetches the playlists from Playhead and the segments and
// thumbnails straight from the bucket, by presigned URL. On neither does the page set a cookie.
func TestPlayer_UploadWatchLeaveResumeInChromium(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	node := requireBrowser(t, root)
	for _, storage := range []string{storageLocal, storageS3} {
		t.Run(storage, func(t *testing.T) { testPlayer(t, root, node, storage) })
	}
}

func testPlayer(t *testing.T, root, node, storage string) {
	env := pipelineEnv("all", "e2e-player", t.TempDir(), t.TempDir(), "ultrafast")
	env["PLAYHEAD_FLUSH_INTERVAL"] = "250ms"
	// The 30 s test pattern stands in for a lesson: below the default shortest resumable
	// duration (2 min) it would keep no resume point, which is what this test reopens at.
	env["PLAYHEAD_RESUME_MIN_DURATION"] = "0s"
	mediaOrigin := "" // where the segments and thumbnails come from: Playhead itself unless S3
	if storage == storageS3 {
		srv := s3test.Shared(t)
		maps.Copy(env, srv.Env(s3test.Bucket(t)))
		mediaOrigin = srv.Endpoint
	}
	s := binarytest.Start(t, env)
	if mediaOrigin == "" {
		mediaOrigin = s.HTTPURL
	}
	if status, _ := fetch(t, s, "", s.HTTPURL+"/static/"+web.HLSAsset); status != http.StatusOK {
		t.Fatalf("GET /static/%s: status %d: the binary was built without hls.js; run `make web` first", web.HLSAsset, status)
	}
	pool := s.Pool(t)
	const member = 77
	token := binarytest.Token(t, member, false)
	video := testvideo.MP4(t, t.TempDir(), testvideo.Spec{Seconds: 30, Width: 320, Height: 240, Audio: true})
	shots := screenshotsDir(t)
	script := startBrowserScript(t, root, node, "player.mjs",
		"PLAYHEAD_URL="+s.HTTPURL, "PLAYHEAD_TOKEN="+token, "PLAYHEAD_VIDEO="+video,
		"PLAYHEAD_TITLE=Test pattern, 30 s", "PLAYHEAD_SHOTS="+shots)

	var (
		events     = map[string]playerEvent{}
		checkpoint int64 // the database's position when the script said it had played 10 s
		atClose    int64 // the database's position once the first close's report was flushed
	)
	for {
		var ev playerEvent
		if !script.next(t, &ev) {
			break
		}
		events[ev.Event] = ev
		switch ev.Event {
		case "checkpoint":
			// Read at once: the video plays on while the test looks.
			checkpoint = dbPosition(t, pool, member, ev.MediaID)
		case "closed":
			// The write-behind buffer flushes every 250 ms: wait for the report the server
			// answered to be in the table.
			deadline := time.Now().Add(10 * time.Second)
			for {
				atClose = dbPosition(t, pool, member, ev.MediaID)
				if atClose == ev.StoredMS || time.Now().After(deadline) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	elapsed, waitErr := script.wait()
	if ev, ok := events["error"]; ok || waitErr != nil {
		t.Fatalf("player.mjs failed (%v): %s", waitErr, ev.Message)
	}
	done, ok := events["done"]
	if !ok {
		t.Fatalf("player.mjs exited without its done event")
	}
	t.Logf("browser script: %s in %s (upload → READY %.1fs on the page)", done.Browser, elapsed.Round(100*time.Millisecond), done.Upload.Seconds)

	// 1. Uploaded through the page to READY, and it plays, through hls.js.
	up := events["uploaded"]
	if up.UploadBar != 100 {
		t.Errorf("the upload progress bar ended at %d%%, want 100%%", up.UploadBar)
	}
	// The status arrives over the event stream, with no polling request during the wait; polling
	// is only the fallback.
	if up.Via != "events" || up.StatusGets != 0 || up.EventStreams != 1 || up.EventStreamsWithToken != 1 {
		t.Errorf("the upload page learned READY via %q with %d status requests and %d event streams (%d with the token), "+
			"want via the event stream, no status request, one stream with the token", up.Via, up.StatusGets, up.EventStreams, up.EventStreamsWithToken)
	}
	if polled := events["polled"]; polled.Status != "READY" || polled.Via != "poll" || polled.StatusGets == 0 {
		t.Errorf("with the event stream failing, the upload ended %q via %q after %d status requests, want READY by polling",
			polled.Status, polled.Via, polled.StatusGets)
	}
	if done.TokenLeftInURL {
		t.Errorf("the token passed as #token=… stayed in the address bar")
	}
	cp := events["checkpoint"]
	if cp.Engine != "hls.js" || done.Second.Engine != "hls.js" {
		t.Errorf("played with %q then %q, want hls.js (Chromium has Media Source Extensions)", cp.Engine, done.Second.Engine)
	}
	if cp.PlayedMS < 10_000 {
		t.Errorf("checkpoint after %d ms of playback, want at least 10 s (it also shows currentTime advanced ≥ 3 s)", cp.PlayedMS)
	}
	// 2. After ≥ 10 s of playback the database is within 6 s of currentTime.
	if d := absMS(checkpoint - cp.CurrentTimeMS); checkpoint < 0 || d > 6000 {
		t.Errorf("after %d ms of playback currentTime was %d ms and the database held %d ms (%d ms apart), want within 6000",
			cp.PlayedMS, cp.CurrentTimeMS, checkpoint, d)
	} else {
		t.Logf("checkpoint: currentTime %d ms, database %d ms", cp.CurrentTimeMS, checkpoint)
	}

	// 3. Closed: the pagehide report is the stored position; reopened, it resumes there.
	closed := events["closed"]
	if closed.LastPutMS == nil || closed.StoredMS < *closed.LastPutMS+1000 || absMS(closed.StoredMS-closed.CurrentTimeMS) > 1000 {
		t.Errorf("first close: currentTime %d ms, last periodic report %v ms, stored %d ms; want the stored position from pagehide (within 1 s of currentTime, ≥ 1 s past the last report)",
			closed.CurrentTimeMS, ptr(closed.LastPutMS), closed.StoredMS)
	}
	// The events can reach this test late on a busy machine (the second visit may already have
	// reported more), and pagehide and visibilitychange each send a report a few ms apart: the
	// database must hold at least what the page saw stored, and the resume point be within
	// 1 s of it.
	if atClose < closed.StoredMS {
		t.Errorf("after the first close the database holds %d ms, less than the stored %d ms", atClose, closed.StoredMS)
	}
	res := events["resumed"]
	if d := absMS(res.ResumePointMS - closed.StoredMS); d > 1000 {
		t.Errorf("reopened: POST /v1/playback answered the resume point %d ms, %d ms from the stored %d ms; want within 1000", res.ResumePointMS, d, closed.StoredMS)
	}
	if d := absMS(res.ResumedAtMS - closed.StoredMS); d > 1000 {
		t.Errorf("reopened: playback started at %d ms, %d ms from the stored position %d ms; want within 1000", res.ResumedAtMS, d, closed.StoredMS)
	} else {
		t.Logf("resumed at %d ms, stored %d ms", res.ResumedAtMS, closed.StoredMS)
	}
	home := events["home"]
	mv := mediaOf(t, s, token, closed.MediaID)
	wantProgress := float64(closed.StoredMS) / float64(mv.DurationMS)
	if home.Items != 1 || home.Title != "Test pattern, 30 s" || math.Abs(home.Progress-wantProgress) > 0.005 {
		t.Errorf("home page: %d item(s), %q at progress %.4f (%s); want the one item, \"Test pattern, 30 s\", at %d/%d = %.4f",
			home.Items, home.Title, home.Progress, home.Facts, closed.StoredMS, mv.DurationMS, wantProgress)
	}
	if home.MediaGets != 0 || home.PlaybackGets != 1 {
		t.Errorf("home page: %d GET /v1/playback and %d GET /v1/media/{id}; want one list request and none per item (the items carry their thumbnails)",
			home.PlaybackGets, home.MediaGets)
	}
	if done.Second.PlayedMS < 3000 {
		t.Errorf("after reopening it played %d ms, want at least 3 s", done.Second.PlayedMS)
	}
	for _, p := range done.Problems {
		t.Errorf("the pages reported: %s", p)
	}
	// The files came from where the storage puts them, by signed URL, with no cookie.
	m := done.Media
	if !slices.Equal(m.PlaylistOrigins, []string{s.HTTPURL}) || !slices.Equal(m.SegmentOrigins, []string{mediaOrigin}) ||
		!slices.Equal(m.ThumbnailOrigins, []string{mediaOrigin}) || len(m.Failed) > 0 {
		t.Errorf("the browser fetched playlists from %q, segments from %q, thumbnails from %q (failed: %q); want playlists from %s, the rest from %s",
			m.PlaylistOrigins, m.SegmentOrigins, m.ThumbnailOrigins, m.Failed, s.HTTPURL, mediaOrigin)
	}
	if len(done.Cookies) > 0 {
		t.Errorf("the pages set cookies %q, want none: media files are fetched by signed URL", done.Cookies)
	}

	// 4. The second close's pagehide report is in the database after a graceful stop.
	second := done.SecondClose
	s.Signal(t, syscall.SIGTERM)
	if code := s.Wait(t, binarytest.ExitTimeout); code != 0 {
		t.Fatalf("playhead exited %d after SIGTERM, want 0", code)
	}
	final := dbPosition(t, pool, member, closed.MediaID)
	if second.LastPutMS == nil || final < *second.LastPutMS+1000 || absMS(final-second.CurrentTimeMS) > 1000 {
		t.Errorf("after the graceful stop the database holds %d ms; the page had currentTime %d ms at close and its last periodic report was %v ms: "+
			"want the pagehide report (within 1 s of currentTime, ≥ 1 s past the last report)", final, second.CurrentTimeMS, ptr(second.LastPutMS))
	} else {
		t.Logf("after the graceful stop: database %d ms, currentTime at close %d ms, last periodic report %d ms", final, second.CurrentTimeMS, *second.LastPutMS)
	}

	// 5. The screenshots.
	for _, name := range []string{"player-home.png", "player-watch.png"} {
		b, err := os.ReadFile(filepath.Join(shots, name))
		if err != nil || len(b) < 1024 || !strings.HasPrefix(string(b), "\x89PNG") {
			t.Errorf("screenshot %s: %d bytes, %v; want a PNG", filepath.Join(shots, name), len(b), err)
		}
	}
}

func ptr(p *int64) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprint(*p)
}
