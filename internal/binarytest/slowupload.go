package binarytest

import (
	"bufio"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"
)

// SlowUpload is a multipart upload whose client sends its headers and then its body one byte
// every tick until Stop: the slow uploader of the security tests. The server's answer arrives
// on Answer.
type SlowUpload struct {
	// Answer receives the status the server answered, or 0 when the connection ended without
	// an answer.
	Answer <-chan int

	stop chan struct{}
	once sync.Once
}

// Trickle says where a SlowUpload starts sending one byte per tick.
type Trickle int

const (
	// FromFirstByte trickles the whole body: after the headers, nothing but one byte per
	// tick, the multipart preamble included (about 150 ticks before the file's first byte).
	// The upload limits must hold against it from the first byte.
	FromFirstByte Trickle = iota
	// FromFile sends the multipart preamble with the headers, then trickles the file, so that
	// the server starts storing the upload (its temporary file appears) as soon as it takes it.
	FromFile
)

// StartSlowUpload begins an upload of a file to rawURL (http://host/v1/media) with a bearer
// token, declaring a 100 MiB body, trickled from where from says, and closes its connection
// when the test ends.
func StartSlowUpload(t testing.TB, rawURL, token string, from Trickle, tick time.Duration) *SlowUpload {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	mw := multipart.NewWriter(io.Discard)
	preamble := fmt.Sprintf("--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"slow.mp4\"\r\nContent-Type: video/mp4\r\n\r\n",
		mw.Boundary())
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n",
		u.Path, u.Host, token, mw.FormDataContentType(), 100<<20)
	trickled := []byte(preamble)
	if from == FromFile {
		_, _ = io.WriteString(conn, preamble)
		trickled = nil
	}
	answer := make(chan int, 1)
	s := &SlowUpload{Answer: answer, stop: make(chan struct{})}
	go func() {
		ticker := time.NewTicker(tick)
		defer ticker.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-ticker.C:
				next := []byte("x") // the file
				if len(trickled) > 0 {
					next, trickled = trickled[:1], trickled[1:]
				}
				if _, err := conn.Write(next); err != nil {
					return
				}
			}
		}
	}()
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			answer <- 0
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		answer <- resp.StatusCode
	}()
	return s
}

// Stop ends the trickle: the upload goes silent, its connection stays open.
func (s *SlowUpload) Stop() { s.once.Do(func() { close(s.stop) }) }
