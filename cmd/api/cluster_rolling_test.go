package main

import (
	"context"
	"encoding/csv"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/testvideo"
	"github.com/playhead/playhead/media"
)

// The rolling restart (issue 19; make rolling-restart, docs/reliability.md): the topology of
// scripts/cluster.sh started by the test itself, every process real and on loopback.
const (
	rollingAPINodes    = 3
	rollingWorkerNodes = 2
	// A stopping api node keeps serving this long with /readyz at 503 (as scripts/cluster.sh):
	// HAProxy checks every 500 ms and takes a node out after 2 failures, so it stops sending
	// before the node stops accepting.
	rollingDrainDelay = "3s"
	// rollingBalancerTimeout bounds the wait for HAProxy to see a node come back UP.
	rollingBalancerTimeout = time.Minute
)

// rollingRounds is PLAYHEAD_ROLLING_ROUNDS, 5 unless set (make test runs 1 round).
func rollingRounds(t *testing.T) int {
	t.Helper()
	return roundsFromEnv(t, "PLAYHEAD_ROLLING_ROUNDS", 5)
}

// rollingNode is one playhead serve of the cluster, restarted on the same ports.
type rollingNode struct {
	name string
	env  map[string]string
	s    *binarytest.Server
	// released counts the jobs the node's stopped processes gave back on their graceful stop.
	released int
}

// restart stops the node with SIGTERM, fails the test unless it exits 0, and starts it again
// with the same environment (so the same ports), waiting until its /readyz answers 200.
func (n *rollingNode) restart(t *testing.T) {
	t.Helper()
	n.s.Signal(t, syscall.SIGTERM)
	if code := n.s.Wait(t, binarytest.ExitTimeout); code != 0 {
		t.Fatalf("%s exited with status %d after SIGTERM, want 0; stderr:\n%s", n.name, code, n.s.Stderr)
	}
	n.released += strings.Count(n.s.Stderr.String(), "job released for another node")
	n.s = binarytest.Start(t, n.env)
}

// TestCluster_RollingRestart: HAProxy in front of 3 api nodes (health-checked on /readyz, each
// with a drain delay) and 2 worker nodes on one database; players report positions through
// HAProxy and uploads are encoded while every api node, then every worker node, is stopped
// with SIGTERM and started again, PLAYHEAD_ROLLING_ROUNDS times. Then everything stops
// gracefully and the test counts: requests not answered 204/200 (transport errors included),
// positions answered 204 and not stored, keys whose stored position is not the newest
// accepted, uploads not READY, encode jobs not completed exactly once at their first attempt.
// Every count must be 0.
func TestCluster_RollingRestart(t *testing.T) {
	haproxy, err := exec.LookPath("haproxy")
	if err != nil {
		t.Fatal("haproxy is missing: make system-deps (or apt-get install haproxy)")
	}
	rounds := rollingRounds(t)
	began := time.Now()
	storageDir := t.TempDir()

	node := func(role, name, dbURL string) *rollingNode {
		env := pipelineEnv(role, name, storageDir, t.TempDir(), "veryfast")
		env["PLAYHEAD_HTTP_ADDR"] = binarytest.FreeAddr(t)
		env["PLAYHEAD_METRICS_ADDR"] = binarytest.FreeAddr(t)
		env["PLAYHEAD_SHUTDOWN_DRAIN_DELAY"] = rollingDrainDelay
		env["PLAYHEAD_FLUSH_INTERVAL"] = "1s"
		// Production's lease and rate limit: a job run twice because a starved heartbeat let
		// its lease run out, or a report refused 429, is counted, not configured away.
		delete(env, "PLAYHEAD_JOB_LEASE")
		delete(env, "PLAYHEAD_PUT_RATE")
		if dbURL != "" {
			env["DATABASE_URL"] = dbURL
		}
		n := &rollingNode{name: name, env: env, s: binarytest.Start(t, env)}
		// Every restart must join the same database, the first node's included.
		n.env["DATABASE_URL"] = n.s.DBURL
		return n
	}
	var apis, workers []*rollingNode
	apis = append(apis, node("api", "api1", ""))
	dbURL := apis[0].s.DBURL
	for i := 2; i <= rollingAPINodes; i++ {
		apis = append(apis, node("api", fmt.Sprintf("api%d", i), dbURL))
	}
	for i := 1; i <= rollingWorkerNodes; i++ {
		workers = append(workers, node("worker", fmt.Sprintf("worker%d", i), dbURL))
	}

	lb, statsURL := startHAProxy(t, haproxy, apis)
	for _, n := range apis {
		waitBalancerUp(t, lb, statsURL, n.name)
	}

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

	small := testvideo.MP4(t, t.TempDir(), testvideo.Spec{Seconds: 3, Width: 320, Height: 240, Audio: true})
	slow := testvideo.MP4(t, t.TempDir(), slowSpec)
	var uploads []int64
	upload := func(path, title string) {
		uploads = append(uploads, lb.Upload(t, owner, binarytest.Upload{Path: path, Title: title}))
	}
	for r := 1; r <= rounds; r++ {
		upload(small, fmt.Sprintf("round %d before the api nodes", r))
		for _, n := range apis {
			n.restart(t)
			waitBalancerUp(t, lb, statsURL, n.name)
		}
		// Encodes under way while the workers stop: each releases its job for the other.
		upload(slow, fmt.Sprintf("round %d before the workers", r))
		upload(slow, fmt.Sprintf("round %d before the workers, second", r))
		for _, n := range workers {
			n.restart(t)
		}
		t.Logf("round %d of %d done after %s: %d reports accepted so far", r, rounds, time.Since(began).Round(time.Second), load.Accepted.Load())
	}
	for _, id := range uploads {
		waitMedia(t, lb, owner, id, media.StatusReady)
	}
	load.WaitRounds(t, 2)
	load.Stop()

	for _, n := range append(apis, workers...) {
		n.s.Stop(t)
	}
	// SIGUSR1 is HAProxy's graceful stop (SIGTERM is its immediate one).
	lb.Signal(t, syscall.SIGUSR1)
	if code := lb.Wait(t, binarytest.ExitTimeout); code != 0 {
		t.Errorf("haproxy exited with status %d after SIGUSR1, want 0", code)
	}

	counts := load.Counts()
	failed := counts.TransportErrors
	for status, n := range counts.Reports {
		if status != http.StatusNoContent {
			failed += n
		}
	}
	for status, n := range counts.Reads {
		if status != http.StatusOK && status != http.StatusNotFound {
			failed += n
		}
	}
	failed += counts.Reads[http.StatusNotFound] - notFoundBefore
	stored := binarytest.StoredPositions(t, dbURL)
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
	for _, n := range workers {
		released += n.released
	}

	t.Logf("rolling restart: %d rounds (%d api + %d worker restarts) in %s", rounds, rounds*rollingAPINodes,
		rounds*rollingWorkerNodes, time.Since(began).Round(time.Second))
	t.Logf("requests: %d reports sent, %d accepted; %s", load.Sent.Load(), load.Accepted.Load(), counts)
	t.Logf("requests failed (reports not 204, reads not 200, or no answer; 404 before the first restart excepted): %d", failed)
	t.Logf("reads answered 404 before the first restart (first position not flushed yet): %d", notFoundBefore)
	t.Logf("positions accepted and not stored: %d; keys not at their newest accepted position: %d of %d; bad rows: %d",
		len(lost), notNewest, len(players), len(bad))
	t.Logf("uploads: %d, not READY: %d; encode jobs not completed exactly once at attempt 1: %d; "+
		"jobs a stopping worker released mid-encode: %d", len(uploads), notReady, len(jobFaults), released)

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

// auditEncodes reads every upload's media row, encode jobs and outbox rows from the database
// (every node has stopped): it returns how many uploads are not READY, and one line per upload whose encoding
// was not exactly one job, COMPLETED at its first attempt, with one media_ready notification
// (a job lost, or run twice, or retried after a lease ran out).
func auditEncodes(t *testing.T, lb *binarytest.Server, uploads []int64) (notReady int, faults []string) {
	t.Helper()
	pool := lb.Pool(t)
	for _, id := range uploads {
		if status, _, _ := mediaRow(t, pool, id); status != string(media.StatusReady) {
			notReady++
			faults = append(faults, fmt.Sprintf("media %d: %s, want READY", id, status))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var jobs, completedFirst int
		err := pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status = 'COMPLETED' AND attempt_count = 1)
			FROM jobs WHERE subject_id = $1`, id).Scan(&jobs, &completedFirst)
		cancel()
		if err != nil {
			t.Fatalf("read the jobs of media %d: %v", id, err)
		}
		ready := outboxCount(t, pool, id, media.OutboxReady)
		if jobs != 1 || completedFirst != 1 || ready != 1 {
			faults = append(faults, fmt.Sprintf("media %d: %d jobs, %d COMPLETED at attempt 1, %d media_ready notifications; want 1, 1, 1",
				id, jobs, completedFirst, ready))
		}
	}
	return notReady, faults
}

// startHAProxy runs HAProxy in the foreground in front of apis (the configuration of
// scripts/cluster.sh) and returns it as a Server whose HTTPURL is the balancer, with the URL
// of its statistics as CSV.
func startHAProxy(t *testing.T, haproxy string, apis []*rollingNode) (*binarytest.Server, string) {
	t.Helper()
	front, stats := binarytest.FreeAddr(t), binarytest.FreeAddr(t)
	var servers strings.Builder
	for _, n := range apis {
		fmt.Fprintf(&servers, "  server %s %s check port %s\n", n.name, n.env["PLAYHEAD_HTTP_ADDR"],
			n.env["PLAYHEAD_METRICS_ADDR"][strings.LastIndexByte(n.env["PLAYHEAD_METRICS_ADDR"], ':')+1:])
	}
	// The configuration of scripts/cluster.sh. Abnormal requests are logged to stderr, which
	// the test prints if it fails.
	template, err := os.ReadFile(filepath.Join("..", "..", "scripts", "haproxy.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.NewReplacer("@FRONT@", front, "@STATS@", stats, "@SERVERS@", servers.String()).Replace(string(template))
	path := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	// -db: in the foreground, so that the test holds its pid.
	proc := binarytest.StartProcess(t, exec.Command(haproxy, "-db", "-f", path))
	lb := &binarytest.Server{
		Process: proc,
		DBURL:   apis[0].s.DBURL,
		HTTPURL: "http://" + front,
		Client:  &http.Client{Timeout: 30 * time.Second},
	}
	return lb, "http://" + stats + "/stats;csv"
}

// waitBalancerUp waits until HAProxy's statistics show server name of the api backend UP.
func waitBalancerUp(t *testing.T, lb *binarytest.Server, statsURL, name string) {
	t.Helper()
	deadline := time.Now().Add(rollingBalancerTimeout)
	last := ""
	for {
		if exited, err := lb.Exited(); exited {
			t.Fatalf("haproxy exited (%v):\n%s", err, lb.Stdout)
		}
		status, body, err := lb.Do(http.MethodGet, statsURL, "", nil)
		if err == nil && status == http.StatusOK {
			last = serverStatus(t, body, name)
			if last == "UP" {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("HAProxy does not see %s UP after %s (last status %q, err %v)", name, rollingBalancerTimeout, last, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// serverStatus returns the status column of server name of backend api in HAProxy's CSV.
func serverStatus(t *testing.T, body []byte, name string) string {
	t.Helper()
	r := csv.NewReader(strings.NewReader(strings.TrimPrefix(string(body), "# ")))
	r.FieldsPerRecord = -1
	records, err := r.ReadAll()
	if err != nil || len(records) == 0 {
		t.Fatalf("HAProxy statistics: %v\n%s", err, body)
	}
	col := map[string]int{}
	for i, h := range records[0] {
		col[h] = i
	}
	for _, rec := range records[1:] {
		if len(rec) > col["status"] && rec[col["pxname"]] == "api" && rec[col["svname"]] == name {
			return rec[col["status"]]
		}
	}
	return ""
}
