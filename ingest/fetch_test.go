package ingest_test

import (
	"bytes"
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

// local returns a fetcher that may reach the loopback test servers.
func local(cfg ingest.FetchConfig) *ingest.Fetcher {
	cfg.AllowPrivate = true
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

// A retryable failure (429, 5xx) is returned after one request, with the server's
// Retry-After, for the job queue to retry: the fetcher never sleeps holding its download slot.
// A 404 is permanent.
func TestFetcher_OneRequestPerAttempt(t *testing.T) {
	t.Parallel()
	t.Run("429WithRetryAfterThenOK", func(t *testing.T) {
		t.Parallel()
		srv, calls := script(status(429, "Retry-After", "7"), video("the video"))
		defer srv.Close()
		f := local(ingest.FetchConfig{})
		dst := tempFile(t)
		_, err := f.Fetch(context.Background(), srv.URL, "", dst)
		if err == nil || ingest.IsPermanent(err) || ingest.RetryAfter(err) != 7*time.Second || calls.Load() != 1 {
			t.Fatalf("Fetch(429) = %v (Retry-After %s) after %d calls, want a retryable error after 1 call carrying 7s",
				err, ingest.RetryAfter(err), calls.Load())
		}
		n, err := f.Fetch(context.Background(), srv.URL, "", dst) // the queue's next attempt
		if err != nil || n != 9 || contents(t, dst) != "the video" || calls.Load() != 2 {
			t.Fatalf("next attempt: Fetch = %d, %v after %d calls", n, err, calls.Load())
		}
	})
	t.Run("503IsRetryable", func(t *testing.T) {
		t.Parallel()
		srv, calls := script(status(503))
		defer srv.Close()
		_, err := local(ingest.FetchConfig{}).Fetch(context.Background(), srv.URL, "", tempFile(t))
		if err == nil || ingest.IsPermanent(err) || ingest.RetryAfter(err) != 0 || calls.Load() != 1 {
			t.Fatalf("Fetch(503) = %v after %d calls, want a retryable error after 1", err, calls.Load())
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
	t.Run("SilentServerTimesOut", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			select { // never answers
			case <-release:
			case <-r.Context().Done():
			}
		}))
		defer srv.Close()
		defer close(release)
		_, err := local(ingest.FetchConfig{ResponseTimeout: 200 * time.Millisecond}).Fetch(context.Background(), srv.URL, "", tempFile(t))
		if err == nil || ingest.IsPermanent(err) || !strings.Contains(err.Error(), "timeout") {
			t.Fatalf("Fetch(silent server) = %v, want a retryable response timeout", err)
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
		if _, err := local(ingest.FetchConfig{IdleTimeout: idle}).Fetch(context.Background(), srv.URL, "", dst); err != nil {
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
		_, err := local(ingest.FetchConfig{IdleTimeout: idle}).Fetch(context.Background(), srv.URL, "", tempFile(t))
		if err == nil || !strings.Contains(err.Error(), "timeout") {
			t.Fatalf("a stalled download returned %v, want an idle timeout", err)
		}
	})
}

// A body that never stalls and never ends — a byte every so often, just inside the idle
// timeout — held a download slot for as long as its server liked: the idle timeout never
// fires and nothing else bounded an attempt. The attempt is cut at its time limit, as a
// retryable failure (the queue retries it later, without the slot).
func TestFetcher_AttemptTimeLimit(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "video/mp4")
		for range 600 { // 60 s of chunks: "forever" next to the 1 s limit, but a test must end
			if _, err := io.WriteString(w, "chunk"); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}))
	defer srv.Close()
	n, err := local(ingest.FetchConfig{IdleTimeout: 400 * time.Millisecond, Timeout: time.Second}).
		Fetch(context.Background(), srv.URL, "", tempFile(t))
	if err == nil {
		t.Fatalf("a download that trickled for a minute was not cut at its 1 s limit (%d bytes)", n)
	}
	if ingest.IsPermanent(err) || !strings.Contains(err.Error(), "longer than its time limit") {
		t.Fatalf("Fetch = %v; want a retryable failure naming the time limit", err)
	}
}

// By default the fetcher refuses every non-public address, before sending it a packet.
func TestFetcher_RefusesPrivateAddresses(t *testing.T) {
	t.Parallel()
	srv, calls := script(video("secret"))
	defer srv.Close()
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	f := ingest.NewFetcher(ingest.FetchConfig{ConnectTimeout: time.Second})
	for _, target := range []string{
		srv.URL, // 127.0.0.1
		"http://localhost:" + port,
		"http://[::1]:" + port,
		"http://10.0.0.1/video.mp4",
		"http://169.254.169.254/latest/meta-data/",
		"http://0.0.0.0:" + port,
		"http://[::ffff:127.0.0.1]:" + port,
		"http://[::127.0.0.1]:" + port,       // IPv4-compatible
		"http://[64:ff9b::7f00:1]:" + port,   // NAT64 of 127.0.0.1
		"http://[2002:7f00:1::1]:" + port,    // 6to4 of 127.0.0.1
		"http://[::ffff:0:7f00:1]:" + port,   // IPv4-translated
		"http://[fec0::1]:" + port,           // site-local
		"http://[64:ff9b:1::7f00:1]:" + port, // local-use NAT64
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
