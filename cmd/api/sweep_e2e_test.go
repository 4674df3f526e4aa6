package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/playhead/playhead/encodejobs"
	"github.com/playhead/playhead/internal/binarytest"
)

// TestServe_OrphanSweepWaitsForTheLock: a worker node sweeps only while it holds the orphan
// sweep's advisory lock, so that two nodes never list and delete at once. The test holds the
// lock itself (as another node mid-pass would): the worker's passes are skipped and an orphan
// well past the grace period stays; once the lock is free, the next pass removes it.
func TestServe_OrphanSweepWaitsForTheLock(t *testing.T) {
	dir := t.TempDir()
	env := pipelineEnv("worker", "sweep-lock", dir, t.TempDir(), "ultrafast")
	env["PLAYHEAD_UPLOAD_TIMEOUT"] = "1s"
	env["PLAYHEAD_ORPHAN_GRACE"] = "4s"
	env["PLAYHEAD_ORPHAN_SWEEP_INTERVAL"] = "100ms"
	w := binarytest.Start(t, env)

	unlock, ok, err := encodejobs.OrphanSweepLock(w.Pool(t))(t.Context())
	if err != nil || !ok {
		t.Fatalf("the test could not take the sweep lock: %v %v", ok, err)
	}
	locked := true
	defer func() {
		if locked {
			unlock()
		}
	}()
	skipped := `playhead_storage_orphan_sweeps_total{result="skipped"}`
	before := w.Metric(t, skipped)

	// A killed claim's outputs, an hour old: an orphan for any pass that may sweep.
	orphan := filepath.Join(dir, "hls", "999", "killed-claim", "master.m3u8")
	if err := os.MkdirAll(filepath.Dir(orphan), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(orphan, []byte("#EXTM3U\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(orphan, old, old); err != nil {
		t.Fatal(err)
	}

	waitFor(t, time.Minute, "two sweep passes skipped while another session holds the lock", func() bool {
		return w.Metric(t, skipped) >= before+2
	}, w)
	if _, err := os.Stat(orphan); err != nil {
		t.Fatalf("a pass swept while another session held the lock: %v", err)
	}
	if n := w.Metric(t, "playhead_storage_orphan_objects_removed_total"); n != 0 {
		t.Fatalf("orphan_objects_removed_total %v while the lock was held elsewhere, want 0", n)
	}

	unlock()
	locked = false
	// The wait is on the counter, not on the file: a pass counts a group once its deletion has
	// returned, so the file is gone a moment before the counter moves, and a check of the
	// counter right after the file went can still read 0 (it did once in 22 runs).
	removed := "playhead_storage_orphan_objects_removed_total"
	waitFor(t, time.Minute, "the orphan removed and counted once the lock is free", func() bool {
		return w.Metric(t, removed) >= 1
	}, w)
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Errorf("the sweep counted a removal, but the orphan is still there: %v", err)
	}
	if n := w.Metric(t, removed); n != 1 {
		t.Errorf("orphan_objects_removed_total %v, want 1", n)
	}
}
