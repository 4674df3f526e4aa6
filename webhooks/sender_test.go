package webhooks

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// hostileReceiver listens on loopback and hands every connection, after reading the request's
// head, to answer. It returns the URL to send to.
func hostileReceiver(t *testing.T, answer func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				r := bufio.NewReader(conn)
				for { // the request's head; its body is left unread
					line, err := r.ReadString('\n')
					if err != nil || line == "\r\n" {
						break
					}
				}
				answer(conn)
			}()
		}
	}()
	return "http://" + ln.Addr().String() + "/hook"
}

// sendWithin runs one send to url and returns its error; the test fails if send has not
// returned by a deadline far beyond the sender's timeout (a deadline for failure: a sender
// with no bound never returns).
func sendWithin(t *testing.T, s *Sender, url string) error {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.send(req) }()
	select {
	case err := <-done:
		return err
	case <-time.After(2 * time.Minute):
		t.Fatal("send never returned: the receiver holds the sender")
		return nil
	}
}

// A receiver that never answers, or trickles its answer's head or body, cannot hold a sender
// beyond its timeout: the attempt ends (an error for a head never finished).
func TestSender_BoundsSlowReceivers(t *testing.T) {
	trickle := func(conn net.Conn, head string, each string) {
		if _, err := io.WriteString(conn, head); err != nil {
			return
		}
		for {
			if _, err := io.WriteString(conn, each); err != nil {
				return // the sender hung up
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, tc := range []struct {
		name    string
		answer  func(net.Conn)
		wantErr bool
	}{
		{"silent", func(conn net.Conn) { _, _ = io.Copy(io.Discard, conn) }, true},
		{"trickled head", func(conn net.Conn) { trickle(conn, "HTTP/1.1 200 OK\r\nX-Slow: ", "a") }, true},
		// The head is complete and says 2xx: whether the attempt counts as delivered is not
		// the point; that it ends is.
		{"trickled body", func(conn net.Conn) { trickle(conn, "HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n", "a") }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSender(SenderConfig{AllowPrivate: true, Timeout: 500 * time.Millisecond})
			err := sendWithin(t, s, hostileReceiver(t, tc.answer))
			if tc.wantErr && err == nil {
				t.Fatal("send = nil, want a timeout error")
			}
		})
	}
}

// A receiver that answers a huge body has a bounded part of it read: the sender hangs up after
// MaxResponseBytes, so the receiver cannot write it all.
func TestSender_BoundsHugeBody(t *testing.T) {
	const bodyBytes = 256 << 20 // far beyond any socket buffer
	wroteAll := make(chan bool, 1)
	url := hostileReceiver(t, func(conn net.Conn) {
		if _, err := fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", bodyBytes); err != nil {
			wroteAll <- false
			return
		}
		chunk := make([]byte, 64<<10)
		for written := 0; written < bodyBytes; written += len(chunk) {
			if _, err := conn.Write(chunk); err != nil {
				wroteAll <- false
				return
			}
		}
		wroteAll <- true
	})
	s := NewSender(SenderConfig{AllowPrivate: true, Timeout: 10 * time.Minute})
	if err := sendWithin(t, s, url); err != nil {
		t.Fatalf("send = %v, want nil (the answer is 200)", err)
	}
	if <-wroteAll {
		t.Fatalf("the receiver wrote all %d bytes: the sender read the whole body", bodyBytes)
	}
}

// A receiver that answers huge headers is refused: the sender does not read them into memory.
func TestSender_RefusesHugeHeaders(t *testing.T) {
	url := hostileReceiver(t, func(conn net.Conn) {
		_, _ = fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nX-Huge: %s\r\nContent-Length: 0\r\n\r\n", strings.Repeat("a", 2<<20))
	})
	s := NewSender(SenderConfig{AllowPrivate: true})
	if err := sendWithin(t, s, url); err == nil {
		t.Fatal("send = nil, want an error for a 2 MiB header")
	}
}

// A receiver that redirects is not followed (the redirect could lead anywhere, a private
// address included): the attempt is a rejection, retried later, and the target is not reached.
func TestSender_DoesNotFollowRedirects(t *testing.T) {
	var hit atomic.Bool
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hit.Store(true) }))
	defer target.Close()
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL, http.StatusTemporaryRedirect)
	}))
	defer redirector.Close()
	s := NewSender(SenderConfig{AllowPrivate: true})
	if err := sendWithin(t, s, redirector.URL); !errors.Is(err, errRejected) {
		t.Fatalf("send = %v, want errRejected", err)
	}
	if hit.Load() {
		t.Fatal("the redirect's target was reached")
	}
}
