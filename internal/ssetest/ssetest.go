// Package ssetest reads a Server-Sent Events stream (GET /v1/events) in tests: it opens the
// stream, parses the wire format in a goroutine and hands out events and heartbeats.
package ssetest

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/media"
)

// WaitLimit is how long a test waits for something it expects before it fails.
const WaitLimit = 60 * time.Second

// Event is one SSE event as read off the wire.
type Event struct {
	ID, Name string
	Data     media.Event
	// Raw is the data line as sent: what Data cannot hold of an event that is not a media
	// event's (a completion's).
	Raw string
}

// Stream is an open stream read by a goroutine.
type Stream struct {
	Resp *http.Response
	// Events and Comments (heartbeats) carry what was read.
	Events   chan Event
	Comments chan struct{}
	// Ended is closed when the body ends; Err says how.
	Ended chan struct{}
	Err   error
}

// Get sends GET url with token (none if empty) and Last-Event-ID lastID (none if empty).
func Get(t testing.TB, client *http.Client, url, token, lastID string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// Open opens the stream at url and requires a 200 text/event-stream. The stream is closed when
// the test ends. client must have no overall timeout: a stream does not end.
func Open(t testing.TB, client *http.Client, url, token, lastID string) *Stream {
	t.Helper()
	resp := Get(t, client, url, token, lastID)
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q, want text/event-stream", ct)
	}
	st := &Stream{Resp: resp, Events: make(chan Event, 100), Comments: make(chan struct{}, 100), Ended: make(chan struct{})}
	go st.read()
	t.Cleanup(func() { resp.Body.Close(); <-st.Ended })
	return st
}

// read parses the wire format: fields until a blank line make an event; lines starting with
// ':' are comments.
func (st *Stream) read() {
	defer close(st.Ended)
	r := bufio.NewReader(st.Resp.Body)
	var e Event
	var data string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			st.Err = err
			return
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if data != "" {
				if err := json.Unmarshal([]byte(data), &e.Data); err != nil {
					st.Err = err
					return
				}
				e.Raw = data
				st.Events <- e
			}
			e, data = Event{}, ""
		case strings.HasPrefix(line, ":"):
			select {
			case st.Comments <- struct{}{}:
			default: // nobody counts them
			}
		case strings.HasPrefix(line, "id: "):
			e.ID = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			e.Name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		}
	}
}

// Next returns the next event, failing the test if the stream ends or none comes.
func (st *Stream) Next(t testing.TB) Event {
	t.Helper()
	select {
	case e := <-st.Events:
		return e
	case <-st.Ended:
		t.Fatalf("the stream ended (%v) before an event", st.Err)
	case <-time.After(WaitLimit):
		t.Fatal("no event arrived")
	}
	return Event{}
}

// WaitEnd waits for the server to end the stream.
func (st *Stream) WaitEnd(t testing.TB) {
	t.Helper()
	select {
	case <-st.Ended:
	case <-time.After(WaitLimit):
		t.Fatal("the stream did not end")
	}
}
