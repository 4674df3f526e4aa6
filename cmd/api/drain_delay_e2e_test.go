package main

import (
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/binarytest"
)

// TestServe_DrainDelayKeepsServingWhileNotReady: after SIGTERM, a node with
// PLAYHEAD_SHUTDOWN_DRAIN_DELAY answers 503 on /readyz and still accepts new connections and
// requests on its public port until the delay is over, so that a load balancer stops sending
// before the node stops accepting; what it accepted then is stored by the graceful stop.
func TestServe_DrainDelayKeepsServingWhileNotReady(t *testing.T) {
	// Generous: the requests below must land inside the delay on a loaded machine.
	s := binarytest.Start(t, map[string]string{"PLAYHEAD_SHUTDOWN_DRAIN_DELAY": "10s", "PLAYHEAD_SHUTDOWN_TIMEOUT": "40s"})
	admin, member := binarytest.Token(t, 1, true), binarytest.Token(t, 42, false)
	id := s.CreateMedia(t, admin, "drained")

	s.Signal(t, syscall.SIGTERM)
	deadline := time.Now().Add(binarytest.ReadyTimeout)
	for s.Ready() != http.StatusServiceUnavailable {
		if time.Now().After(deadline) {
			t.Fatalf("/readyz did not answer 503 within %s of SIGTERM", binarytest.ReadyTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A new connection, as a balancer opens, still reaches the public port.
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	resp, err := fresh.Get(s.URL("/healthz"))
	if err != nil {
		t.Fatalf("public port refused a new connection while draining: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz while draining: %d, want 200", resp.StatusCode)
	}
	s.MustDo(t, http.StatusNoContent, http.MethodPut, s.URL("/v1/playback/%d", id), member, map[string]any{"position_ms": 7000})

	if code := s.Wait(t, binarytest.ExitTimeout); code != 0 {
		t.Fatalf("exit status %d after SIGTERM, want 0", code)
	}
	stored := binarytest.StoredPositions(t, s.DBURL)
	if got := stored[binarytest.PlaybackKey{Member: 42, Media: id}]; got != 7000 {
		t.Errorf("position accepted while draining: stored %d, want 7000", got)
	}
}
