package main

import (
	"crypto/sha256"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/minio/minio-go/v7"

	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/faultproxy"
	"github.com/playhead/playhead/internal/s3test"
	"github.com/playhead/playhead/internal/testvideo"
	"github.com/playhead/playhead/media"
)

// tusClusterFileSize is the size of TestTus_ClientResumesAcrossNodesThroughCuts's file,
// 300 MiB. The video in it is 4 s of 320×240 and the rest a "free" box of random bytes
// (testvideo.Padded), so that the upload is large while the encode to READY costs seconds. On
// this machine (2 cores, loopback) one storage's run takes about 30 s; both about a minute of
// make test.
const tusClusterFileSize = 300 << 20

// tusEvent is one line of web/e2e/tus-upload.mjs.
type tusEvent struct {
	Event   string `json:"event"`
	URL     string `json:"url"`
	MediaID int64  `json:"mediaID"`
	Status  int    `json:"status"`
	Message string `json:"message"`
	Answers []struct {
		Method   string `json:"method"`
		Status   int    `json:"status"`
		ServedBy string `json:"servedBy"`
		Offset   string `json:"offset"`
	} `json:"answers"`
}

// TestTus_ClientResumesAcrossNodesThroughCuts: the real tus client (tus-js-client in Node)
// uploads a 300 MiB video through a fault proxy and HAProxy to two Playhead nodes. Its transfer
// is cut three times at random points by the proxy, which resets the connection; at the second,
// the node that was receiving the upload is killed with SIGKILL too, so the client resumes on
// the other node (the only one left). Each time the client resumes from the offset the server
// holds. The media ends READY, the client sent at most 1.1 × the file in all, and the stored
// source's sha256 is the file's. On local storage and on S3 (SeaweedFS).
func TestTus_ClientResumesAcrossNodesThroughCuts(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	node := requireTusClient(t, root)
	haproxy, err := exec.LookPath("haproxy")
	if err != nil {
		t.Fatal("haproxy is missing: make system-deps (or apt-get install haproxy)")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d (the file's bytes and the cut points)", seed)
	video := testvideo.Padded(t, t.TempDir(), testvideo.Spec{Seconds: 4, Width: 320, Height: 240}, tusClusterFileSize, seed)
	f, err := os.Open(video)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	sum := [32]byte(h.Sum(nil))
	rng := rand.New(rand.NewPCG(seed, seed>>1))
	for _, storage := range []string{storageLocal, storageS3} {
		t.Run(storage, func(t *testing.T) {
			// Each cut lands in its own stretch of the transfer: 5–30 %, 35–60 %, 65–90 %.
			var cuts [3]int64
			for i := range cuts {
				from := float64(i)*0.30 + 0.05
				cuts[i] = int64((from + rng.Float64()*0.25) * tusClusterFileSize)
			}
			testTusCluster(t, root, node, haproxy, storage, video, sum, cuts)
		})
	}
}

func testTusCluster(t *testing.T, root, node, haproxy, storage, video string, sum [32]byte, cuts [3]int64) {
	storageDir := t.TempDir()
	var bucket string
	if storage == storageS3 {
		bucket = s3test.Bucket(t)
	}
	var apis []*clusterNode
	dbURL := ""
	for _, name := range []string{"api1", "api2"} {
		env := pipelineEnv("all", name, storageDir, t.TempDir(), "ultrafast")
		env["PLAYHEAD_HTTP_ADDR"] = binarytest.FreeAddr(t)
		env["PLAYHEAD_METRICS_ADDR"] = binarytest.FreeAddr(t)
		if bucket != "" {
			maps.Copy(env, s3test.Shared(t).Env(bucket))
		}
		if dbURL != "" {
			env["DATABASE_URL"] = dbURL
		}
		n := &clusterNode{name: name, env: env, s: binarytest.Start(t, env)}
		dbURL = n.s.DBURL
		apis = append(apis, n)
	}
	c := &cluster{apis: apis}
	c.lb, c.statsURL = startHAProxy(t, haproxy, apis)
	for _, n := range apis {
		c.waitBalancer(t, n.name, "UP")
	}
	proxy, err := faultproxy.Start(strings.TrimPrefix(c.lb.HTTPURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()

	const member = 91
	token := binarytest.Token(t, member, false)
	script := startBrowserScript(t, root, node, "tus-upload.mjs",
		"PLAYHEAD_URL=http://"+proxy.Addr(), "PLAYHEAD_TOKEN="+token, "PLAYHEAD_VIDEO="+video, "PLAYHEAD_TITLE=Lecture over café Wi-Fi")

	// The script's events, read in the background while this goroutine makes the cuts.
	events := make(chan tusEvent, 64)
	go func() {
		defer close(events)
		for {
			var ev tusEvent
			if !script.next(t, &ev) {
				return
			}
			events <- ev
		}
	}()
	var done, failed *tusEvent
	var uploadURL string
	retries := 0
	record := func(ev tusEvent) {
		switch ev.Event {
		case "created":
			uploadURL = ev.URL
		case "retry":
			retries++
		case "done":
			done = &ev
		case "error":
			failed = &ev
		}
	}
	// reached waits until fired is closed (the transfer reached a cut) recording events;
	// false when the script ended first.
	reached := func(fired <-chan struct{}) bool {
		for {
			select {
			case <-fired:
				return true
			case ev, ok := <-events:
				if !ok {
					return false
				}
				record(ev)
			}
		}
	}
	// Every cut is a reset that also holds the client's retry (its bytes wait in the proxy)
	// until the test has looked at the server and armed the next cut: the client retries at
	// once and takes the upload's lock again, so without the hold the test could not see
	// the upload unlocked before the rest of the file had gone through (and the next cut,
	// armed late, never fired). At the second cut the node that received the upload is
	// killed (SIGKILL) before the retry may reach it, and the proxy holds the retry until
	// HAProxy sees that node down, so the client resumes on the other. The node is killed
	// once it has stored what it received (it has let go of the upload's lock): a kill in
	// mid-stream loses what is in its buffers and in the kernel's (up to 35 MB with S3 on
	// this machine), which is the network's doing, not a resume's.
	var victim string
	cut := 0
	storedAtCut := map[string]float64{}
	if reached(proxy.ResetAndPartitionAt(cuts[0])) {
		cut = 1
		waitUnlocked(t, apis[0].s, uploadURL) // what the node received before the cut is counted
		for _, n := range apis {
			storedAtCut[n.name] = n.s.Metric(t, "playhead_tus_bytes_received_total")
		}
	}
	second := proxy.ResetAndPartitionAt(cuts[1])
	proxy.Heal()
	if cut == 1 && reached(second) {
		cut = 2
		waitUnlocked(t, apis[0].s, uploadURL)
		var receiver *clusterNode
		most := 0.0
		for _, n := range apis {
			if grew := n.s.Metric(t, "playhead_tus_bytes_received_total") - storedAtCut[n.name]; grew > most {
				receiver, most = n, grew
			}
		}
		if receiver != nil {
			victim = receiver.name
			receiver.s.Kill(t)
			c.waitBalancer(t, receiver.name, "DOWN")
		}
	}
	third := proxy.ResetAt(cuts[2])
	proxy.Heal()
	if cut == 2 && reached(third) {
		cut = 3
	}
	for ev := range events {
		record(ev)
	}
	if _, err := script.wait(); err != nil || failed != nil || done == nil {
		t.Fatalf("tus-upload.mjs: %v %+v", err, failed)
	}
	if cut != 3 || victim == "" {
		t.Fatalf("the transfer ended after %d of the 3 cuts (%v), with node %q killed", cut, cuts, victim)
	}
	sent := proxy.Forwarded()
	t.Logf("cuts at %v bytes (the second by killing %s); %d retries; %d bytes sent for a %d-byte file (%.3f×)",
		cuts, victim, retries, sent, tusClusterFileSize, float64(sent)/tusClusterFileSize)
	var served []string
	for _, a := range done.Answers {
		served = append(served, a.Method+" "+strconv.Itoa(a.Status)+" "+a.ServedBy+" "+a.Offset)
	}
	t.Logf("answers the client got: %s", strings.Join(served, "; "))
	if retries < 3 {
		t.Errorf("the client retried %d times, want at least one per cut (3)", retries)
	}
	if sent > tusClusterFileSize*11/10 {
		t.Errorf("the client sent %d bytes, more than 1.1 × the file's %d", sent, tusClusterFileSize)
	}
	// The upload stored bytes on both nodes: it went on on the node it was not on.
	for _, n := range apis {
		if n.name == victim {
			continue // its metrics died with it
		}
		if got := n.s.Metric(t, "playhead_tus_bytes_received_total"); got <= 0 || got >= tusClusterFileSize {
			t.Errorf("%s stored %v bytes of the upload; want some but not all (the rest went to %s)", n.name, got, victim)
		}
	}
	var survivor *clusterNode
	for _, n := range apis {
		if n.name != victim {
			survivor = n
		}
	}
	mv := waitMedia(t, survivor.s, token, done.MediaID, media.StatusReady)
	if mv.Status != string(media.StatusReady) {
		t.Fatalf("media %d is %s (%s), want READY", done.MediaID, mv.Status, mv.FailureReason)
	}
	_, _, source := mediaRow(t, survivor.s.Pool(t), done.MediaID)
	var stored io.ReadCloser
	if bucket != "" {
		stored, err = s3test.Shared(t).Client.GetObject(t.Context(), bucket, source, minio.GetObjectOptions{})
	} else {
		stored, err = os.Open(filepath.Join(storageDir, filepath.FromSlash(source)))
	}
	if err != nil {
		t.Fatal(err)
	}
	defer stored.Close()
	h := sha256.New()
	n, err := io.Copy(h, stored)
	if err != nil {
		t.Fatal(err)
	}
	if [32]byte(h.Sum(nil)) != sum || n != tusClusterFileSize {
		t.Errorf("the stored source (%d bytes) is not the file", n)
	}
	proxy.Close()
	c.stop(t)
}

// waitUnlocked waits until the upload at uploadURL has no request holding its lock: its
// node stored what it received and let go.
func waitUnlocked(t *testing.T, s *binarytest.Server, uploadURL string) {
	t.Helper()
	id := uploadURL[strings.LastIndexByte(uploadURL, '/')+1:]
	pool := s.Pool(t)
	deadline := time.Now().Add(time.Minute)
	for {
		var free bool
		err := pgx.BeginFunc(t.Context(), pool, func(tx pgx.Tx) error {
			return tx.QueryRow(t.Context(), `SELECT pg_try_advisory_xact_lock(hashtextextended('tus upload ' || $1, 0))`, id).Scan(&free)
		})
		if err != nil {
			t.Fatal(err)
		}
		if free {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("upload %s still locked after a minute", id)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// requireTusClient returns node's path, failing (never skipping) when Node.js or
// tus-js-client is missing.
func requireTusClient(t *testing.T, root string) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("the tus client test needs Node.js: run `make deps` as root, or `apt-get install -y nodejs npm`")
	}
	if _, err := os.Stat(filepath.Join(root, "node_modules", "tus-js-client", "package.json")); err != nil {
		t.Fatalf("the tus client test needs tus-js-client from package-lock.json: run `make web` (or `npm ci` in %s)", root)
	}
	return node
}
