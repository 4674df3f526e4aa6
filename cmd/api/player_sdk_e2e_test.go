package main

// The player SDK (sdk/js) as an integrator deploys it: the page on its own origin (a second
// loopback port, served here), Playhead's API on another that lists it in
// PLAYHEAD_CORS_ORIGINS. Chromium, driven by web/e2e/sdk.mjs, plays a Playhead media with
// each player (the native element, hls.js, video.js, Shaka Player), pauses, seeks, closes the
// page while playing and opens it again; sdk-faults.mjs adds the network's faults and
// sdk-stall.mjs a stall, seen in the audience rollup.

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/testvideo"
	"github.com/playhead/playhead/media"
)

type sdkEvent struct {
	Event      string    `json:"event"`
	Message    string    `json:"message"`
	Paused     float64   `json:"paused"`
	Last       float64   `json:"last"`
	Saved      []int64   `json:"saved"`
	Errors     []string  `json:"errors"`
	TokenCalls int       `json:"tokenCalls"`
	Failed     []string  `json:"failed"`
	StartedAt  float64   `json:"startedAt"`
	Resume     sdkResume `json:"resume"`
}

type sdkResume struct {
	PositionMS int64 `json:"positionMs"`
	Finished   bool  `json:"finished"`
}

// integratorPage serves the integrator's page (web/e2e/sdk/), the SDK (sdk/js/index.js) and the
// players from node_modules on ln: an origin of its own.
func integratorPage(t *testing.T, root string, ln net.Listener) {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("GET /page.html", http.FileServer(http.Dir(filepath.Join(root, "web", "e2e", "sdk"))))
	mux.Handle("GET /page.mjs", http.FileServer(http.Dir(filepath.Join(root, "web", "e2e", "sdk"))))
	mux.Handle("GET /sdk/", http.StripPrefix("/sdk/", http.FileServer(http.Dir(filepath.Join(root, "sdk", "js")))))
	mux.Handle("GET /node_modules/", http.StripPrefix("/node_modules/", http.FileServer(http.Dir(filepath.Join(root, "node_modules")))))
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
}

// sdkFixture is what each SDK test in Chromium starts with: the integrator's page on an origin of
// its own, a node that lists that origin for CORS, and a 20 s video of member's, READY.
type sdkFixture struct {
	root, node, pageOrigin string
	s                      *binarytest.Server
	token                  string
	id                     int64
}

// startSDKFixture starts it; env adds to the node's settings, visibility is the video's.
func startSDKFixture(t *testing.T, name string, member int64, visibility string, env map[string]string) sdkFixture {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	f := sdkFixture{root: root, node: requireBrowser(t, root)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.pageOrigin = "http://" + ln.Addr().String()
	integratorPage(t, root, ln)
	nodeEnv := pipelineEnv("all", name, t.TempDir(), t.TempDir(), "ultrafast")
	nodeEnv["PLAYHEAD_CORS_ORIGINS"] = f.pageOrigin
	// A 20 s clip keeps a resume point (the default shortest resumable duration is 2 min).
	nodeEnv["PLAYHEAD_RESUME_MIN_DURATION"] = "0s"
	maps.Copy(nodeEnv, env)
	f.s = binarytest.Start(t, nodeEnv)
	f.token = binarytest.Token(t, member, false)
	src := testvideo.MP4(t, t.TempDir(), testvideo.Spec{Seconds: 20, Width: 320, Height: 240, FPS: 25, Audio: true})
	f.id = f.s.Upload(t, f.token, binarytest.Upload{Path: src, Title: name, Visibility: visibility})
	waitMedia(t, f.s, f.token, f.id, media.StatusReady)
	return f
}

func TestPlayerSDK_AcrossOriginsInChromium(t *testing.T) {
	f := startSDKFixture(t, "e2e-sdk", 80, "PUBLIC", nil)
	root, node, pageOrigin, s, id := f.root, f.node, f.pageOrigin, f.s, f.id

	for i, player := range []string{"native", "hls.js", "video.js", "shaka"} {
		t.Run(player, func(t *testing.T) {
			token := binarytest.Token(t, int64(81+i), false) // a member of its own: no stored position yet
			script := startBrowserScript(t, root, node, "sdk.mjs", "PLAYHEAD_PAGE="+pageOrigin, "PLAYHEAD_URL="+s.HTTPURL,
				"PLAYHEAD_TOKEN="+token, "PLAYHEAD_MEDIA="+strconv.FormatInt(id, 10), "PLAYHEAD_PLAYER="+player)
			var stored int64
			events := map[string]sdkEvent{}
			for {
				var ev sdkEvent
				if !script.next(t, &ev) {
					break
				}
				events[ev.Event] = ev
				if ev.Event != "closed" {
					continue
				}
				// The pagehide report is a keepalive PUT with Authorization: preflighted, sent as
				// the page goes. Wait for it to be stored (the node's buffer answers GET at once).
				lastMS := int64(math.Round(ev.Last * 1000))
				for polls := 0; ; polls++ {
					if stored = storedPosition(t, s, token, id); stored >= lastMS-5 {
						break
					}
					// A bound in polls, not a deadline: 3 000 polls are a minute at their pace,
					// hundreds of times what a keepalive report takes to arrive.
					if polls == sdkClosePolls {
						t.Fatalf("%s: the report sent as the page closed never arrived: the stored position is %d ms after %d polls, the element's last was %d ms",
							player, stored, polls, lastMS)
					}
					time.Sleep(20 * time.Millisecond) // a poll's pace, not a bound
				}
				fmt.Fprintln(script.Stdin, "reopen")
			}
			if _, err := script.wait(); err != nil || events["error"].Message != "" {
				t.Fatalf("sdk.mjs with %s failed (%v): %s", player, err, events["error"].Message)
			}
			closed, reopened := events["closed"], events["reopened"]
			if len(closed.Errors) > 0 || len(closed.Failed) > 0 || len(reopened.Errors) > 0 {
				t.Errorf("the SDK's errors %q, failed requests %q, after reopening %q; want none", closed.Errors, closed.Failed, reopened.Errors)
			}
			// The pause and the seek were each saved across origins (their 204 read by the page).
			if !containsNear(closed.Saved, int64(math.Round(closed.Paused*1000)), 1) || !containsNear(closed.Saved, 6000, 1) {
				t.Errorf("saved %v; want the pause's position %.3f s and the seek's 6 s among them", closed.Saved, closed.Paused)
			}
			// The last report is the page's closing one: the stored position is the element's last
			// currentTime, within what it played between the two readings (a frame or two).
			lastMS := int64(math.Round(closed.Last * 1000))
			if stored < lastMS-5 || stored > lastMS+500 {
				t.Errorf("stored position %d ms after closing at currentTime %.3f s; want it within a frame or two of it", stored, closed.Last)
			}
			if reopened.Resume.Finished || reopened.Resume.PositionMS != stored || math.Abs(reopened.StartedAt*1000-float64(stored)) > 100 {
				t.Errorf("reopened with %+v, playing from %.3f s; want the stored %d ms", reopened.Resume, reopened.StartedAt, stored)
			}
		})
	}
}

// sdkClosePolls bounds the polls for the report a closing page sends.
const sdkClosePolls = 3000

// storedPosition is GET /v1/playback/{id}'s position_ms for token's member (0 without one).
func storedPosition(t *testing.T, s *binarytest.Server, token string, id int64) int64 {
	t.Helper()
	status, body, err := s.Do(http.MethodGet, s.URL("/v1/playback/%d", id), token, nil)
	if err != nil || (status != http.StatusOK && status != http.StatusNotFound) {
		t.Fatalf("GET /v1/playback/%d: %d %s %v", id, status, body, err)
	}
	var p struct {
		PositionMS int64 `json:"position_ms"`
	}
	_ = json.Unmarshal(body, &p)
	return p.PositionMS
}

func containsNear(values []int64, want, within int64) bool {
	for _, v := range values {
		if v >= want-within && v <= want+within {
			return true
		}
	}
	return false
}

type sdkRequest struct {
	Method string  `json:"method"`
	Start  float64 `json:"start"`
	End    float64 `json:"end"`
	Status int     `json:"status"`
}

type sdkFaultEvent struct {
	Event         string       `json:"event"`
	Message       string       `json:"message"`
	TokenCalls    int          `json:"tokenCalls"`
	Puts          []sdkRequest `json:"puts"`
	PausedOffline int64        `json:"pausedOffline"`
	Saved         []int64      `json:"saved"`
	Kept          string       `json:"kept"`
	Resume        sdkResume    `json:"resume"`
	ReporterPuts  int          `json:"reporterPuts"`
	OtherPuts     int          `json:"otherPuts"`
	OtherPlaying  bool         `json:"otherPlaying"`
}

// TestPlayerSDK_FaultsInChromium: web/e2e/sdk-faults.mjs intercepts the SDK's requests on the
// integrator's page (another origin, hls.js): a 401 gets a new token and the report once more;
// after a 429 with Retry-After: 3 no report goes for 3 s by the page's clock; a 30 s network
// cut ends with the last position stored; a position kept offline survives a reload; of two
// tabs playing one media, one reports.
func TestPlayerSDK_FaultsInChromium(t *testing.T) {
	f := startSDKFixture(t, "e2e-sdk-faults", 90, "PRIVATE", nil)
	root, node, pageOrigin, s, token, id := f.root, f.node, f.pageOrigin, f.s, f.token, f.id

	script := startBrowserScript(t, root, node, "sdk-faults.mjs", "PLAYHEAD_PAGE="+pageOrigin, "PLAYHEAD_URL="+s.HTTPURL,
		"PLAYHEAD_TOKEN="+token, "PLAYHEAD_MEDIA="+strconv.FormatInt(id, 10))
	events := map[string]sdkFaultEvent{}
	for {
		var ev sdkFaultEvent
		if !script.next(t, &ev) {
			break
		}
		events[ev.Event] = ev
	}
	if _, err := script.wait(); err != nil || events["error"].Message != "" {
		t.Fatalf("sdk-faults.mjs failed (%v): %s", err, events["error"].Message)
	}

	u := events["unauthorized"]
	if n := len(u.Puts); u.TokenCalls != 2 || n < 2 || u.Puts[n-2].Status != 401 || u.Puts[n-1].Status != 204 {
		t.Errorf("after a 401: getToken called %d times, PUTs %+v; want 2 calls and the 401 followed by the same report's 204", u.TokenCalls, u.Puts)
	}
	r := events["rate_limited"].Puts
	for i, p := range r {
		if p.Status != http.StatusTooManyRequests {
			continue
		}
		if i+1 >= len(r) || r[i+1].Start-p.End < 3000 || r[i+1].Status != 204 {
			t.Errorf("after the 429 (answered at %.0f ms), the PUTs %+v; want the next one 3000 ms or more later, accepted", p.End, r[i:])
		} else {
			t.Logf("429 with Retry-After: 3: the next report %.0f ms later (the page's clock)", r[i+1].Start-p.End)
		}
	}
	if off := events["offline"]; len(off.Saved) == 0 || off.Saved[len(off.Saved)-1] != off.PausedOffline {
		t.Errorf("after 30 s offline: saved %v; want the position paused at offline, %d, last", off.Saved, off.PausedOffline)
	}
	if re := events["reloaded"]; !strings.Contains(re.Kept, `"position_ms":9000`) || re.Resume.PositionMS != 9000 {
		t.Errorf("a position kept offline (%s), then a reload: resumed at %+v; want 9000", re.Kept, re.Resume)
	}
	if tt := events["two_tabs"]; tt.ReporterPuts < 2 || tt.OtherPuts != 0 || !tt.OtherPlaying {
		t.Errorf("two tabs playing: %+v; want the last one to play reporting, the other (still playing) not", tt)
	}
	if got := storedPosition(t, s, token, id); got < 10000 {
		t.Errorf("stored position %d ms; want the reporting tab's, past 10 s", got)
	}
}

// sdkRollupPolls bounds the polls for a media's quality in its audience rollup.
const sdkRollupPolls = 3000

// TestPlayerSDK_StallInTheRollupInChromium: web/e2e/sdk-stall.mjs holds the media's encoded
// files from the player for a while mid-film (request interception), so that hls.js, its
// buffer kept short, stalls; the SDK's reports carry the stall, the node adds it up and writes
// it every second, and the audience rollup (every second too) shows rebuffering for that media.
func TestPlayerSDK_StallInTheRollupInChromium(t *testing.T) {
	f := startSDKFixture(t, "e2e-sdk-stall", 95, "PRIVATE",
		map[string]string{"PLAYHEAD_AUDIENCE_INTERVAL": "1s", "PLAYHEAD_QUALITY_INTERVAL": "1s"})
	root, node, pageOrigin, s, token, id := f.root, f.node, f.pageOrigin, f.s, f.token, f.id
	pool := s.Pool(t)

	script := startBrowserScript(t, root, node, "sdk-stall.mjs", "PLAYHEAD_PAGE="+pageOrigin, "PLAYHEAD_URL="+s.HTTPURL,
		"PLAYHEAD_TOKEN="+token, "PLAYHEAD_MEDIA="+strconv.FormatInt(id, 10))
	var stalled struct {
		Event     string   `json:"event"`
		Message   string   `json:"message"`
		StalledAt float64  `json:"stalledAt"`
		Bodies    []string `json:"bodies"`
	}
	for {
		var ev = stalled
		if !script.next(t, &ev) {
			break
		}
		stalled = ev
	}
	if _, err := script.wait(); err != nil || stalled.Event != "stalled" {
		t.Fatalf("sdk-stall.mjs failed (%v): %s", err, stalled.Message)
	}
	t.Logf("stalled at %.1f s; reports with quality: %s", stalled.StalledAt, strings.Join(stalled.Bodies, " "))
	var rebufferMS int64
	for _, b := range stalled.Bodies {
		var r struct {
			Quality struct {
				RebufferMS int64 `json:"rebuffer_ms"`
			} `json:"quality"`
		}
		if err := json.Unmarshal([]byte(b), &r); err == nil {
			rebufferMS += r.Quality.RebufferMS
		}
	}
	// The files were held 3 s after the element began to wait: at least that long stalled.
	if rebufferMS < 3000 {
		t.Errorf("the reports carried %d ms of rebuffering; want the 3 s the files were held, or more", rebufferMS)
	}

	var sessions, rebuffers *int64
	var ratio *float64
	for polls := 0; ; polls++ {
		if err := pool.QueryRow(t.Context(), `SELECT quality_sessions, rebuffers, rebuffer_ratio FROM media_audience WHERE media_id = $1`, id).
			Scan(&sessions, &rebuffers, &ratio); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		if rebuffers != nil && *rebuffers >= 1 {
			break
		}
		// A bound in polls, not a deadline: 3 000 polls at 20 ms are a minute, many rollups.
		if polls == sdkRollupPolls {
			t.Fatalf("after %d polls the rollup of media %d shows no rebuffering (rebuffers %v)", polls, id, rebuffers)
		}
		time.Sleep(20 * time.Millisecond) // a poll's pace, not a bound
	}
	if sessions == nil || *sessions != 1 || ratio == nil || *ratio <= 0 {
		t.Errorf("rollup: sessions %v, rebuffering ratio %v; want the one session and a ratio above 0", sessions, ratio)
	} else {
		t.Logf("rollup: %d rebuffering events, ratio %.3f", *rebuffers, *ratio)
	}
}
