package media_test

import (
	"bufio"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/media"
)

// slowUpload is an upload whose client sends its headers and the start of the file, then one
// byte every tick until told to stop, and reads the server's answer.
type slowUpload struct {
	conn   net.Conn
	stop   chan struct{}
	answer chan *http.Response
}

// startSlowUpload begins an upload by member to rawURL (http://host/v1/media).
func startSlowUpload(t *testing.T, rawURL string, member int64, tick time.Duration) *slowUpload {
	t.Helper()
	u, _ := url.Parse(rawURL)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	token, err := auth.Mint([]byte(secret), member, false, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	mw := multipart.NewWriter(io.Discard)
	// fasthttp reads the first 8 KiB of a body before it calls the handler (within the server's
	// read timeout), so the upload starts with more than that.
	preamble := fmt.Sprintf("--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"slow.mp4\"\r\nContent-Type: video/mp4\r\n\r\n%s",
		mw.Boundary(), strings.Repeat("x", 16<<10))
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s",
		u.Path, u.Host, token, mw.FormDataContentType(), 1<<20, preamble)
	s := &slowUpload{conn: conn, stop: make(chan struct{}), answer: make(chan *http.Response, 1)}
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
			close(s.answer)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		s.answer <- resp
	}()
	return s
}

// inProgress counts the uploads the server is writing to storage (their temporary files).
func inProgress(t *testing.T, dir string) int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "uploads", "*", ".put-*"))
	if err != nil {
		t.Fatal(err)
	}
	return len(files)
}

// TestUpload_ConcurrencyLimitsAndIdleTimeout is finding 4 of issue 11: one member held 300
// uploads open by trickling a byte every 2 s. Now a member holds at most MaxPerMember uploads
// and the node MaxTotal (429 with Retry-After beyond), and an upload that sends nothing for
// IdleTimeout is cut with 408, freeing its slot; a slow but steady one is not cut.
func TestUpload_ConcurrencyLimitsAndIdleTimeout(t *testing.T) {
	t.Parallel()
	const idle = 2 * time.Second
	s := startUploadServer(t, 1<<30, func(h *media.UploadHandler) {
		h.MaxPerMember, h.MaxTotal, h.IdleTimeout = 2, 4, idle
	})
	tick := idle / 10 // far more often than the idle timeout: never idle
	a1 := startSlowUpload(t, s.url, 21, tick)
	a2 := startSlowUpload(t, s.url, 21, tick)
	b1 := startSlowUpload(t, s.url, 22, tick)
	waitFor(t, "three uploads in progress", func() bool { return inProgress(t, s.storage) == 3 })

	post := func(member int64) *http.Response {
		token, _ := auth.Mint([]byte(secret), member, false, time.Hour)
		ct, body := multipartBody(t, map[string]string{"title": "quick"}, []byte("a small file"))
		req, _ := http.NewRequest(http.MethodPost, s.url, body)
		req.Header.Set("Content-Type", ct)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	// The node has room for a fourth upload, but not member 21.
	if resp := post(21); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Errorf("a third upload of a member holding two: %d Retry-After %q, want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	// Member 22 takes the node's fourth slot: now nobody may start one.
	b2 := startSlowUpload(t, s.url, 22, tick)
	waitFor(t, "four uploads in progress", func() bool { return inProgress(t, s.storage) == 4 })
	if resp := post(23); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Errorf("an upload while the node holds its total: %d Retry-After %q, want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}

	// a1 goes silent: cut with 408 after the idle timeout; its slot frees, so member 21 may
	// upload again. a2, b1 and b2 keep trickling and are not cut.
	close(a1.stop)
	select {
	case resp, ok := <-a1.answer:
		if !ok || resp.StatusCode != http.StatusRequestTimeout {
			t.Fatalf("the silent upload's answer: %v (ok %v), want 408", resp, ok)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the silent upload was not cut by the idle timeout")
	}
	waitFor(t, "the silent upload's slot to free", func() bool { return inProgress(t, s.storage) == 3 })
	if resp := post(21); resp.StatusCode != http.StatusAccepted {
		t.Errorf("an upload after the member's silent one was cut: %d, want 202", resp.StatusCode)
	}
	for name, u := range map[string]*slowUpload{"a2": a2, "b1": b1, "b2": b2} {
		select {
		case resp := <-u.answer:
			t.Errorf("the steady upload %s was answered %v while still sending", name, resp)
		default:
		}
	}
	close(a2.stop)
	close(b1.stop)
	close(b2.stop)
	if n := s.count(t, `SELECT count(*) FROM media`); n != 1 {
		t.Errorf("%d media rows, want 1 (the one upload that finished)", n)
	}

}
