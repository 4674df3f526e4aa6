// Package faultproxy is a TCP proxy for tests that injects the network's faults between a
// client (a pgx pool, a Playhead node) and a server (PostgreSQL): connection resets,
// partitions that heal, latency, and a cut right after a chosen message reached the server
// (the client never sees the answer: an ambiguous commit). Everything stays on loopback.
package faultproxy

import (
	"bytes"
	"fmt"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy forwards every connection made to Addr to the target address.
type Proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	latency atomic.Int64 // time.Duration added before each chunk the server sends
	// forwarded counts the bytes clients sent that reached the server.
	forwarded atomic.Int64

	mu     sync.Mutex
	links  map[*link]struct{}
	closed bool
	// open is closed while traffic flows; during a partition it is a fresh, open channel
	// that Heal closes.
	open   chan struct{}
	refuse bool
	cut    *cut
	// resetAt is an armed ResetAt: the link whose chunk takes forwarded to at is reset.
	resetAt *resetAt
}

type resetAt struct {
	at        int64
	partition bool
	done      chan struct{}
}

// cut is an armed CutAfter: the next client chunk containing pattern triggers it.
type cut struct {
	pattern []byte
	done    chan struct{}
}

type link struct {
	client, server net.Conn
	once           sync.Once
	// swallow, once set by the client→server pump, makes the server→client pump drop what the
	// server says and close the link after its first answer; then cutDone is closed.
	swallow atomic.Pointer[chan struct{}]
}

// Start listens on a loopback port and forwards to target (host:port).
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	open := make(chan struct{})
	close(open)
	p := &Proxy{ln: ln, target: target, links: map[*link]struct{}{}, open: open}
	p.wg.Go(p.accept)
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL returns rawURL (a PostgreSQL connection URL) with its host:port replaced by the proxy's.
func (p *Proxy) URL(rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", fmt.Errorf("faultproxy: %w", err)
	}
	u.Host = p.Addr()
	return u.String(), nil
}

// SetLatency delays every answer — each chunk the server sends — by d (0 turns it off): a slow
// database, as the client sees it.
func (p *Proxy) SetLatency(d time.Duration) { p.latency.Store(int64(d)) }

// Partition stops all traffic, on open connections and new ones alike: bytes sent are held,
// not lost, and nothing is refused, as when a network path goes away. Heal lets it flow again.
func (p *Proxy) Partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
		p.open = make(chan struct{})
	default: // already partitioned
	}
}

// Heal ends a partition.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
	default:
		close(p.open)
	}
}

// ResetAll resets every open connection (the client sees ECONNRESET). New connections are
// accepted as usual.
func (p *Proxy) ResetAll() {
	p.mu.Lock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		l.reset()
	}
}

// Refuse makes new connections be reset as soon as they are accepted (on) or served again (off).
func (p *Proxy) Refuse(on bool) {
	p.mu.Lock()
	p.refuse = on
	p.mu.Unlock()
}

// CutAfter arms a cut: the next chunk a client sends that contains pattern is forwarded to the
// server, the server's answer is read and thrown away, and the client's connection is reset.
// The server has done what the message asked; the client cannot know. The returned channel is
// closed once that happened. Arming again replaces an unfired cut.
func (p *Proxy) CutAfter(pattern []byte) <-chan struct{} {
	c := &cut{pattern: bytes.Clone(pattern), done: make(chan struct{})}
	p.mu.Lock()
	p.cut = c
	p.mu.Unlock()
	return c.done
}

// Forwarded is how many bytes clients have sent through the proxy to the server: what an
// uploading client sent in all, its retries included.
func (p *Proxy) Forwarded() int64 { return p.forwarded.Load() }

// ResetAt arms a reset: the connection whose bytes take Forwarded to n is reset right after
// they are forwarded (the client sees ECONNRESET, the server the end of its connection), as an
// upload whose network drops at that byte. The returned channel is closed once that happened.
// Arming again replaces an unfired reset.
func (p *Proxy) ResetAt(n int64) <-chan struct{} { return p.armResetAt(n, false) }

// ResetAndPartitionAt is ResetAt, and a Partition from the same moment: the client's next
// connection is accepted but its bytes are held until Heal, so the test can act on the server
// side (stop a node) before the client's retry reaches it.
func (p *Proxy) ResetAndPartitionAt(n int64) <-chan struct{} { return p.armResetAt(n, true) }

func (p *Proxy) armResetAt(n int64, partition bool) <-chan struct{} {
	r := &resetAt{at: n, partition: partition, done: make(chan struct{})}
	p.mu.Lock()
	p.resetAt = r
	p.mu.Unlock()
	return r.done
}

// Close stops accepting, closes every connection and waits for the proxy's goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.Heal()
	p.ResetAll()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.closed || p.refuse {
			p.mu.Unlock()
			resetConn(client)
			continue
		}
		p.mu.Unlock()
		p.wg.Go(func() { p.serve(client) })
	}
}

func (p *Proxy) serve(client net.Conn) {
	server, err := net.DialTimeout("tcp", p.target, 10*time.Second)
	if err != nil {
		resetConn(client)
		return
	}
	l := &link{client: client, server: server}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.reset()
		return
	}
	p.links[l] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.links, l)
		p.mu.Unlock()
	}()
	var wg sync.WaitGroup
	wg.Go(func() { p.pump(l, client, server, true) })
	wg.Go(func() { p.pump(l, server, client, false) })
	wg.Wait()
}

// pump copies from src to dst until either side fails, then closes the link.
func (p *Proxy) pump(l *link, src, dst net.Conn, fromClient bool) {
	defer l.close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.wait(fromClient) {
				return
			}
			chunk := buf[:n]
			if fromClient {
				p.armSwallow(l, chunk)
			} else if done := l.swallow.Load(); done != nil {
				// The server answered the cut message: the client never gets it.
				l.reset()
				close(*done)
				return
			}
			if _, werr := dst.Write(chunk); werr != nil {
				return
			}
			if fromClient {
				if done := p.forwardedTo(p.forwarded.Add(int64(n))); done != nil {
					l.reset()
					close(done)
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// wait holds a chunk while the proxy is partitioned and delays the server's answers. It
// returns false when the proxy closed meanwhile.
func (p *Proxy) wait(fromClient bool) bool {
	p.mu.Lock()
	open := p.open
	p.mu.Unlock()
	<-open
	if d := time.Duration(p.latency.Load()); d > 0 && !fromClient {
		time.Sleep(d)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.closed
}

// forwardedTo returns the done channel of an armed ResetAt that fires now that total bytes
// were forwarded, and disarms it; nil when none fires.
func (p *Proxy) forwardedTo(total int64) chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.resetAt
	if r == nil || total < r.at {
		return nil
	}
	p.resetAt = nil
	if r.partition {
		select {
		case <-p.open:
			p.open = make(chan struct{})
		default: // already partitioned
		}
	}
	return r.done
}

// armSwallow fires an armed cut whose pattern is in chunk: from now on the link swallows what
// the server says. It is set before the chunk is forwarded, so the answer cannot slip through.
func (p *Proxy) armSwallow(l *link, chunk []byte) {
	p.mu.Lock()
	c := p.cut
	if c == nil || !bytes.Contains(chunk, c.pattern) {
		p.mu.Unlock()
		return
	}
	p.cut = nil
	p.mu.Unlock()
	l.swallow.Store(&c.done)
}

func (l *link) close() {
	l.once.Do(func() {
		_ = l.client.Close()
		_ = l.server.Close()
	})
}

// reset closes the link with a TCP reset towards the client, as a dropped connection looks.
func (l *link) reset() {
	l.once.Do(func() {
		resetConn(l.client)
		_ = l.server.Close()
	})
}

func resetConn(c net.Conn) {
	if tcp, ok := c.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0) // close sends RST instead of FIN
	}
	_ = c.Close()
}
