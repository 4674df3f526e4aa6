package main

// Shutdown tests: serve runs in this process (so goleak can see every goroutine it started)
// and is stopped by each way out — a signal, a server that fails, a service that fails to
// start after the playback buffer started. Each time the one shutdown path must flush the
// buffer, give the running job's claim back and leave no goroutine behind. These tests are not
// parallel: goleak compares against the goroutines that existed when the test began.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/ingest"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/playback"
)

// shutdownBed is one in-process node with a job claimed and positions waiting in its buffer.
type shutdownBed struct {
	cfg   Config
	pool  *pgxpool.Pool // the test's own
	node  *node
	media int64 // the READY media positions are reported for
	jobID int64 // the ingest job the node has claimed, stalled mid-download
}

// reporters is how many members report one position each.
const reporters = 20

// newShutdownBed builds a node (role all) on a fresh database, with a flush interval of an
// hour so that only the stop's final flush can write the positions, and an import whose
// download stalls after its first bytes, so its ingest job stays claimed until the stop.
func newShutdownBed(t *testing.T) *shutdownBed {
	t.Helper()
	ctx := context.Background()
	pool, dbURL := pgtest.Pool(t)
	stalled := stallingDownload(t)
	for name, value := range map[string]string{
		"DATABASE_URL":                  dbURL,
		"PLAYHEAD_JWT_SECRET":           strings.Repeat("s", 32),
		"PLAYHEAD_HTTP_ADDR":            "127.0.0.1:0",
		"PLAYHEAD_METRICS_ADDR":         "127.0.0.1:0",
		"PLAYHEAD_STORAGE_DIR":          t.TempDir(),
		"PLAYHEAD_FLUSH_INTERVAL":       "1h",
		"PLAYHEAD_JOB_POLL_INTERVAL":    "20ms",
		"PLAYHEAD_INGEST_ALLOW_PRIVATE": "true",
		"PLAYHEAD_SHUTDOWN_TIMEOUT":     "30s",
		"PLAYHEAD_PUT_RATE":             "0",
	} {
		t.Setenv(name, value)
	}
	cfg, err := loadConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := media.NewStore(pool).Create(ctx, media.Media{OwnerID: 1, Title: "film", Status: media.StatusReady, Visibility: media.VisibilityPublic, DurationMS: 3_600_000})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ingest.NewStore(pool, 3).Create(ctx, 1, "sheet.csv", ingest.Sheet{Rows: []ingest.Row{
		{Number: 2, Collection: "c", Chapter: 1, Order: 1, VideoURL: stalled + "/video.mp4"},
	}}); err != nil {
		t.Fatal(err)
	}
	bed := &shutdownBed{cfg: cfg, pool: pool, media: m.ID}
	if err := pool.QueryRow(ctx, `SELECT id FROM jobs WHERE kind = 'ingest'`).Scan(&bed.jobID); err != nil {
		t.Fatal(err)
	}
	bed.node, err = build(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return bed
}

// stallingDownload serves the first bytes of a video and then nothing, until the client goes
// away; it returns its base URL.
func stallingDownload(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "video/mp4")
		w.Header().Set("Content-Length", "1000000")
		_, _ = w.Write(make([]byte, 1000))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return "http://" + ln.Addr().String()
}

// waitClaimed waits until the node holds the ingest job.
func (b *shutdownBed) waitClaimed(t *testing.T) {
	t.Helper()
	if err := b.claimed(); err != nil {
		t.Fatal(err)
	}
}

// claimed waits until the node holds the ingest job, or fails after a minute. It does not
// touch t: a service's Start calls it from the node's goroutine.
func (b *shutdownBed) claimed() error {
	giveUp := time.Now().Add(time.Minute)
	for {
		var status string
		if err := b.pool.QueryRow(context.Background(), `SELECT status FROM jobs WHERE id = $1`, b.jobID).Scan(&status); err != nil {
			return err
		}
		if status == "PROCESSING" {
			return nil
		}
		if time.Now().After(giveUp) {
			return errors.New("the ingest job was not claimed within a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// reportPositions PUTs one position per member over the public port; each must be 204 and
// none may be in the database yet (the buffer holds them).
func (b *shutdownBed) reportPositions(t *testing.T) {
	t.Helper()
	base := "http://" + b.node.httpLn.Addr().String()
	waitUntil(t, "the public server", func() bool {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	for member := int64(1); member <= reporters; member++ {
		token, err := auth.Mint([]byte(b.cfg.JWTSecret), 100+member, false, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPut, fmt.Sprintf("%s/v1/playback/%d", base, b.media), strings.NewReader(fmt.Sprintf(`{"position_ms": %d}`, member*1000)))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("PUT position of member %d: %d", 100+member, resp.StatusCode)
		}
	}
	http.DefaultClient.CloseIdleConnections()
	if n := b.count(t, `SELECT count(*) FROM playback`); n != 0 {
		t.Fatalf("%d positions stored before the stop; the test needs them held in the buffer", n)
	}
}

// checkStopped checks what every way out must leave: every position stored, the claim given
// back with its attempt, both ports free again.
func (b *shutdownBed) checkStopped(t *testing.T) {
	t.Helper()
	if n := b.count(t, `SELECT count(*) FROM playback WHERE media_id = $1 AND position_ms = (member_id - 100) * 1000`, b.media); n != reporters {
		t.Errorf("%d of %d positions stored after the stop: the buffer was not flushed", n, reporters)
	}
	if n := b.count(t, `SELECT count(*) FROM jobs WHERE id = $1 AND status = 'PENDING' AND attempt_count = 0 AND claim_token IS NULL`, b.jobID); n != 1 {
		t.Error("the running ingest job was not released (PENDING, attempt given back)")
	}
	for _, ln := range []net.Listener{b.node.httpLn, b.node.metricsLn} {
		again, err := net.Listen("tcp", ln.Addr().String())
		if err != nil {
			t.Errorf("port %s still held after the stop: %v", ln.Addr(), err)
			continue
		}
		again.Close()
	}
}

func (b *shutdownBed) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// run runs the node until it returns.
func (b *shutdownBed) run(ctx context.Context) <-chan error {
	done := make(chan error, 1)
	go func() { done <- b.node.run(ctx) }()
	return done
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	giveUp := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(giveUp) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func waitResult(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(2 * time.Minute):
		t.Fatal("the node did not stop")
		return nil
	}
}

// verifyNoLeaks checks, after everything else the test set up has been cleaned up, that no
// goroutine started during the test is left, but those that outlive a server by design
// (pgtest.LongLived).
func verifyNoLeaks(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, append(pgtest.LongLived(), before)...) })
}

func TestShutdown_Signal(t *testing.T) {
	verifyNoLeaks(t)
	bed := newShutdownBed(t)
	ctx, signal := context.WithCancel(context.Background())
	done := bed.run(ctx)
	bed.waitClaimed(t)
	bed.reportPositions(t)
	signal() // what SIGTERM does in main
	if err := waitResult(t, done); err != nil {
		t.Fatalf("serve after a signal = %v, want nil", err)
	}
	bed.checkStopped(t)
}

// A server that stops serving (here its listener is closed under it) stops the whole node
// the same way, flushing and releasing, rather than serve returning at once without either.
func TestShutdown_ServerError(t *testing.T) {
	verifyNoLeaks(t)
	bed := newShutdownBed(t)
	done := bed.run(context.Background())
	bed.waitClaimed(t)
	bed.reportPositions(t)
	bed.node.metricsLn.Close()
	err := waitResult(t, done)
	if err == nil || !strings.Contains(err.Error(), "metrics server") {
		t.Fatalf("serve after the metrics server failed = %v, want that error", err)
	}
	bed.checkStopped(t)
}

// failingService fails its Start, after accepting positions into the buffer (as a spill
// replay would) once the node has claimed the job.
type failingService struct {
	bed *shutdownBed
}

var errStartFailed = errors.New("this service cannot start")

func (f failingService) Start(context.Context) error {
	if err := f.bed.claimed(); err != nil {
		return err
	}
	now := time.Now().Truncate(time.Microsecond)
	for member := int64(1); member <= reporters; member++ {
		ok, err := f.bed.node.playbackBuffer.Offer(playback.Key{Member: 100 + member, Media: f.bed.media},
			playback.Position{PositionMS: int32(member * 1000), EventTime: now})
		if err != nil || !ok {
			return fmt.Errorf("offer: %v %v", ok, err)
		}
	}
	return errStartFailed
}

func (failingService) Stop(context.Context) error { return nil }

// A service that fails to start after the buffer (and the runners) started: the services
// already started are stopped through the same path.
func TestShutdown_StartFailure(t *testing.T) {
	verifyNoLeaks(t)
	bed := newShutdownBed(t)
	var spliced []service
	for _, s := range bed.node.services {
		spliced = append(spliced, s)
		if s.name == "playback buffer" {
			spliced = append(spliced, service{"failing service", failingService{bed}})
		}
	}
	if len(spliced) != len(bed.node.services)+1 {
		t.Fatal("no playback buffer among the node's services")
	}
	bed.node.services = spliced
	err := waitResult(t, bed.run(context.Background()))
	if !errors.Is(err, errStartFailed) {
		t.Fatalf("serve with a service failing to start = %v, want its error", err)
	}
	bed.checkStopped(t)
}
