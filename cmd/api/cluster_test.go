package main

import (
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
)

// The cluster tests (cluster_rolling_test.go, cluster_loss_test.go): the topology
// of scripts/cluster.sh started by the test itself, every process real and on loopback.
const (
	clusterAPINodes    = 3
	clusterWorkerNodes = 2
	// A stopping api node keeps serving this long with /readyz at 503 (as scripts/cluster.sh):
	// HAProxy checks every 500 ms and takes a node out after 2 failures, so it stops sending
	// before the node stops accepting.
	clusterDrainDelay = "3s"
	// clusterBalancerTimeout bounds the wait for HAProxy to see a node UP or DOWN.
	clusterBalancerTimeout = time.Minute
)

// clusterNode is one playhead serve of a cluster, restarted on the same ports.
type clusterNode struct {
	name string
	env  map[string]string
	s    *binarytest.Server
	// released counts the jobs the node's stopped processes gave back on their graceful stop.
	released int
}

// restart stops the node with SIGTERM, fails the test unless it exits 0, and starts it again
// with the same environment (so the same ports), waiting until its /readyz answers 200.
func (n *clusterNode) restart(t *testing.T) {
	t.Helper()
	n.s.Signal(t, syscall.SIGTERM)
	if code := n.s.Wait(t, binarytest.ExitTimeout); code != 0 {
		t.Fatalf("%s exited with status %d after SIGTERM, want 0; stderr:\n%s", n.name, code, n.s.Stderr)
	}
	n.released += strings.Count(n.s.Stderr.String(), "job released for another node")
	n.s = binarytest.Start(t, n.env)
}

// cluster is HAProxy in front of clusterAPINodes api nodes, and clusterWorkerNodes worker
// nodes, on one database and one storage directory.
type cluster struct {
	apis, workers []*clusterNode
	lb            *binarytest.Server // HAProxy; its HTTPURL is the balancer
	statsURL      string             // HAProxy's statistics as CSV
	dbURL         string
}

// startCluster starts the cluster with HAProxy seeing every api node UP. Every node has a
// drain delay and a 1 s flush interval, and production's job lease and rate limit unless
// tune (which may be nil) changes a node's environment: a job run twice because a starved
// heartbeat let its lease run out, or a report refused 429, is counted, not configured away.
func startCluster(t *testing.T, tune func(role string, env map[string]string)) *cluster {
	t.Helper()
	haproxy, err := exec.LookPath("haproxy")
	if err != nil {
		t.Fatal("haproxy is missing: make system-deps (or apt-get install haproxy)")
	}
	storageDir := t.TempDir()
	c := &cluster{}
	node := func(role, name string) *clusterNode {
		env := pipelineEnv(role, name, storageDir, t.TempDir(), "veryfast")
		env["PLAYHEAD_HTTP_ADDR"] = binarytest.FreeAddr(t)
		env["PLAYHEAD_METRICS_ADDR"] = binarytest.FreeAddr(t)
		env["PLAYHEAD_SHUTDOWN_DRAIN_DELAY"] = clusterDrainDelay
		env["PLAYHEAD_FLUSH_INTERVAL"] = "1s"
		delete(env, "PLAYHEAD_JOB_LEASE")
		delete(env, "PLAYHEAD_PUT_RATE")
		if tune != nil {
			tune(role, env)
		}
		if c.dbURL != "" {
			env["DATABASE_URL"] = c.dbURL
		}
		n := &clusterNode{name: name, env: env, s: binarytest.Start(t, env)}
		// Every node and every restart joins the first node's database.
		c.dbURL = n.s.DBURL
		n.env["DATABASE_URL"] = c.dbURL
		return n
	}
	for i := 1; i <= clusterAPINodes; i++ {
		c.apis = append(c.apis, node("api", fmt.Sprintf("api%d", i)))
	}
	for i := 1; i <= clusterWorkerNodes; i++ {
		c.workers = append(c.workers, node("worker", fmt.Sprintf("worker%d", i)))
	}
	c.lb, c.statsURL = startHAProxy(t, haproxy, c.apis)
	for _, n := range c.apis {
		c.waitBalancer(t, n.name, "UP")
	}
	return c
}

// stop stops every node that is still running gracefully (each must exit 0), then HAProxy.
func (c *cluster) stop(t *testing.T) {
	t.Helper()
	for _, n := range append(c.apis, c.workers...) {
		if exited, _ := n.s.Exited(); !exited {
			n.s.Stop(t)
		}
	}
	// SIGUSR1 is HAProxy's graceful stop (SIGTERM is its immediate one).
	c.lb.Signal(t, syscall.SIGUSR1)
	if code := c.lb.Wait(t, binarytest.ExitTimeout); code != 0 {
		t.Errorf("haproxy exited with status %d after SIGUSR1, want 0", code)
	}
}

// startHAProxy runs HAProxy in the foreground in front of apis (the configuration of
// scripts/cluster.sh) and returns it as a Server whose HTTPURL is the balancer, with the URL
// of its statistics as CSV.
func startHAProxy(t *testing.T, haproxy string, apis []*clusterNode) (*binarytest.Server, string) {
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

// waitBalancer waits until HAProxy's statistics show server name of the api backend with
// status want (UP, DOWN).
func (c *cluster) waitBalancer(t *testing.T, name, want string) {
	t.Helper()
	deadline := time.Now().Add(clusterBalancerTimeout)
	last := ""
	for {
		if exited, err := c.lb.Exited(); exited {
			t.Fatalf("haproxy exited (%v):\n%s", err, c.lb.Stdout)
		}
		status, body, err := c.lb.Do(http.MethodGet, c.statsURL, "", nil)
		if err == nil && status == http.StatusOK {
			last = serverStatus(t, body, name)
			if last == want {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("HAProxy does not see %s %s after %s (last status %q, err %v)", name, want, clusterBalancerTimeout, last, err)
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

// failedRequests counts a load's reports not answered 204, reads not answered 200 or 404, and
// requests without an answer.
func failedRequests(c binarytest.LoadCounts) int {
	failed := c.TransportErrors
	for status, n := range c.Reports {
		if status != http.StatusNoContent {
			failed += n
		}
	}
	for status, n := range c.Reads {
		if status != http.StatusOK && status != http.StatusNotFound {
			failed += n
		}
	}
	return failed
}
