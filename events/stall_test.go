package events_test

import (
	"context"
	"net"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/ssetest"
	"github.com/playhead/playhead/media"
)

// stall opens a stream for tok over a raw connection that sends the request and never reads,
// with a small receive buffer, then writes events for member: far more bytes than the kernel's
// buffers hold (a few MiB on loopback), so the stream's writer blocks.
func (s *server) stall(t *testing.T, member int64, tok string) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.baseURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := conn.(*net.TCPConn).SetReadBuffer(1024); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte("GET /v1/events HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer " + tok + "\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	reason := strings.Repeat("r", 64<<10)
	for i := range 200 { // 12.5 MiB of events
		s.announce(t, member, int64(i+1), media.OutboxFailed, map[string]any{"reason": reason})
	}
}

// waitForBlockedWriter waits until a stream's writer is blocked writing to its client: a
// goroutine in Hub.send stuck in the pipe fasthttp copies the answer from.
func waitForBlockedWriter(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(ssetest.WaitLimit)
	for {
		var dump strings.Builder
		if err := pprof.Lookup("goroutine").WriteTo(&dump, 2); err != nil {
			t.Fatal(err)
		}
		for _, g := range strings.Split(dump.String(), "\n\n") {
			if strings.Contains(g, "events.(*Hub).send") && strings.Contains(g, "fasthttputil.(*pipeConn).Write") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no stream writer blocked on its client")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestStream_CutsAClientThatStopsReading(t *testing.T) {
	// One stream per member: the stalled stream's place is free again only once it was cut.
	s := start(t, options{perMember: 1, total: 10, heartbeat: 50 * time.Millisecond, writeTimeout: time.Second})
	tok := token(t, 1, time.Hour)
	s.stall(t, 1, tok)
	s.waitOpens(t, tok, "a client that stopped reading still holds its stream: a blocked write must fail after the write timeout")
}

func TestStream_StopDoesNotWaitForAClientThatStoppedReading(t *testing.T) {
	// The write timeout (10 min here, 30 s in the binary) is longer than the stop's budget: Stop
	// must cut the blocked stream itself, or it spends the node's whole graceful stop on it.
	s := start(t, options{heartbeat: 50 * time.Millisecond, writeTimeout: 10 * time.Minute})
	s.stall(t, 1, token(t, 1, time.Hour))
	waitForBlockedWriter(t)
	ctx, cancel := context.WithTimeout(context.Background(), ssetest.WaitLimit)
	defer cancel()
	if err := s.hub.Stop(ctx); err != nil {
		t.Fatalf("Stop with a client that stopped reading: %v", err)
	}
}
