package main

import (
	"net/http"
	"syscall"
	"testing"

	"github.com/playhead/playhead/internal/binarytest"
)

// TestQuality_AGracefulStopWritesTheSums: a node that writes its playback-quality sums only
// once an hour holds those of the reports it accepted in memory, and writes them when it stops
// on SIGTERM: accepted quality is not lost to a graceful stop.
func TestQuality_AGracefulStopWritesTheSums(t *testing.T) {
	s := binarytest.Start(t, map[string]string{"PLAYHEAD_QUALITY_INTERVAL": "1h"})
	pool := s.Pool(t)
	id := s.CreateMedia(t, binarytest.Token(t, 1, true), "quality at stop")
	member := binarytest.Token(t, 7, false)
	for i, q := range []map[string]any{
		{"startup_ms": 640, "played_ms": 4000, "rendition_height": 720},
		{"played_ms": 5000, "rebuffer_count": 1, "rebuffer_ms": 900, "rendition_height": 720},
		{"played_ms": 5000, "rendition_height": 1080},
	} {
		s.MustDo(t, http.StatusNoContent, http.MethodPut, s.URL("/v1/playback/%d", id), member,
			map[string]any{"position_ms": 5000 * (i + 1), "quality": q})
	}
	sum := func(metric string) (n int64) {
		t.Helper()
		if err := pool.QueryRow(t.Context(), `SELECT coalesce(sum(value), 0) FROM media_quality WHERE media_id = $1 AND metric = $2`,
			id, metric).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := sum("played_ms"); n != 0 {
		t.Fatalf("%d ms played written before the stop with an hour's interval; the test needs none", n)
	}
	s.Signal(t, syscall.SIGTERM)
	if code := s.Wait(t, binarytest.ExitTimeout); code != 0 {
		t.Errorf("playhead exited with status %d after SIGTERM, want 0", code)
	}
	for metric, want := range map[string]int64{"sessions": 1, "startup": 1, "played_ms": 14000, "rebuffers": 1, "rebuffer_ms": 900} {
		if got := sum(metric); got != want {
			t.Errorf("after the stop, %s = %d; want %d", metric, got, want)
		}
	}
}
