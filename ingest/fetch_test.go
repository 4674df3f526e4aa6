package ingest_test

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/playhead/playhead/ingest"
	"github.com/playhead/playhead/internal/heaptest"
)

// local returns a fetcher that may reach the loopback test servers, with short timings.
func local(cfg ingest.FetchConfig) *ingest.Fetcher {
	cfg.AllowPrivate = true
	cfg.RetryBase = cmp.Or(cfg.RetryBase, 10*time.Millisecond)
	cfg.RetryCap = cmp.Or(cfg.RetryCap, 50*time.Millisecond)
	return ingest.NewFetcher(cfg)
}

func tempFile(t *testing.T) *os.File {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "download-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func contents(t *testing.T, f *os.File) string {
	t.Helper()
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// script answers successive requests with successive handlers; the last one repeats.
func script(steps ...http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(calls.Add(1)) - 1
		steps[min(n, len(steps)-1)](w, r)
	}))
	return srv, &calls
}

func status(code int, header ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(code)
	}
}

func video(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "video/mp4")
		_, _ = io.WriteString(w, body)
	}
}

func TestFetcher_RetriesAndGivesUp(t *testing.T) {
	t.Parallel()
	t.Run("429WithRetryAfterThenOK", func(t *testing.T) {
		t.Parallel()
		srv, calls := script(status(429, "Retry-After", "1"), video("the video"))
		defer srv.Close()
		dst := tempFile(t)
		start := time.Now()
		n, err := local(ingest.FetchConfig{RetryCap: 5 * time.Second}).Fetch(context.Background(), srv.URL, "", dst)
		waited := time.Since(start)
		if err != nil || n != 9 || contents(t, dst) != "the video" || calls.Load() != 2 {
			t.Fatalf("Fetch = %d, %v after %d calls", n, err, calls.Load())
		}
		// Retry-After: 1 was honoured instead of the 10 ms jitter base. (A lower bound: the
		// fetch cannot come back sooner than it waited, however busy the machine.)
		if waited < time.Second {
			t.Fatalf("retried after %v, before the server's Retry-After of 1 s", waited)
		}
	})
	t.Run("Three503sThenOK", func(t *testing.T) {
		t.Parallel()
		srv, calls := script(status(503), status(503), status(503), video("ok"))
		defer srv.Close()
		dst := tempFile(t)
		if _, err := local(ingest.FetchConfig{}).Fetch(context.Background(), srv.URL, "", dst); err != nil || calls.Load() != 4 {
			t.Fatalf("Fetch = %v after %d calls, want success on the 4th", err, calls.Load())
		}
	})
	t.Run("404IsPermanentWithoutRetry", func(t *testing.T) {
		t.Parallel()
		srv, calls := script(status(404))
		defer srv.Close()
		_, err := local(ingest.FetchConfig{}).Fetch(context.Background(), srv.URL, "", tempFile(t))
		if !ingest.IsPermanent(err) || calls.Load() != 1 {
			t.Fatalf("Fetch(404) = %v after %d calls, want permanent after 1", err, calls.Load())
		}
	})
	t.Run("5xxForeverGivesUpAfterAttempts", func(t *testing.T) {
		t.Parallel()
		srv, calls := script(status(502))
		defer srv.Close()
		_, err := local(ingest.FetchConfig{Attempts: 3}).Fetch(context.Background(), srv.URL, "", tempFile(t))
		if err == nil || ingest.IsPermanent(err) || calls.Load() != 3 {
			t.Fatalf("Fetch(502 forever) = %v after %d calls, want a retryable error after 3", err, calls.Load())
		}
	})
	t.Run("HTMLConfirmPageThenFallback", func(t *testing.T) {
		t.Parallel()
		confirm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = io.WriteString(w, "<html>Google Drive can't scan this file for viruses.</html>")
		}))
		defer confirm.Close()
		file, calls := script(video("real bytes"))
		defer file.Close()
		links := ingest.Links{Download: confirm.URL + "/download?id={id}", Fallback: file.URL + "/uc?id={id}"}
		primary, fallback := links.Resolve("https://drive.google.com/file/d/abc123/view?usp=sharing")
		dst := tempFile(t)
		if _, err := local(ingest.FetchConfig{}).Fetch(context.Background(), primary, fallback, dst); err != nil {
			t.Fatal(err)
		}
		if contents(t, dst) != "real bytes" || calls.Load() != 1 {
			t.Fatalf("got %q from %d fallback calls", contents(t, dst), calls.Load())
		}
	})
	t.Run("HTMLWithoutFallbackIsPermanent", func(t *testing.T) {
		t.Parallel()
		srv, _ := script(status(200, "Content-Type", "text/html"))
		defer srv.Close()
		_, err := local(ingest.FetchConfig{}).Fetch(context.Background(), srv.URL, "", tempFile(t))
		if !ingest.IsPermanent(err) {
			t.Fatalf("Fetch(html) = %v, want permanent", err)
		}
	})
	t.Run("OverSizeLimit", func(t *testing.T) {
		t.Parallel()
		srv, _ := script(video(strings.Repeat("x", 2000)))
		defer srv.Close()
		_, err := local(ingest.FetchConfig{MaxBytes: 1000}).Fetch(context.Background(), srv.URL, "", tempFile(t))
		if !ingest.IsPermanent(err) {
			t.Fatalf("Fetch(too big) = %v, want permanent", err)
		}
	})
}

// A body that trickles slowly but steadily is not cut by the idle timeout, however long it
// takes in total; a connection that stalls is.
func TestFetcher_IdleTimeout(t *testing.T) {
	t.Parallel()
	const idle = 400 * time.Millisecond
	t.Run("SlowButSteady", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "video/mp4")
			for range 12 { // 12 × 100 ms: three idle timeouts in total, never one in a row
				_, _ = io.WriteString(w, "chunk")
				w.(http.Flusher).Flush()
				time.Sleep(100 * time.Millisecond)
			}
		}))
		defer srv.Close()
		dst := tempFile(t)
		if _, err := local(ingest.FetchConfig{IdleTimeout: idle, Attempts: 1}).Fetch(context.Background(), srv.URL, "", dst); err != nil {
			t.Fatalf("a steady trickle was cut: %v", err)
		}
		if got := contents(t, dst); got != strings.Repeat("chunk", 12) {
			t.Fatalf("got %q", got)
		}
	})
	t.Run("Stalled", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "video/mp4")
			_, _ = io.WriteString(w, "start")
			w.(http.Flusher).Flush()
			select { // then nothing
			case <-release:
			case <-r.Context().Done():
			}
		}))
		defer srv.Close()
		defer close(release)
		_, err := local(ingest.FetchConfig{IdleTimeout: idle, Attempts: 1}).Fetch(context.Background(), srv.URL, "", tempFile(t))
		if err == nil || !strings.Contains(err.Error(), "timeout") {
			t.Fatalf("a stalled download returned %v, want an idle timeout", err)
		}
	})
}

// By default the fetcher refuses every non-public address, before sending it a packet.
func TestFetcher_RefusesPrivateAddresses(t *testing.T) {
	t.Parallel()
	srv, calls := script(video("secret"))
	defer srv.Close()
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	f := ingest.NewFetcher(ingest.FetchConfig{Attempts: 1, ConnectTimeout: time.Second})
	for _, target := range []string{
		srv.URL, // 127.0.0.1
		"http://localhost:" + port,
		"http://[::1]:" + port,
		"http://10.0.0.1/video.mp4",
		"http://169.254.169.254/latest/meta-data/",
		"http://0.0.0.0:" + port,
		"http://[::ffff:127.0.0.1]:" + port,
		"ftp://example.com/video.mp4",
	} {
		_, err := f.Fetch(context.Background(), target, "", tempFile(t))
		if !ingest.IsPermanent(err) {
			t.Errorf("Fetch(%s) = %v, want a permanent refusal", target, err)
		}
	}
	if calls.Load() != 0 {
		t.Fatalf("the loopback server was reached %d times", calls.Load())
	}
}

// A 300 MiB download streams to disk: the heap grows by less than 32 MiB.
func TestFetcher_300MiBKeepsTheHeapFlat(t *testing.T) {
	const size = 300 << 20
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", fmt.Sprint(size))
		chunk := bytes.Repeat([]byte{0x42}, 64<<10)
		for sent := 0; sent < size; sent += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer srv.Close()

	dst := tempFile(t)
	var n int64
	var err error
	growth, baseline := heaptest.Growth(func() { n, err = local(ingest.FetchConfig{}).Fetch(context.Background(), srv.URL, "", dst) })
	if err != nil || n != size {
		t.Fatalf("Fetch = %d, %v", n, err)
	}
	t.Logf("heap: baseline %.1f MiB, growth %.1f MiB for a 300 MiB download", float64(baseline)/(1<<20), float64(growth)/(1<<20))
	if growth >= 32<<20 {
		t.Fatalf("heap grew by %.1f MiB, want < 32 MiB", float64(growth)/(1<<20))
	}
}

func TestShareID(t *testing.T) {
	for raw, want := range map[string]string{
		"https://drive.google.com/file/d/1AbC-d_9/view?usp=sharing": "1AbC-d_9",
		"https://drive.google.com/file/d/XYZ":                       "XYZ",
		"https://drive.google.com/open?id=Q1w2E3":                   "Q1w2E3",
		"https://drive.google.com/uc?id=Zz9&export=download":        "Zz9",
		"https://example.com/videos/lesson1.mp4":                    "",
		"https://drive.google.com/open?id=../../etc":                "",
		"ftp://drive.google.com/file/d/abc/view":                    "",
	} {
		got, ok := ingest.ShareID(raw)
		if got != want || ok != (want != "") {
			t.Errorf("ShareID(%q) = %q, %v; want %q", raw, got, ok, want)
		}
	}
	primary, fallback := ingest.DefaultLinks.Resolve("https://drive.google.com/file/d/abc/view")
	if !strings.Contains(primary, "id=abc") || !strings.Contains(fallback, "id=abc") {
		t.Fatalf("Resolve = %q, %q", primary, fallback)
	}
	if p, f := ingest.DefaultLinks.Resolve("https://cdn.example.com/a.mp4"); p != "https://cdn.example.com/a.mp4" || f != "" {
		t.Fatalf("a direct URL was rewritten: %q, %q", p, f)
	}
}
