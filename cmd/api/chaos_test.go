package main

// The reliability suite: real processes, a real PostgreSQL restarted, slowed and cut off,
// workers killed, hostile clients. `make test` runs each fault a few rounds;
// `make chaos` runs PLAYHEAD_CHAOS_ROUNDS=20 of each. docs/reliability.md records what it
// measured. Nothing here asserts how fast anything is: the latency checks compare against
// the delay the test itself injected into the database connection.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/internal/testvideo"
)

// chaosRounds is how many rounds each repeated fault runs: PLAYHEAD_CHAOS_ROUNDS, or 3.
func chaosRounds(t *testing.T) int {
	t.Helper()
	raw := os.Getenv("PLAYHEAD_CHAOS_ROUNDS")
	if raw == "" {
		return 3
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 {
		t.Fatalf("PLAYHEAD_CHAOS_ROUNDS=%q is not a positive integer", raw)
	}
	return n
}

// metric reads the sum of a metric's samples from the server's /metrics (0 when absent).
func (s *server) metric(t *testing.T, name string) float64 {
	t.Helper()
	status, body, err := s.do(http.MethodGet, s.metricsURL+"/metrics", "", nil)
	if err != nil || status != http.StatusOK {
		t.Fatalf("scrape %s/metrics: %d %v", s.metricsURL, status, err)
	}
	var total float64
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err == nil {
			total += v
		}
	}
	return total
}

func (s *server) ready() int {
	status, _, err := s.do(http.MethodGet, s.metricsURL+"/readyz", "", nil)
	if err != nil {
		return 0
	}
	return status
}

func (s *server) stopGracefully(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := s.wait(t, exitTimeout); code != 0 {
		t.Fatalf("exit status %d after SIGTERM, want 0", code)
	}
}

// TestChaos_PostgresRestart restarts PostgreSQL (pg_ctl restart -m fast) under playback load:
// PUTs keep answering 204, the flushes that hit the outage fail and are counted, readiness
// reports the outage and recovers, and flushing resumes without restarting Playhead.
func TestChaos_PostgresRestart(t *testing.T) {
	pg := pgtest.Shared(t)
	if pg.DataDir == "" {
		t.Fatalf("this test restarts the test cluster, so it needs one started by pgtest: unset %s", pgtest.EnvURL)
	}
	s := startServer(t, map[string]string{"PLAYHEAD_FLUSH_INTERVAL": "200ms", "PLAYHEAD_PUT_RATE": "0"})
	players := newPlayers(t, s, 200, 300_000, 4)
	load := startLoad(s, players, 16, 20*time.Millisecond)
	defer load.stopAndWait()
	load.waitAccepted(t, 2_000)

	var sawNotReady atomic.Bool
	watching := make(chan struct{})
	var watch sync.WaitGroup
	watch.Go(func() {
		for {
			select {
			case <-watching:
				return
			default:
			}
			if s.ready() == http.StatusServiceUnavailable {
				sawNotReady.Store(true)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	before := s.metric(t, "playhead_playback_buffer_flush_failures_total")
	restartAt := time.Now()
	if err := pg.Restart(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Since(restartAt)
	giveUp := time.Now().Add(60 * time.Second)
	for s.ready() != http.StatusOK {
		if time.Now().After(giveUp) {
			t.Fatal("/readyz did not answer 200 within 60 s of the database coming back")
		}
		time.Sleep(20 * time.Millisecond)
	}
	recovered := time.Since(restartAt)
	close(watching)
	watch.Wait()
	// Keep the load running past recovery, so every player reports again after it.
	resumeFrom := load.accepted.Load()
	load.waitAccepted(t, resumeFrom+int64(2*len(players)))
	failures := s.metric(t, "playhead_playback_buffer_flush_failures_total") - before
	load.stopAndWait()
	s.stopGracefully(t)

	lost, bad := audit(players, storedPositions(t, s.dbURL))
	t.Logf("restart took %v, ready again %v after it began; %d flushes failed; %d reports sent, %d answered 204; %s",
		restarted.Round(time.Millisecond), recovered.Round(time.Millisecond), int(failures), load.sent.Load(), load.accepted.Load(), load.snapshot())
	if n := load.statuses[http.StatusNoContent]; n == 0 || len(load.statuses) != 1 || len(load.transportErrs) > 0 {
		t.Errorf("PUTs during the restart: %s; want every one answered 204", load.snapshot())
	}
	if !sawNotReady.Load() {
		t.Error("/readyz never answered 503 while PostgreSQL was down")
	}
	if failures < 1 {
		t.Error("no flush failure was counted across the restart")
	}
	if len(lost) > 0 || len(bad) > 0 {
		t.Errorf("after recovery and a graceful stop, %d acknowledged positions are missing and %d rows are wrong (first lost: member %d pos %d)",
			len(lost), len(bad), firstLost(lost).member, firstLost(lost).pos)
	}
}

type lostSummary struct {
	member int64
	pos    int32
}

func firstLost(lost []lostReport) lostSummary {
	if len(lost) == 0 {
		return lostSummary{}
	}
	return lostSummary{lost[0].player.member, lost[0].pos}
}

// faultyProxy forwards TCP connections to PostgreSQL and can delay every answer from the
// database, or hold the answers back entirely, to play a slow or unreachable database.
type faultyProxy struct {
	ln     net.Listener
	target string
	delay  atomic.Int64 // nanoseconds added before each chunk from the database
	paused atomic.Bool
	wg     sync.WaitGroup
}

func startProxy(t *testing.T, target string) *faultyProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultyProxy{ln: ln, target: target}
	p.wg.Go(p.accept)
	t.Cleanup(func() { ln.Close(); p.paused.Store(false); p.wg.Wait() })
	return p
}

func (p *faultyProxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		db, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.wg.Go(func() { _, _ = io.Copy(db, client); db.Close() })
		p.wg.Go(func() {
			defer client.Close()
			buf := make([]byte, 32<<10)
			for {
				n, err := db.Read(buf)
				for p.paused.Load() {
					time.Sleep(5 * time.Millisecond)
				}
				if d := p.delay.Load(); d > 0 {
					time.Sleep(time.Duration(d))
				}
				if n > 0 {
					if _, werr := client.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		})
	}
}

// TestChaos_SlowDatabase puts a proxy between Playhead and PostgreSQL that first adds 300 ms
// to every answer, then holds all answers back. PUT latency stays far below the injected
// delay because the request path never waits on the database; the buffer fills and, once
// full, drops (counted); when the database answers again, flushing catches up.
func TestChaos_SlowDatabase(t *testing.T) {
	dbURL := pgtest.URL(t)
	conf := pgtest.Shared(t).Config
	proxy := startProxy(t, net.JoinHostPort(conf.Host, conf.Port))
	proxied := strings.Replace(dbURL, net.JoinHostPort(conf.Host, conf.Port), proxy.ln.Addr().String(), 1)
	s := startServer(t, map[string]string{"DATABASE_URL": proxied, "PLAYHEAD_PUT_RATE": "0",
		"PLAYHEAD_FLUSH_INTERVAL": "100ms", "PLAYHEAD_FLUSH_BATCH": "200", "PLAYHEAD_BUFFER_CAPACITY": "2000"})
	players := newPlayers(t, s, 200, 400_000, 4) // the media are cached from here on
	load := startLoad(s, players, 16, 10*time.Millisecond)
	defer load.stopAndWait()

	const injected = 300 * time.Millisecond
	phase := func(name string, d time.Duration) []time.Duration {
		load.takeLatencies()
		time.Sleep(d)
		lat := load.takeLatencies()
		t.Logf("%-8s %5d PUTs answered 204: p50 %v, p99 %v, max %v; buffer depth %v, dropped so far %v",
			name, len(lat), quantile(lat, 0.5), quantile(lat, 0.99), quantile(lat, 1),
			s.metric(t, "playhead_playback_buffer_depth"), s.metric(t, "playhead_playback_buffer_dropped_total"))
		return lat
	}
	load.waitAccepted(t, 1_000)
	normal := phase("normal", 2*time.Second)
	proxy.delay.Store(int64(injected))
	slow := phase("slow", 3*time.Second)
	droppedBefore := s.metric(t, "playhead_playback_buffer_dropped_total")
	proxy.paused.Store(true)
	cut := phase("cut off", 3*time.Second)
	droppedDuring := s.metric(t, "playhead_playback_buffer_dropped_total") - droppedBefore
	proxy.paused.Store(false)
	proxy.delay.Store(0)
	phase("back", 3*time.Second)
	load.stopAndWait()
	s.stopGracefully(t)

	if n := load.statuses[http.StatusNoContent]; n == 0 || len(load.statuses) != 1 || len(load.transportErrs) > 0 {
		t.Errorf("PUTs: %s; want every one answered 204 whatever the database does", load.snapshot())
	}
	for name, lat := range map[string][]time.Duration{"slow": slow, "cut off": cut} {
		// A PUT that waited for the database could not be faster than the delay the proxy adds
		// to every answer; the median PUT is.
		if len(lat) == 0 || quantile(lat, 0.5) >= injected {
			t.Errorf("%s database: %d PUTs, median %v; want many, with a median below the injected %v (normal median %v)",
				name, len(lat), quantile(lat, 0.5), injected, quantile(normal, 0.5))
		}
	}
	if droppedDuring == 0 {
		t.Error("no drop was counted while the database was cut off and the buffer full")
	}
	lost, bad := audit(players, storedPositions(t, dbURL))
	if len(bad) > 0 {
		t.Errorf("%d stored rows were never sent: %v", len(bad), bad[:min(3, len(bad))])
	}
	// Reports dropped on the full buffer are lost by design; what the players reported once the
	// database answered again must all be there.
	for _, l := range lost {
		if l.player.lastAcked == l.pos {
			t.Errorf("member %d: its last report (%d ms), after the database came back, is not stored", l.player.member, l.pos)
			break
		}
	}
}

// TestChaos_SIGTERMWithFullBuffer stops the server while its buffer holds every position of
// the run (nothing flushed yet: a 10 s interval and a huge batch), in rounds: every position
// answered 204 is stored.
func TestChaos_SIGTERMWithFullBuffer(t *testing.T) {
	rounds := chaosRounds(t)
	var total, held int64
	for round := range rounds {
		s := startServer(t, map[string]string{"PLAYHEAD_PUT_RATE": "0", "PLAYHEAD_FLUSH_INTERVAL": "10s",
			"PLAYHEAD_FLUSH_BATCH": "100000", "PLAYHEAD_BUFFER_CAPACITY": "100000"})
		players := newPlayers(t, s, 300, int64(500_000+round*1_000), 3)
		load := startLoad(s, players, 32, 0)
		load.waitAccepted(t, int64(3_000+rand.IntN(3_000)))
		depth := s.metric(t, "playhead_playback_buffer_depth") + s.metric(t, "playhead_playback_buffer_held_keys")
		if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		code := s.wait(t, exitTimeout)
		load.stopAndWait()
		if code != 0 {
			t.Fatalf("round %d: exit status %d", round, code)
		}
		lost, bad := audit(players, storedPositions(t, s.dbURL))
		total += load.accepted.Load()
		held += int64(depth)
		if len(lost) > 0 || len(bad) > 0 {
			t.Fatalf("round %d: %d acknowledged positions lost, %d wrong rows (first lost: %+v)", round, len(lost), len(bad), firstLost(lost))
		}
	}
	t.Logf("%d rounds: %d positions answered 204, all stored; %d entries and keys were waiting in the buffer at the signals", rounds, total, held)
}

// TestChaos_Kill9LossWindow kills the server with SIGKILL in the middle of a load, in rounds,
// and measures what is lost: only positions acknowledged within about one flush interval
// before the kill (the documented loss window).
func TestChaos_Kill9LossWindow(t *testing.T) {
	const interval = time.Second
	// A flush in progress at the kill also loses what it was writing: one interval plus that
	// flush's own time. The slack bounds the latter generously on a shared machine.
	const window = interval + time.Second
	rounds := chaosRounds(t)
	var acked, lostTotal, playersBehind int
	var worst time.Duration
	for round := range rounds {
		s := startServer(t, map[string]string{"PLAYHEAD_PUT_RATE": "0", "PLAYHEAD_FLUSH_INTERVAL": interval.String()})
		players := newPlayers(t, s, 300, int64(600_000+round*1_000), 3)
		load := startLoad(s, players, 32, 5*time.Millisecond)
		load.waitAccepted(t, 2_000)
		// Run a few flush cycles, then kill at a random point of one.
		time.Sleep(3*interval + time.Duration(rand.Int64N(int64(interval))))
		killAt := time.Now()
		if err := s.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		s.wait(t, exitTimeout)
		load.stopAndWait()
		lost, bad := audit(players, storedPositions(t, s.dbURL))
		if len(bad) > 0 {
			t.Fatalf("round %d: rows never sent: %v", round, bad[:min(3, len(bad))])
		}
		acked += int(load.accepted.Load())
		lostTotal += len(lost)
		behind := map[int64]bool{}
		for _, l := range lost {
			behind[l.player.member] = true
		}
		playersBehind += len(behind)
		for _, l := range lost {
			age := killAt.Sub(l.at)
			worst = max(worst, age)
			if age > window {
				t.Errorf("round %d: member %d's position %d, acknowledged %v before the kill, was lost: older than the %v window",
					round, l.player.member, l.pos, age.Round(time.Millisecond), window)
				break
			}
		}
	}
	t.Logf("%d rounds: %d positions acknowledged, %d lost to kill -9 (%.2f%%, %d player-rounds left behind their last report); "+
		"the oldest lost was acknowledged %v before the kill (flush interval %v)",
		rounds, acked, lostTotal, 100*float64(lostTotal)/float64(max(acked, 1)), playersBehind, worst.Round(time.Millisecond), interval)
}

// TestChaos_MediaJobs runs uploads through two workers and, at a random moment of each encode,
// kills the worker (SIGKILL), stops it (SIGTERM), or makes it lose its claim by expiring its
// lease under it. No job is lost or completed twice, no notification is duplicated, and no
// losing claim's files remain.
func TestChaos_MediaJobs(t *testing.T) {
	rounds := chaosRounds(t)
	api, pool, storageDir := startPipeline(t)
	member := mint(t, 77, false)
	dir := t.TempDir()
	video := testvideo.MP4(t, dir, testvideo.Spec{Seconds: 8, Width: 640, Height: 360, Audio: true})

	workers := map[string]*server{}
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
		id := api.upload(t, member, video, "clip.mp4", fmt.Sprintf("round %d", round), "PRIVATE")
		var alive []*server
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
				_ = workers[holder].cmd.Process.Kill()
				workers[holder].wait(t, exitTimeout)
				delete(workers, holder)
				spawn()
			case "SIGTERM":
				workers[holder].stopGracefully(t)
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
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM jobs WHERE media_id = $1`, id).Scan(&jobs); err != nil || jobs != 1 {
			t.Fatalf("round %d: %d jobs for one upload (%v)", round, jobs, err)
		}
		t.Logf("round %d: %s → COMPLETED after %d attempt(s)", round, fault, done.AttemptCount)
	}
	t.Logf("%d rounds, faults: %v; every job completed once, one notification each, no losing claim's files left", rounds, faults)
}

// TestChaos_Abuse: a flood of unknown media ids reaches the database once per id; a body over
// the limit is refused after at most one read buffer, not read to its end; a member over the
// PUT rate gets 429 with Retry-After; slow-loris clients are cut while others are served.
func TestChaos_Abuse(t *testing.T) {
	s := startServer(t, map[string]string{"PLAYHEAD_CACHE_NEGATIVE_TTL": "10m", "PLAYHEAD_HTTP_READ_TIMEOUT": "1s",
		"PLAYHEAD_PUT_RATE": "1", "PLAYHEAD_PUT_BURST": "5"})
	media := s.createMedia(t, mint(t, 1, true), "target")

	t.Run("UnknownIDFlood", func(t *testing.T) {
		before := s.metric(t, "playhead_media_cache_loads_total")
		ids := map[int64]bool{}
		var wg sync.WaitGroup
		var notFound atomic.Int64
		for w := range 20 {
			tok := mint(t, int64(10_000+w), false)
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			var mine []int64
			for range 500 { // 20 × 500 = 10 000 requests over at most 2 000 ids
				mine = append(mine, 1_000_000+rng.Int64N(2_000))
			}
			for _, id := range mine {
				ids[id] = true
			}
			wg.Go(func() {
				for _, id := range mine {
					status, _, err := s.do(http.MethodGet, fmt.Sprintf("%s/v1/playback/%d", s.httpURL, id), tok, nil)
					if err == nil && status == http.StatusNotFound {
						notFound.Add(1)
					}
				}
			})
		}
		wg.Wait()
		loads := s.metric(t, "playhead_media_cache_loads_total") - before
		t.Logf("10 000 requests for %d distinct unknown ids: %d answered 404, %v database lookups", len(ids), notFound.Load(), loads)
		if notFound.Load() != 10_000 {
			t.Errorf("%d of 10 000 answered 404", notFound.Load())
		}
		if loads > float64(len(ids)) {
			t.Errorf("%v database lookups for %d distinct ids within one negative-TTL window, want at most one each", loads, len(ids))
		}
	})

	t.Run("OversizeBodyRefusedUnread", func(t *testing.T) {
		conn, err := net.Dial("tcp", strings.TrimPrefix(s.httpURL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		const announced = 1 << 30 // 1 GiB announced; only 16 KiB ever sent
		fmt.Fprintf(conn, "PUT /v1/playback/%d HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
			media, mint(t, 5, false), announced)
		_, _ = conn.Write([]byte(strings.Repeat("x", 16<<10)))
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("no answer to a 1 GiB body of which 16 KiB were sent: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("status %d, want 413", resp.StatusCode)
		}
	})

	t.Run("RateLimit", func(t *testing.T) {
		tok := mint(t, 6, false)
		limited := 0
		for i := range 20 {
			req, _ := http.NewRequest(http.MethodPut, fmt.Sprintf("%s/v1/playback/%d", s.httpURL, media), strings.NewReader(fmt.Sprintf(`{"position_ms": %d}`, i)))
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := s.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusTooManyRequests {
				limited++
				if resp.Header.Get("Retry-After") == "" {
					t.Fatal("429 without Retry-After")
				}
			}
		}
		if limited < 10 {
			t.Fatalf("%d of 20 rapid PUTs were limited, want at least 10 (burst 5)", limited)
		}
	})

	t.Run("SlowLoris", func(t *testing.T) {
		const conns = 100
		closed := make(chan time.Duration, conns)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range conns {
			conn, err := net.Dial("tcp", strings.TrimPrefix(s.httpURL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() {
				defer conn.Close()
				start := time.Now()
				_, _ = conn.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: "))
				for {
					select {
					case <-stop:
						return
					case <-time.After(200 * time.Millisecond):
					}
					if _, err := conn.Write([]byte("a")); err != nil {
						closed <- time.Since(start)
						return
					}
					_ = conn.SetReadDeadline(time.Now().Add(time.Millisecond))
					if _, err := conn.Read(make([]byte, 1)); err != nil && !isTimeout(err) {
						closed <- time.Since(start) // the server closed it
						return
					}
				}
			})
		}
		// Others are served meanwhile.
		for range 20 {
			if status, _, err := s.do(http.MethodGet, s.httpURL+"/healthz", "", nil); err != nil || status != http.StatusOK {
				t.Fatalf("a normal request during the slow-loris attack: %d %v", status, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		giveUp := time.After(30 * time.Second)
		var longest time.Duration
		for range conns {
			select {
			case d := <-closed:
				longest = max(longest, d)
			case <-giveUp:
				close(stop)
				wg.Wait()
				t.Fatal("slow-loris connections still open 30 s after they started trickling (read timeout 1 s)")
			}
		}
		close(stop)
		wg.Wait()
		t.Logf("%d slow-loris connections were all cut by the server; the last after %v (read timeout 1 s)", conns, longest.Round(time.Millisecond))
	})
}

func isTimeout(err error) bool {
	ne, ok := errors.AsType[net.Error](err)
	return ok && ne.Timeout()
}
