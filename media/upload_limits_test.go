package media_test

import (
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/media"
)

// startSlowUpload begins a slow upload by member to rawURL (http://host/v1/media) that
// trickles its file: its preamble arrives at once, so the upload is stored from the start.
func startSlowUpload(t *testing.T, rawURL string, member int64, tick time.Duration) *binarytest.SlowUpload {
	t.Helper()
	token, err := auth.Mint([]byte(secret), member, false, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return binarytest.StartSlowUpload(t, rawURL, token, binarytest.FromFile, tick)
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

// TestUpload_ConcurrencyLimitsAndIdleTimeout: one member trickling a byte every 2 s must not
// hold 300 uploads open. A member holds at most Limits.MaxPerMember uploads
// and the node MaxTotal (429 with Retry-After beyond), and an upload that sends nothing for
// IdleTimeout is cut with 408, freeing its slot; a slow but steady one is not cut.
func TestUpload_ConcurrencyLimitsAndIdleTimeout(t *testing.T) {
	t.Parallel()
	const idle = 2 * time.Second
	s := startUploadServer(t, 1<<30, func(h *media.UploadHandler) {
		h.Limits = &media.UploadLimits{MaxPerMember: 2, MaxTotal: 4, IdleTimeout: idle}
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
	a1.Stop()
	select {
	case status := <-a1.Answer:
		if status != http.StatusRequestTimeout {
			t.Fatalf("the silent upload's answer: %d, want 408", status)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the silent upload was not cut by the idle timeout")
	}
	waitFor(t, "the silent upload's slot to free", func() bool { return inProgress(t, s.storage) == 3 })
	if resp := post(21); resp.StatusCode != http.StatusAccepted {
		t.Errorf("an upload after the member's silent one was cut: %d, want 202", resp.StatusCode)
	}
	for name, u := range map[string]*binarytest.SlowUpload{"a2": a2, "b1": b1, "b2": b2} {
		select {
		case status := <-u.Answer:
			t.Errorf("the steady upload %s was answered %d while still sending", name, status)
		default:
		}
	}
	a2.Stop()
	b1.Stop()
	b2.Stop()
	if n := s.count(t, `SELECT count(*) FROM media`); n != 1 {
		t.Errorf("%d media rows, want 1 (the one upload that finished)", n)
	}

}
