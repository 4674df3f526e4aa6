package main

// End-to-end tests: the real binary (built once by TestMain), real PostgreSQL, real HTTP over
// loopback. Timeouts here only bound how long a test waits before giving up; no test asserts
// how fast anything is.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/pgtest"
)

// testSecret signs the tests' tokens: at least auth.MinSecretBytes long.
const testSecret = "e2e-secret-e2e-secret-e2e-secret-0123"

// Give-up bounds: how long a test waits for something before failing. None is an assertion
// about speed.
const (
	readyTimeout = 30 * time.Second // the binary answers /readyz 200
	exitTimeout  = 60 * time.Second // the binary exits after SIGTERM, or a bad-config run ends
)

// process is one run of the binary.
type process struct {
	cmd            *exec.Cmd
	stdout, stderr *binarytest.Output
	done           chan struct{} // closed when the process has exited and Wait returned
	waitErr        error         // Wait's result, read after done is closed
}

// startProcess runs the binary with args and exactly the environment env (plus PATH and HOME),
// in a temporary working directory. The process is killed in t.Cleanup if still running, and
// its output is logged if the test failed.
func startProcess(t *testing.T, env map[string]string, args ...string) *process {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = t.TempDir()
	// Only the variables the test chooses: a PLAYHEAD_* or DATABASE_URL in the developer's
	// shell must not change what the binary does here.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	p := &process{cmd: cmd, stdout: &binarytest.Output{}, stderr: &binarytest.Output{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s %s: %v", binary, strings.Join(args, " "), err)
	}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	// Cleanups run last-registered first: kill and reap, then log the complete output.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("playhead %s stdout:\n%s", strings.Join(args, " "), p.stdout)
			t.Logf("playhead %s stderr:\n%s", strings.Join(args, " "), p.stderr)
		}
	})
	t.Cleanup(func() {
		select {
		case <-p.done:
			return
		default:
		}
		_ = cmd.Process.Kill()
		select {
		case <-p.done:
		case <-time.After(exitTimeout):
			t.Errorf("playhead pid %d did not exit after SIGKILL", cmd.Process.Pid)
		}
	})
	return p
}

// wait waits up to timeout for the process to exit and returns its exit code; it fails the
// test if the process is still running then.
func (p *process) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("playhead pid %d still running %s after it should have exited", p.cmd.Process.Pid, timeout)
	}
	if exitErr, ok := errors.AsType[*exec.ExitError](p.waitErr); ok {
		return exitErr.ExitCode() // -1 when killed by a signal
	}
	if p.waitErr != nil {
		t.Fatalf("waiting for playhead: %v", p.waitErr)
	}
	return 0
}

// server is a running `playhead serve`.
type server struct {
	*process
	dbURL      string
	httpURL    string // the public API, http://127.0.0.1:port
	metricsURL string // the metrics listener, http://127.0.0.1:port
	client     *http.Client
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startServer runs `playhead serve` on a fresh migrated database with loopback listeners and
// waits until /readyz on the metrics address answers 200. overrides are added to (or replace)
// the environment; a DATABASE_URL among them (another server's dbURL) makes this process share
// that database instead of getting a fresh one.
func startServer(t *testing.T, overrides map[string]string) *server {
	t.Helper()
	s := &server{dbURL: overrides["DATABASE_URL"]}
	if s.dbURL == "" {
		s.dbURL = pgtest.URL(t)
	}
	httpAddr, metricsAddr := freeAddr(t), freeAddr(t)
	env := map[string]string{
		"DATABASE_URL":              s.dbURL,
		"PLAYHEAD_JWT_SECRET":       testSecret,
		"PLAYHEAD_HTTP_ADDR":        httpAddr,
		"PLAYHEAD_METRICS_ADDR":     metricsAddr,
		"PLAYHEAD_SHUTDOWN_TIMEOUT": "30s",
	}
	for k, v := range overrides {
		env[k] = v
	}
	s.httpURL, s.metricsURL = "http://"+httpAddr, "http://"+metricsAddr
	transport := &http.Transport{MaxIdleConnsPerHost: 16}
	s.client = &http.Client{Transport: transport, Timeout: 10 * time.Second}
	t.Cleanup(transport.CloseIdleConnections)
	s.process = startProcess(t, env, "serve")

	deadline := time.Now().Add(readyTimeout)
	var last string
	for {
		select {
		case <-s.done:
			t.Fatalf("playhead serve exited before it was ready (%v); stderr:\n%s", s.waitErr, s.stderr)
		default:
		}
		status, body, err := s.do(http.MethodGet, s.metricsURL+"/readyz", "", nil)
		if err == nil && status == http.StatusOK {
			return s
		}
		last = fmt.Sprintf("status %d %s, err %v", status, body, err)
		if time.Now().After(deadline) {
			t.Fatalf("playhead serve not ready on %s/readyz after %s (last answer: %s)", s.metricsURL, readyTimeout, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// do sends a request with an optional bearer token and JSON body, and returns the status and
// body.
func (s *server) do(method, url, token string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// mustDo is do that fails the test on a transport error or an unexpected status.
func (s *server) mustDo(t *testing.T, want int, method, url, token string, body any) []byte {
	t.Helper()
	status, out, err := s.do(method, url, token, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	if status != want {
		t.Fatalf("%s %s: status %d, want %d; body %s", method, url, status, want, out)
	}
	return out
}

func mint(t *testing.T, member int64, admin bool) string {
	t.Helper()
	tok, err := auth.Mint([]byte(testSecret), member, admin, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// createMedia registers a READY public media item of one hour through the admin API.
func (s *server) createMedia(t *testing.T, adminToken, title string) int64 {
	t.Helper()
	out := s.mustDo(t, http.StatusCreated, http.MethodPost, s.httpURL+"/v1/admin/media", adminToken,
		map[string]any{"title": title, "duration_ms": 3_600_000})
	var m struct {
		ID int64 `json:"id"`
	}
	if err := json.Unmarshal(out, &m); err != nil || m.ID <= 0 {
		t.Fatalf("create media: answer %s has no positive id (%v)", out, err)
	}
	return m.ID
}

// player is one (member, media) pair reporting strictly increasing positions. Each player is
// driven by one worker at a time, so its fields need no lock; they are read after the
// workers have finished.
type player struct {
	member, media int64
	token         string
	sent          int   // PUTs sent; the k-th (1-based) carried position k*positionStep
	lastAcked     int32 // the newest position answered 204, 0 when none
}

const positionStep = 1000 // ms between two reports of one player

// TestServe_SIGTERMDrainsEveryAcceptedPosition runs a load of thousands of players against
// the binary, sends SIGTERM in the middle of it, and checks that the process exits 0 with
// every position it answered 204 in the database (the "must show 1").
func TestServe_SIGTERMDrainsEveryAcceptedPosition(t *testing.T) {
	const (
		players      = 2_000
		firstMember  = 1_000
		mediaCount   = 4
		workers      = 64
		minAccepted  = 20_000
		maxPerPlayer = 3_600_000 / positionStep // the media's duration bounds the positions
		loadTimeout  = 2 * time.Minute          // give up if the load never reaches minAccepted
	)
	s := startServer(t, map[string]string{"PLAYHEAD_FLUSH_INTERVAL": "1s", "PLAYHEAD_PUT_RATE": "0"})
	admin := mint(t, 1, true)
	var mediaIDs []int64
	for i := range mediaCount {
		mediaIDs = append(mediaIDs, s.createMedia(t, admin, fmt.Sprintf("e2e drain %d", i)))
	}
	ps := make([]*player, players)
	for i := range ps {
		member := int64(firstMember + i)
		ps[i] = &player{member: member, media: mediaIDs[i%mediaCount], token: mint(t, member, false)}
	}

	var (
		sent, accepted, unavailable atomic.Int64
		signalled, stop             atomic.Bool
		mu                          sync.Mutex
		unexpected                  []string // non-204/503 answers, and transport errors before SIGTERM
		connErrors                  int      // transport errors after SIGTERM: the server went away
		firstConnErr                string
	)
	report := func(msg string) {
		mu.Lock()
		defer mu.Unlock()
		unexpected = append(unexpected, msg)
	}
	firstUnexpected := func(n int) []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(unexpected[:min(n, len(unexpected))])
	}
	transport := &http.Transport{MaxIdleConnsPerHost: workers * 2, MaxConnsPerHost: workers * 2}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 10 * time.Second}

	// put sends the player's next position and reports whether the worker should go on.
	put := func(p *player) bool {
		pos := int32((p.sent + 1) * positionStep)
		req, err := http.NewRequest(http.MethodPut, fmt.Sprintf("%s/v1/playback/%d", s.httpURL, p.media),
			strings.NewReader(fmt.Sprintf(`{"position_ms": %d}`, pos)))
		if err != nil {
			report(err.Error())
			return false
		}
		req.Header.Set("Authorization", "Bearer "+p.token)
		req.Header.Set("Content-Type", "application/json")
		p.sent++
		sent.Add(1)
		resp, err := client.Do(req)
		if err != nil {
			if signalled.Load() {
				mu.Lock()
				if connErrors++; connErrors == 1 {
					firstConnErr = err.Error()
				}
				mu.Unlock()
			} else {
				report(fmt.Sprintf("member %d: PUT %d before SIGTERM: %v", p.member, pos, err))
			}
			return false
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusNoContent:
			p.lastAcked = pos
			accepted.Add(1)
			return true
		case resp.StatusCode == http.StatusServiceUnavailable && signalled.Load():
			unavailable.Add(1)
			return false
		default:
			report(fmt.Sprintf("member %d: PUT %d answered %d (signalled %v)", p.member, pos, resp.StatusCode, signalled.Load()))
			return false
		}
	}

	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			// Worker w drives players w, w+workers, …, round robin: each player's reports
			// are sequential.
			var mine []*player
			for i := w; i < players; i += workers {
				mine = append(mine, ps[i])
			}
			for !stop.Load() {
				progressed := false
				for _, p := range mine {
					if stop.Load() {
						return
					}
					if p.sent >= maxPerPlayer {
						continue
					}
					if !put(p) {
						return
					}
					progressed = true
				}
				if !progressed {
					return // every player of this worker reached the end of its media
				}
			}
		})
	}
	workersDone := make(chan struct{})
	go func() { wg.Wait(); close(workersDone) }()
	defer func() { stop.Store(true); <-workersDone }()

	// Wait for enough accepted positions, then signal while the load is still running.
	giveUp := time.Now().Add(loadTimeout)
	for accepted.Load() < minAccepted {
		if time.Now().After(giveUp) {
			t.Fatalf("only %d PUTs answered 204 after %s (wanted %d before SIGTERM); unexpected: %q",
				accepted.Load(), loadTimeout, minAccepted, firstUnexpected(10))
		}
		select {
		case <-s.done:
			t.Fatalf("playhead exited during the load (%v) after %d accepted PUTs", s.waitErr, accepted.Load())
		case <-workersDone:
			t.Fatalf("every worker stopped after %d accepted PUTs, before SIGTERM; unexpected: %q",
				accepted.Load(), firstUnexpected(10))
		case <-time.After(10 * time.Millisecond):
		}
	}
	acceptedAtSignal := accepted.Load()
	signalled.Store(true)
	signalAt := time.Now()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	code := s.wait(t, exitTimeout)
	exitAfter := time.Since(signalAt)
	stop.Store(true)
	<-workersDone
	transport.CloseIdleConnections()
	if code != 0 {
		t.Errorf("playhead exited with status %d after SIGTERM, want 0", code)
	}

	pool, err := pgxpool.New(context.Background(), s.dbURL)
	if err != nil {
		t.Fatalf("connect to the test database: %v", err)
	}
	defer pool.Close()
	type key struct{ member, media int64 }
	stored := map[key]int32{}
	rows, err := pool.Query(context.Background(), `SELECT member_id, media_id, position_ms FROM playback`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var k key
		var pos int32
		if err := rows.Scan(&k.member, &k.media, &pos); err != nil {
			t.Fatal(err)
		}
		stored[k] = pos
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}

	var (
		violations            []string
		keysAcked, landedMore int // keys with a 204; keys whose stored value is newer than the last 204
	)
	known := map[key]bool{}
	for _, p := range ps {
		k := key{p.member, p.media}
		known[k] = true
		pos, ok := stored[k]
		if p.lastAcked > 0 {
			keysAcked++
		}
		switch {
		case p.lastAcked > 0 && !ok:
			violations = append(violations, fmt.Sprintf("member %d media %d: no row, last 204 was for %d", p.member, p.media, p.lastAcked))
		case !ok:
			// never acknowledged and never written: fine
		case pos < p.lastAcked:
			violations = append(violations, fmt.Sprintf("member %d media %d: stored %d, older than the last 204 (%d)", p.member, p.media, pos, p.lastAcked))
		case pos%positionStep != 0 || pos < positionStep || int(pos/positionStep) > p.sent:
			violations = append(violations, fmt.Sprintf("member %d media %d: stored %d, which was never sent (sent %d..%d step %d)",
				p.member, p.media, pos, positionStep, p.sent*positionStep, positionStep))
		case pos > p.lastAcked:
			landedMore++ // a report whose answer was lost in the shutdown: allowed
		}
	}
	for k := range stored {
		if !known[k] {
			violations = append(violations, fmt.Sprintf("member %d media %d: a row no player wrote", k.member, k.media))
		}
	}
	drops := droppedFromLog(s.stderr.String())

	mu.Lock()
	t.Logf("load: %d PUTs sent, %d answered 204 (%d of them after SIGTERM was sent), %d answered 503, "+
		"%d connection errors after SIGTERM (first: %q); %d keys acknowledged, %d rows stored, %d rows newer than their last 204; "+
		"buffer drops logged: %d; exit status %d %s after SIGTERM; load ran %s before it",
		sent.Load(), accepted.Load(), accepted.Load()-acceptedAtSignal, unavailable.Load(), connErrors, firstConnErr,
		keysAcked, len(stored), landedMore, drops, code, exitAfter.Round(time.Millisecond), signalAt.Sub(start).Round(time.Millisecond))
	if len(unexpected) > 0 {
		t.Errorf("%d unexpected answers during the load, first: %q", len(unexpected), unexpected[:min(10, len(unexpected))])
	}
	mu.Unlock()
	if accepted.Load() < minAccepted {
		t.Errorf("%d PUTs answered 204, want at least %d", accepted.Load(), minAccepted)
	}
	if keysAcked < players {
		t.Errorf("%d keys got a 204, want %d (every player)", keysAcked, players)
	}
	if len(violations) > 0 {
		hint := ""
		if drops > 0 {
			hint = fmt.Sprintf(" (the buffer logged %d drops: a full buffer answers 204 and drops the position)", drops)
		}
		t.Errorf("%d of %d keys break \"every position answered 204 before the process exited is stored\"%s; first: %s",
			len(violations), players, hint, strings.Join(violations[:min(10, len(violations))], "; "))
	}
}

// droppedFromLog sums the "dropped" counts of the buffer's rate-limited drop warnings in the
// binary's JSON log.
func droppedFromLog(stderr string) int64 {
	var total int64
	sc := bufio.NewScanner(strings.NewReader(stderr))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var rec struct {
			Msg     string `json:"msg"`
			Dropped int64  `json:"dropped"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) == nil && strings.Contains(rec.Msg, "dropped") {
			total += rec.Dropped
		}
	}
	return total
}

// TestServe_RejectsBadConfiguration checks that invalid variables stop the process with
// status 1 and an error naming each of them.
func TestServe_RejectsBadConfiguration(t *testing.T) {
	p := startProcess(t, map[string]string{
		"DATABASE_URL":            "postgres://127.0.0.1:1/none?sslmode=disable", // never reached
		"PLAYHEAD_JWT_SECRET":     "too-short",
		"PLAYHEAD_FLUSH_INTERVAL": "banana",
		"PLAYHEAD_HTTP_ADDR":      "127.0.0.1:0",
		"PLAYHEAD_METRICS_ADDR":   "127.0.0.1:0",
	}, "serve")
	if code := p.wait(t, exitTimeout); code != 1 {
		t.Errorf("exit status %d, want 1", code)
	}
	stderr := p.stderr.String()
	for _, name := range []string{"PLAYHEAD_FLUSH_INTERVAL", "PLAYHEAD_JWT_SECRET"} {
		if !strings.Contains(stderr, name) {
			t.Errorf("stderr does not name %s:\n%s", name, stderr)
		}
	}
}

// TestServe_MetricsExposed checks that /metrics on the metrics address carries the figures the
// dashboards use, that the public address does not serve it, and that both answer /healthz.
func TestServe_MetricsExposed(t *testing.T) {
	s := startServer(t, nil)
	admin := mint(t, 1, true)
	mediaID := s.createMedia(t, admin, "e2e metrics")
	member := mint(t, 42, false)
	url := fmt.Sprintf("%s/v1/playback/%d", s.httpURL, mediaID)
	s.mustDo(t, http.StatusNoContent, http.MethodPut, url, member, map[string]any{"position_ms": 61_000})
	out := s.mustDo(t, http.StatusOK, http.MethodGet, url, member, nil)
	var got struct {
		PositionMS int32 `json:"position_ms"`
	}
	if err := json.Unmarshal(out, &got); err != nil || got.PositionMS != 61_000 {
		t.Errorf("GET after PUT 61000: %s (%v), want position_ms 61000", out, err)
	}

	metrics := string(s.mustDo(t, http.StatusOK, http.MethodGet, s.metricsURL+"/metrics", "", nil))
	for _, name := range []string{
		"playhead_playback_buffer_depth",
		"playhead_playback_buffer_capacity",
		"playhead_playback_buffer_offered_total",
		"playhead_playback_buffer_dropped_total",
		"playhead_playback_buffer_coalesced_total",
		"playhead_playback_buffer_flush_duration_seconds",
		"playhead_playback_buffer_flush_rows",
		"playhead_playback_buffer_flush_failures_total",
		"playhead_media_cache_hits_total",
		"playhead_media_cache_misses_total",
		"playhead_media_cache_evictions_total",
		"playhead_http_requests_total",
		"playhead_http_request_duration_seconds",
		"playhead_db_pool_acquired_conns",
		"playhead_db_pool_idle_conns",
		"playhead_db_pool_total_conns",
		"playhead_db_pool_max_conns",
		"playhead_db_pool_acquires_total",
		"playhead_db_pool_acquire_duration_seconds",
		"playhead_db_pool_empty_acquires_total",
	} {
		if !strings.Contains(metrics, "\n# TYPE "+name+" ") {
			t.Errorf("/metrics has no metric %s", name)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", metrics)
	}

	s.mustDo(t, http.StatusNotFound, http.MethodGet, s.httpURL+"/metrics", "", nil)
	s.mustDo(t, http.StatusOK, http.MethodGet, s.httpURL+"/healthz", "", nil)
	s.mustDo(t, http.StatusOK, http.MethodGet, s.metricsURL+"/healthz", "", nil)
}

// TestToken_PrintsVerifiableTokens checks `playhead token`: one verifiable token per line for
// consecutive members, and a refusal without the secret.
func TestToken_PrintsVerifiableTokens(t *testing.T) {
	p := startProcess(t, map[string]string{"PLAYHEAD_JWT_SECRET": testSecret}, "token", "--member", "5", "--count", "3", "--admin")
	if code := p.wait(t, exitTimeout); code != 0 {
		t.Fatalf("playhead token: exit status %d, want 0", code)
	}
	lines := strings.Fields(p.stdout.String())
	if len(lines) != 3 {
		t.Fatalf("playhead token --count 3 printed %d tokens, want 3:\n%s", len(lines), p.stdout)
	}
	verifier, err := auth.NewVerifier([]byte(testSecret), 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, tok := range lines {
		id, err := verifier.Verify(tok)
		if err != nil {
			t.Errorf("token %d does not verify: %v", i+1, err)
			continue
		}
		if want := (auth.Identity{MemberID: int64(5 + i), Admin: true}); id != want {
			t.Errorf("token %d is for %+v, want %+v", i+1, id, want)
		}
	}

	noSecret := startProcess(t, nil, "token", "--member", "5")
	if code := noSecret.wait(t, exitTimeout); code != 1 {
		t.Errorf("playhead token without PLAYHEAD_JWT_SECRET: exit status %d, want 1", code)
	}
	if !strings.Contains(noSecret.stderr.String(), "PLAYHEAD_JWT_SECRET") {
		t.Errorf("playhead token without the secret does not name PLAYHEAD_JWT_SECRET:\n%s", noSecret.stderr)
	}
	if out := noSecret.stdout.String(); out != "" {
		t.Errorf("playhead token without the secret printed %q", out)
	}
}
