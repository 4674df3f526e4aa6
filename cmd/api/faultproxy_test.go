package main

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// faultyProxy forwards TCP connections to PostgreSQL and can delay every answer from the
// database, or hold the answers back entirely, to play a slow or unreachable database.
type faultyProxy struct {
	ln     net.Listener
	target string
	delay  atomic.Int64 // nanoseconds added before each chunk from the database
	paused atomic.Bool
	wg     sync.WaitGroup
}

func startProxy(t *testing.T, target string) *faultyProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultyProxy{ln: ln, target: target}
	p.wg.Go(p.accept)
	t.Cleanup(func() { ln.Close(); p.paused.Store(false); p.wg.Wait() })
	return p
}

func (p *faultyProxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		db, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.wg.Go(func() { _, _ = io.Copy(db, client); db.Close() })
		p.wg.Go(func() {
			defer client.Close()
			buf := make([]byte, 32<<10)
			for {
				n, err := db.Read(buf)
				for p.paused.Load() {
					time.Sleep(5 * time.Millisecond)
				}
				if d := p.delay.Load(); d > 0 {
					time.Sleep(time.Duration(d))
				}
				if n > 0 {
					if _, werr := client.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		})
	}
}
