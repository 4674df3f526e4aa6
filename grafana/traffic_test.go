package grafana_test

// Playhead under the check's little load: the binary run by internal/binarytest, a scripted
// burst that makes every series a panel needs, and binarytest's playback load as a trickle.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/internal/binarytest"
)

const (
	// Members stay within the per-member limit on position reports (PLAYHEAD_PUT_RATE=1 per
	// second, burst putBurst): loadReports in the burst, then one report per trickle round,
	// rounds at least trickleEvery apart.
	loadMembers  = 60
	loadMedia    = 3
	loadReports  = 5
	trickleEvery = time.Second
	putBurst     = 10 // PLAYHEAD_PUT_BURST
)

// startPlayhead runs `playhead serve` for the check: a worker that encodes with preset, a
// quick flush and poll, the per-member limit on, imports from loopback allowed, and an
// identity provider's key in a JWKS file beside the secret, so the key set's metrics exist as
// metrics.md lists them.
func startPlayhead(t *testing.T, preset string) *binarytest.Server {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwks, err := auth.PublicJWKS(key, "grafana-check")
	if err != nil {
		t.Fatal(err)
	}
	jwksFile := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(jwksFile, jwks, 0o600); err != nil {
		t.Fatal(err)
	}
	return binarytest.Start(t, map[string]string{
		"PLAYHEAD_OIDC_ISSUER":          "https://id.example.test/",
		"PLAYHEAD_OIDC_AUDIENCE":        "playhead",
		"PLAYHEAD_JWKS_FILE":            jwksFile,
		"TMPDIR":                        t.TempDir(),
		"PLAYHEAD_NODE_ID":              "grafana-check",
		"PLAYHEAD_STORAGE_DIR":          t.TempDir(),
		"PLAYHEAD_ENCODE_PRESET":        preset,
		"PLAYHEAD_FLUSH_INTERVAL":       "250ms",
		"PLAYHEAD_JOB_POLL_INTERVAL":    "200ms",
		"PLAYHEAD_SHUTDOWN_TIMEOUT":     "10s",
		"PLAYHEAD_PUT_RATE":             "1",
		"PLAYHEAD_PUT_BURST":            strconv.Itoa(putBurst),
		"PLAYHEAD_INGEST_ALLOW_PRIVATE": "true", // the import's video host is on loopback
		// The GC pause panel needs GC cycles while Prometheus watches; with a small GOGC the
		// little load of the check makes several.
		"GOGC": "20",
	})
}

// traffic is what the check sends to playhead: the burst of startTraffic, further uploads,
// and the trickle that keeps rates above zero until stop.
type traffic struct {
	s        *binarytest.Server
	uploader string // a member's token
	video    string // the test video's path
	trickle  *binarytest.Load
	mu       sync.Mutex
	errs     []string // unexpected answers of the burst (the first 20)
}

// startTraffic makes the series every panel needs: an upload that encodes, one that is not a
// video (DEAD at once), an import of two rows (a video that downloads and encodes, a link that
// answers 404), a burst of playback from every member, client errors and a member over its
// rate limit. Then it starts the trickle.
func startTraffic(t *testing.T, s *binarytest.Server, video, videoHost string) *traffic {
	t.Helper()
	tr := &traffic{s: s, uploader: binarytest.Token(t, 50, false), video: video}
	admin := binarytest.Token(t, 1, true)
	players := binarytest.NewPlayers(t, s, loadMembers, 100, loadMedia)
	var media []int64
	for _, p := range players[:loadMedia] {
		media = append(media, p.Media)
	}

	tr.upload(t)
	notes := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(notes, []byte(strings.Repeat("meeting notes, not a video\n", 40)), 0o644); err != nil {
		t.Fatal(err)
	}
	s.Upload(t, tr.uploader, binarytest.Upload{Path: notes})
	s.Import(t, admin, "sheet.csv", "collection,chapter,order,video_url\n"+
		"grafana check,1,1,"+videoHost+"/direct/clip.mp4\n"+
		"grafana check,1,2,"+videoHost+"/direct/gone.mp4\n")

	// A burst of playback from every member: open, report positions, read back, list.
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, p := range players {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			url := func(k int) string { return s.URL("/v1/playback/%d", media[(i+k)%len(media)]) }
			tr.expect(http.StatusOK, http.MethodPost, url(0), p.Token, nil)
			for k := range loadReports {
				tr.expect(http.StatusNoContent, http.MethodPut, url(k), p.Token, map[string]any{"position_ms": (k + 1) * 1000})
			}
			tr.expect(http.StatusOK, http.MethodGet, url(0), p.Token, nil)
			tr.expect(http.StatusOK, http.MethodGet, s.URL("/v1/playback?limit=10"), p.Token, nil)
		})
	}
	wg.Wait()
	// Client errors, so the error panels have their series: unknown media, a position beyond
	// the media's end, no token, an unknown path, and a member reporting faster than its
	// limit allows (429).
	tok := binarytest.Token(t, 99, false)
	url := s.URL("/v1/playback/%d", media[0])
	tr.expect(http.StatusNotFound, http.MethodPut, s.URL("/v1/playback/999999999"), tok, map[string]any{"position_ms": 1000})
	tr.expect(http.StatusUnprocessableEntity, http.MethodPut, url, tok, map[string]any{"position_ms": binarytest.MediaDurationMS + 1})
	tr.expect(http.StatusUnauthorized, http.MethodGet, s.URL("/v1/playback"), "", nil)
	tr.expect(http.StatusNotFound, http.MethodGet, s.URL("/no/such/path"), "", nil)
	limited := 0
	for k := range 2 * putBurst {
		status, _, err := s.Do(http.MethodPut, url, tok, map[string]any{"position_ms": (k + 1) * 1000})
		if err == nil && status == http.StatusTooManyRequests {
			limited++
		}
	}
	if limited == 0 {
		tr.record("%d PUTs in a row from one member were never answered 429 (PLAYHEAD_PUT_BURST=%d)", 2*putBurst, putBurst)
	}
	if errs := tr.errors(); len(errs) > 0 {
		t.Fatalf("the setup load got unexpected answers:\n  %s", strings.Join(errs, "\n  "))
	}

	// The trickle: one worker reports each member's next position in turn, reading one back
	// every tenth report.
	tr.trickle = binarytest.StartLoad(t, s, players, binarytest.LoadConfig{Workers: 1, Pace: trickleEvery, ReadEvery: 10})
	return tr
}

// upload uploads the test video: one more encode job.
func (tr *traffic) upload(t *testing.T) {
	t.Helper()
	tr.s.Upload(t, tr.uploader, binarytest.Upload{Path: tr.video, FileName: "clip.mp4"})
}

// expect sends a request with a JSON body and records an answer other than want.
func (tr *traffic) expect(want int, method, url, token string, body any) {
	status, out, err := tr.s.Do(method, url, token, body)
	if err != nil || status != want {
		tr.record("%s %s: status %d (%v), want %d; body %s", method, url, status, err, want, out)
	}
}

// record notes something the burst did not expect (the first 20).
func (tr *traffic) record(format string, args ...any) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.errs) < 20 {
		tr.errs = append(tr.errs, fmt.Sprintf(format, args...))
	}
}

func (tr *traffic) errors() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.errs)
}

// stop ends the trickle and reports what it got wrong.
func (tr *traffic) stop(t *testing.T) {
	t.Helper()
	tr.trickle.Stop()
	if c := tr.trickle.Counts(); !c.AllOK() {
		t.Errorf("the trickle load got unexpected answers: %s; want every report answered 204 and every read 200", c)
	}
}
