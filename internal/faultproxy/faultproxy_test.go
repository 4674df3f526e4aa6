package faultproxy_test

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/playhead/playhead/internal/faultproxy"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echoServer echoes every connection on loopback and reports each chunk it receives.
func echoServer(t *testing.T) (addr string, received <-chan []byte) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan []byte, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 1024)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						got <- bytes.Clone(buf[:n])
						if _, err := c.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String(), got
}

func start(t *testing.T, target string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.Start(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func dial(t *testing.T, p *faultproxy.Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func roundTrip(t *testing.T, c net.Conn, msg string) (string, error) {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	buf := make([]byte, len(msg))
	_, err := io.ReadFull(c, buf)
	return string(buf), err
}

func TestProxy_Forwards(t *testing.T) {
	addr, _ := echoServer(t)
	c := dial(t, start(t, addr))
	if got, err := roundTrip(t, c, "hello"); err != nil || got != "hello" {
		t.Fatalf("echo through the proxy = %q, %v", got, err)
	}
}

func TestProxy_ResetAllAndRefuse(t *testing.T) {
	addr, _ := echoServer(t)
	p := start(t, addr)
	c := dial(t, p)
	if _, err := roundTrip(t, c, "x"); err != nil {
		t.Fatal(err)
	}
	p.ResetAll()
	if _, err := io.ReadFull(c, make([]byte, 1)); err == nil {
		t.Fatal("a reset connection still reads")
	}
	p.Refuse(true)
	// The reset may come before or after the dial returns.
	if refused, err := net.Dial("tcp", p.Addr()); err == nil {
		defer refused.Close()
		if _, err := roundTrip(t, refused, "y"); err == nil {
			t.Fatal("a connection made while refusing was served")
		}
	}
	p.Refuse(false)
	if got, err := roundTrip(t, dial(t, p), "z"); err != nil || got != "z" {
		t.Fatalf("after Refuse(false): %q, %v", got, err)
	}
}

// A partition holds bytes (nothing is lost, nothing refused) until Heal.
func TestProxy_PartitionHoldsUntilHeal(t *testing.T) {
	addr, received := echoServer(t)
	p := start(t, addr)
	c := dial(t, p)
	p.Partition()
	if _, err := c.Write([]byte("held")); err != nil {
		t.Fatal(err)
	}
	// A negative check cannot wait for a condition; a short read deadline shows that nothing
	// came through while partitioned (a broken proxy answers within microseconds on loopback).
	_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, _ := c.Read(make([]byte, 8)); n != 0 {
		t.Fatal("data crossed a partition")
	}
	select {
	case b := <-received:
		t.Fatalf("the server received %q during the partition", b)
	default:
	}
	_ = c.SetReadDeadline(time.Time{})
	p.Heal()
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "held" {
		t.Fatalf("after Heal: %q, %v", buf, err)
	}
}

// CutAfter lets the message reach the server and resets the client before the answer.
func TestProxy_CutAfter(t *testing.T) {
	addr, received := echoServer(t)
	p := start(t, addr)
	c := dial(t, p)
	if _, err := roundTrip(t, c, "before"); err != nil {
		t.Fatal(err)
	}
	<-received
	cut := p.CutAfter([]byte("COMMIT"))
	if _, err := c.Write([]byte("COMMIT")); err != nil {
		t.Fatal(err)
	}
	if got := <-received; string(got) != "COMMIT" {
		t.Fatalf("the server received %q, want the cut message", got)
	}
	<-cut
	if n, err := io.ReadFull(c, make([]byte, 6)); err == nil || n != 0 {
		t.Fatalf("the client read %d bytes of the answer (err %v), want a reset and nothing", n, err)
	}
}

// ResetAt resets the connection whose bytes reach its count: the bytes before it were
// forwarded and counted, the client's next read fails, and a new connection is served.
func TestProxy_ResetAt(t *testing.T) {
	addr, _ := echoServer(t)
	p := start(t, addr)
	c := dial(t, p)
	if _, err := roundTrip(t, c, "12345"); err != nil {
		t.Fatal(err)
	}
	done := p.ResetAt(8)
	select {
	case <-done:
		t.Fatal("ResetAt fired before its byte was sent")
	default:
	}
	if _, err := c.Write([]byte("abcdef")); err != nil { // bytes 6 to 11: the 8th is among them
		t.Fatal(err)
	}
	<-done
	if _, err := io.ReadAll(c); err == nil {
		t.Error("the connection that carried the byte was not reset")
	}
	if got := p.Forwarded(); got != 11 {
		t.Errorf("Forwarded = %d, want 11", got)
	}
	if got, err := roundTrip(t, dial(t, p), "z"); err != nil || got != "z" {
		t.Fatalf("a new connection after the reset: %q, %v", got, err)
	}
}

// ResetAndPartitionAt resets like ResetAt and holds what a new connection sends until Heal.
func TestProxy_ResetAndPartitionAt(t *testing.T) {
	addr, received := echoServer(t)
	p := start(t, addr)
	c := dial(t, p)
	done := p.ResetAndPartitionAt(3)
	if _, err := c.Write([]byte("abc")); err != nil {
		t.Fatal(err)
	}
	<-done
	<-received // "abc" reached the server before the reset
	again := dial(t, p)
	if _, err := again.Write([]byte("held")); err != nil {
		t.Fatal(err)
	}
	select {
	case b := <-received:
		t.Fatalf("the server got %q during the partition", b)
	case <-time.After(100 * time.Millisecond):
	}
	p.Heal()
	buf := make([]byte, 4)
	if _, err := io.ReadFull(again, buf); err != nil || string(buf) != "held" {
		t.Fatalf("after Heal: %q, %v", buf, err)
	}
}
