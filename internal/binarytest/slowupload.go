package binarytest

import (
	"bufio"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// SlowUpload is a multipart upload whose client sends its headers and the start of a file,
// then one byte every tick until Stop: the slow uploader of the security tests. The server's
// answer arrives on Answer.
type SlowUpload struct {
	// Answer receives the status the server answered, or 0 when the connection ended without
	// an answer.
	Answer <-chan int

	stop chan struct{}
	once sync.Once
}

// StartSlowUpload begins an upload of a file to rawURL (http://host/v1/media) with a bearer
// token, declaring a 100 MiB body, and closes its connection when the test ends.
func StartSlowUpload(t testing.TB, rawURL, token string, tick time.Duration) *SlowUpload {
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
	// fasthttp reads the first 8 KiB of a body before it calls the handler (within the
	// server's read timeout), so the upload starts with more than that.
	preamble := fmt.Sprintf("--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"slow.mp4\"\r\nContent-Type: video/mp4\r\n\r\n%s",
		mw.Boundary(), strings.Repeat("x", 16<<10))
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s",
		u.Path, u.Host, token, mw.FormDataContentType(), 100<<20, preamble)
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
				if _, err := conn.Write([]byte("x")); err != nil {
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
