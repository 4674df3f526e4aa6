package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/playhead/playhead/encodejobs"
	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/s3test"
	"github.com/playhead/playhead/internal/testvideo"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
)

// holdingS3Proxy forwards HTTP requests to the S3 server unchanged — the Host header too, which
// the requests' signatures cover — and, once allow uploads of output objects (PUTs under hls/)
// have passed, holds every further one until the test ends. A worker that stores its outputs
// through it stops in the middle of that, with some of them stored.
type holdingS3Proxy struct {
	URL     string
	allow   int32
	passed  atomic.Int32
	held    chan struct{} // closed when the first PUT is held
	once    sync.Once
	release chan struct{}
}

func startHoldingS3Proxy(t *testing.T, target string, allow int32) *holdingS3Proxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	forward := httputil.NewSingleHostReverseProxy(u) // keeps the request's Host header
	p := &holdingS3Proxy{allow: allow, held: make(chan struct{}), release: make(chan struct{})}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/hls/") && p.passed.Add(1) > p.allow {
			p.once.Do(func() { close(p.held) })
			select {
			case <-p.release:
			case <-r.Context().Done():
			}
			http.Error(w, "held by the test", http.StatusServiceUnavailable)
			return
		}
		forward.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { close(p.release); _ = srv.Close(); <-done })
	p.URL = "http://" + ln.Addr().String()
	return p
}

// keysUnder returns the keys of bucket that start with prefix.
func keysUnder(t *testing.T, srv *s3test.Server, bucket, prefix string) []string {
	t.Helper()
	var out []string
	for _, k := range srv.Keys(t, bucket) {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	return out
}

// waitFor polls cond until it holds, failing with what after the deadline.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool, alive ...*binarytest.Server) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		checkAlive(t, what, alive...)
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", timeout, what)
		}
		time.Sleep(pollEvery)
	}
}

// TestS3_Kill9MidUploadOfOutputsLeavesOnlyTheWinners: a worker is killed (SIGKILL) in the
// middle of storing its outputs in the bucket, and an API node in the middle of streaming an
// upload into it (an unfinished multipart upload); a killed import's download is planted too.
// The job's next attempt, on another worker, completes; after the orphan sweep the bucket holds
// the winner's outputs and the media's source, nothing else — no object under any other prefix,
// no unfinished upload — and the sweep's metrics count what it removed. The workers encode with
// PLAYHEAD_ENCODE_MODE=single, whose one job per upload has a winner that removes its losers'
// outputs; an encode group's kept renditions and a killed rendition's outputs are the orphan
// sweep's (TestChaos_MediaJobs).
func TestS3_Kill9MidUploadOfOutputsLeavesOnlyTheWinners(t *testing.T) {
	srv, bucket := s3test.Shared(t), s3test.Bucket(t)
	api := binarytest.Start(t, s3NodeEnv(t, "api", "s3-kill-api", srv, bucket))
	pool := api.Pool(t)
	proxy := startHoldingS3Proxy(t, srv.Endpoint, 2)
	envA := s3NodeEnv(t, "worker", "s3-kill-a", srv, bucket)
	envA["DATABASE_URL"] = api.DBURL
	envA["PLAYHEAD_S3_ENDPOINT"] = proxy.URL
	envA["PLAYHEAD_ENCODE_MODE"] = "single"
	a := binarytest.Start(t, envA)

	owner := binarytest.Token(t, 71, false)
	src := testvideo.MP4(t, t.TempDir(), testvideo.Spec{Seconds: 4, Width: 320, Height: 240, Audio: true})
	id := api.Upload(t, owner, binarytest.Upload{Path: src, Title: "killed mid-upload", Visibility: "PRIVATE"})
	_, _, sourceKey := mediaRow(t, pool, id)

	select {
	case <-proxy.held:
	case <-time.After(encodeTimeout):
		t.Fatalf("worker A did not start storing outputs within %s", encodeTimeout)
	}
	first := mediaJob(t, pool, id)
	loserPrefix := encodejobs.OutputPrefix(id, str(first.ClaimToken))
	stored := keysUnder(t, srv, bucket, loserPrefix)
	if len(stored) != 2 || str(first.ClaimedBy) != "s3-kill-a" {
		t.Fatalf("when A's third output upload was held: job %v, stored %q; want A's claim with 2 outputs stored", first, stored)
	}
	a.Kill(t)

	// An API node killed mid-upload: its multipart upload into uploads/ never finishes.
	envU := s3NodeEnv(t, "api", "s3-kill-upload", srv, bucket)
	envU["DATABASE_URL"] = api.DBURL
	u := binarytest.Start(t, envU)
	stall := make(chan struct{})
	defer close(stall)
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		fw, err := mw.CreateFormFile("file", "big.mp4")
		if err == nil {
			_, err = fw.Write(bytes.Repeat([]byte{1}, 20<<20)) // two 8 MiB parts go up
		}
		if err != nil {
			pw.CloseWithError(err)
			return
		}
		<-stall
		pw.CloseWithError(io.ErrUnexpectedEOF)
	}()
	req, err := http.NewRequest(http.MethodPost, u.URL("/v1/media"), pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+owner)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	uploadDone := make(chan struct{})
	go func() {
		defer close(uploadDone)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	waitFor(t, encodeTimeout, "an unfinished multipart upload of the stalled upload", func() bool {
		return len(srv.Unfinished(t, bucket)) > 0
	}, u)
	u.Kill(t)
	<-uploadDone

	// A killed import's download, stored and never recorded.
	leftover := fmt.Sprintf("uploads/ingest-%d-0123456789abcdef/source", id+1000)
	if _, err := srv.Client.PutObject(context.Background(), bucket, leftover, strings.NewReader("downloaded"), 10, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}

	// Worker B: the job's next attempt, and the orphan sweep with a short grace period.
	envB := s3NodeEnv(t, "worker", "s3-kill-b", srv, bucket)
	envB["DATABASE_URL"] = api.DBURL
	envB["PLAYHEAD_ENCODE_MODE"] = "single"
	envB["PLAYHEAD_UPLOAD_TIMEOUT"] = "1s"
	envB["PLAYHEAD_ORPHAN_GRACE"] = "4s"
	envB["PLAYHEAD_ORPHAN_SWEEP_INTERVAL"] = "300ms"
	b := binarytest.Start(t, envB)
	done := waitJob(t, pool, id, "COMPLETED by B", func(j jobRow) bool { return j.Status == string(jobqueue.StatusCompleted) },
		func(j jobRow) bool { return j.Status == string(jobqueue.StatusDead) }, api, b)
	if done.AttemptCount != 1 || done.LostCount != 1 || str(done.ClaimedBy) != "s3-kill-b" {
		t.Errorf("completed: %v, want attempt 1 still with 1 lost lease (the kill spent no attempt), by s3-kill-b", done)
	}
	v := waitMedia(t, api, owner, id, media.StatusReady)
	winnerPrefix := encodejobs.OutputPrefix(id, str(done.ClaimToken))

	// The sweep: wait until it has aborted the unfinished upload and removed the leftover,
	// then for one more whole pass.
	waitFor(t, time.Minute, "the sweep to abort the unfinished upload and remove the import's leftover", func() bool {
		return b.Metric(t, "playhead_storage_orphan_unfinished_writes_aborted_total") >= 1 &&
			b.Metric(t, "playhead_storage_orphan_objects_removed_total") >= 1
	}, b)
	passes := b.Metric(t, `playhead_storage_orphan_sweeps_total{result="ok"}`)
	waitFor(t, time.Minute, "one more orphan sweep pass", func() bool {
		return b.Metric(t, `playhead_storage_orphan_sweeps_total{result="ok"}`) >= passes+1
	}, b)

	var others []string
	for _, k := range srv.Keys(t, bucket) {
		if !strings.HasPrefix(k, winnerPrefix) && k != sourceKey {
			others = append(others, k)
		}
	}
	if len(others) > 0 {
		t.Errorf("after the sweep the bucket still holds %q besides the winner's outputs (%s) and the source", others, winnerPrefix)
	}
	if len(keysUnder(t, srv, bucket, winnerPrefix)) < 4 { // master, thumbnail, variant playlist, segment
		t.Errorf("the winner's outputs are incomplete: %q", keysUnder(t, srv, bucket, winnerPrefix))
	}
	if left := srv.Unfinished(t, bucket); len(left) > 0 {
		t.Errorf("after the sweep the bucket still has unfinished uploads of %q", left)
	}
	if n := b.Metric(t, "playhead_storage_orphan_bytes_removed_total"); n < 10 {
		t.Errorf("orphan_bytes_removed_total %v, want at least the 10 bytes of the import's leftover", n)
	}
	if status, _ := plainGet(t, api.HTTPURL+v.HLSURL); status != http.StatusOK {
		t.Errorf("the winner's playlist after the sweep: %d, want 200", status)
	}
	t.Logf("killed worker A stored %d of its outputs under %s; B won under %s; the sweep aborted %v unfinished upload(s) and removed %v object(s), %v bytes",
		len(stored), loserPrefix, winnerPrefix, b.Metric(t, "playhead_storage_orphan_unfinished_writes_aborted_total"),
		b.Metric(t, "playhead_storage_orphan_objects_removed_total"), b.Metric(t, "playhead_storage_orphan_bytes_removed_total"))
}
