package main

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/ssetest"
	"github.com/playhead/playhead/internal/testvideo"
	"github.com/playhead/playhead/media"
)

// TestEvents_StreamFollowsAnEncodeOnAnotherNodeEndsOnStopAndResumes is the event stream through
// the real binaries: a stream held by a role=api node gets the media.playable and then the
// media.ready of an encode a role=worker node finished (the NOTIFY crosses processes); the api node's SIGTERM ends the
// stream and the node still stops cleanly (the public server does not wait on it); a new api
// node resumes from Last-Event-ID and sends the event again.
func TestEvents_StreamFollowsAnEncodeOnAnotherNodeEndsOnStopAndResumes(t *testing.T) {
	api, _, storageDir := startPipeline(t)
	startWorker(t, api, storageDir, "events-worker")
	owner, other := binarytest.Token(t, 41, false), binarytest.Token(t, 42, false)
	// The contract-checking transport, without the client's 10 s limit: a stream does not end.
	streams := &http.Client{Transport: api.Client.Transport}
	mine := ssetest.Open(t, streams, api.URL("/v1/events"), owner, "")
	theirs := ssetest.Open(t, streams, api.URL("/v1/events"), other, "")

	src := testvideo.MP4(t, t.TempDir(), testvideo.Spec{Seconds: 2, Width: 320, Height: 240, Audio: true})
	id := api.Upload(t, owner, binarytest.Upload{Path: src, FileName: "events.mp4", Title: "e2e events"})
	playable := mine.Next(t)
	if wantPlayable := (media.EventData{EventID: playable.Data.Data.EventID, MediaID: id, OwnerID: 41, Status: "PROCESSING"}); playable.Name != media.EventPlayable || playable.Data.Data != wantPlayable {
		t.Fatalf("the owner's stream got %+v first, want %s with %+v", playable, media.EventPlayable, wantPlayable)
	}
	ready := mine.Next(t)
	want := media.EventData{EventID: ready.Data.Data.EventID, MediaID: id, OwnerID: 41, Status: "READY"}
	if ready.Name != media.EventReady || ready.Data.Data != want || ready.ID != strconv.FormatInt(want.EventID, 10) {
		t.Fatalf("the owner's stream got %+v, want %s with %+v", ready, media.EventReady, want)
	}
	if mv := mediaOf(t, api, owner, id); mv.Status != "READY" {
		t.Errorf("after media.ready the media is %s, want READY", mv.Status)
	}

	api.Stop(t) // fails unless the node exits 0 within its budget
	mine.WaitEnd(t)
	theirs.WaitEnd(t)
	select {
	case e := <-theirs.Events:
		t.Errorf("another member's stream got %+v", e)
	default:
	}
	if !strings.Contains(api.Stderr.String(), "stopped cleanly") {
		t.Errorf("the api node did not stop cleanly with two streams open; stderr:\n%s", api.Stderr)
	}

	env := pipelineEnv("api", "events-api-2", storageDir, t.TempDir(), "veryfast")
	env["DATABASE_URL"] = api.DBURL
	again := binarytest.Start(t, env)
	resumed := ssetest.Open(t, &http.Client{Transport: again.Client.Transport}, again.URL("/v1/events"), owner,
		strconv.FormatInt(want.EventID-1, 10))
	if e := resumed.Next(t); e.ID != ready.ID || e.Data != ready.Data {
		t.Errorf("resumed from Last-Event-ID %d on another node: %+v, want the same event again %+v", want.EventID-1, e, ready)
	}
}
