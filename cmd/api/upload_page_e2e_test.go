package main

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/testvideo"
	"github.com/playhead/playhead/media"
)

// uploadEvent is one line of web/e2e/upload.mjs.
type uploadEvent struct {
	Event              string   `json:"event"`
	Message            string   `json:"message"`
	Held               int      `json:"held"`
	Paused             string   `json:"paused"`
	PauseLabel         string   `json:"pauseLabel"`
	Note               string   `json:"note"`
	NoteHiddenAfter    bool     `json:"noteHiddenAfter"`
	Status             string   `json:"status"`
	StatusText         string   `json:"statusText"`
	WatchHref          string   `json:"watchHref"`
	PatchesAfterReload []int64  `json:"patchesAfterReload"`
	PatchesBefore      []int64  `json:"patchesBefore"`
	Violations         []string `json:"violations"`
	Problems           []string `json:"problems"`
}

// pageChunk is the page's PATCH size (CHUNK_BYTES in web/static/js/home.mjs).
const pageChunk = 8 << 20

// TestUploadPage_InterruptedReloadedResumesInChromium: in Chromium, the upload form's resumable
// upload loses its network after the first 8 MiB (the page's later PATCHes are held, never
// answered); it is paused and resumed, then the page is reloaded. The reloaded page says how
// far the upload got, and with the file chosen again it goes on from the offset the server
// holds (not from 0) and ends READY; the stored source is the file. axe-core finds no violation
// on the page paused, unfinished after the reload, and READY.
func TestUploadPage_InterruptedReloadedResumesInChromium(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	node := requireBrowser(t, root)
	storageDir := t.TempDir()
	s := binarytest.Start(t, pipelineEnv("all", "e2e-upload", storageDir, t.TempDir(), "ultrafast"))
	const member = 93
	token := binarytest.Token(t, member, false)
	const size = 20 << 20 // three PATCHes of the page: 8, 8 and 4 MiB
	video := testvideo.Padded(t, t.TempDir(), testvideo.Spec{Seconds: 4, Width: 320, Height: 240}, size, 93)
	script := startBrowserScript(t, root, node, "upload.mjs", "PLAYHEAD_URL="+s.HTTPURL, "PLAYHEAD_TOKEN="+token, "PLAYHEAD_VIDEO="+video)

	pool := s.Pool(t)
	serverOffset := int64(-1) // the upload's offset while the page's PATCHes were held
	var done, failed *uploadEvent
	for {
		var ev uploadEvent
		if !script.next(t, &ev) {
			break
		}
		switch ev.Event {
		case "interrupted":
			if err := pool.QueryRow(t.Context(), `SELECT upload_offset FROM uploads WHERE owner_id = $1`, member).Scan(&serverOffset); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(ev.Paused, "Paused at") || ev.PauseLabel != "Resume" {
				t.Errorf("paused, the page says %q with the button %q; want \"Paused at …\" and Resume", ev.Paused, ev.PauseLabel)
			}
		case "done":
			done = &ev
		case "error":
			failed = &ev
		}
	}
	if _, err := script.wait(); err != nil || failed != nil || done == nil {
		t.Fatalf("upload.mjs: %v %+v", err, failed)
	}
	if serverOffset != pageChunk {
		t.Fatalf("while the page's PATCHes were held the server had %d bytes, want its first request's %d", serverOffset, pageChunk)
	}
	if want := "stopped at 40%"; !strings.Contains(done.Note, want) || !done.NoteHiddenAfter {
		t.Errorf("after the reload the page said %q (hidden after the upload: %v), want it to say %q, then hide", done.Note, done.NoteHiddenAfter, want)
	}
	// Not one byte the server had was sent again.
	if want := []int64{serverOffset, 2 * pageChunk}; !slices.Equal(done.PatchesAfterReload, want) {
		t.Errorf("after the reload the page sent PATCHes at offsets %v, want %v", done.PatchesAfterReload, want)
	}
	if done.Status != "READY" {
		t.Fatalf("the page ended %s: %s", done.Status, done.StatusText)
	}
	id, err := strconv.ParseInt(strings.TrimPrefix(done.WatchHref, "/watch/"), 10, 64)
	if err != nil {
		t.Fatalf("the page's watch link %q", done.WatchHref)
	}
	if mv := mediaOf(t, s, token, id); mv.Status != string(media.StatusReady) {
		t.Errorf("media %d is %s, want READY", id, mv.Status)
	}
	_, _, source := mediaRow(t, pool, id)
	stored, err := os.ReadFile(filepath.Join(storageDir, filepath.FromSlash(source)))
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(video)
	if err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(stored) != sha256.Sum256(file) {
		t.Errorf("the stored source (%d bytes) is not the file (%d)", len(stored), len(file))
	}
	for _, v := range done.Violations {
		t.Errorf("axe-core: %s", v)
	}
	for _, p := range done.Problems {
		t.Errorf("the page reported: %s", p)
	}
}
