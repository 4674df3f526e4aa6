package xapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
)

// TestSend_HostileLRS sends to LRSs that misbehave on purpose: a redirect is not followed (the
// place it names is never reached) and ends the statement DEAD, a 401 ends it DEAD, an answer
// that never ends is read no further than maxResponseBytes, and one that never comes is given
// up at the attempt's timeout and retried.
func TestSend_HostileLRS(t *testing.T) {
	statements := func(t *testing.T, endpoint string, timeout time.Duration) ([]error, *prometheus.Registry) {
		t.Helper()
		pool := setup(t)
		complete(t, pool, 7)
		if _, err := NewRelay(pool, RelayConfig{Activities: activities, Completion: media.DefaultCompletion}).RelayOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		sender := NewSender(SenderConfig{Pool: pool, Endpoint: endpoint, AllowPrivate: true, Timeout: timeout, Metrics: NewMetrics(reg)})
		return runJobs(t, pool, sender), reg
	}
	permanent := func(errs []error) bool {
		for _, err := range errs {
			if !jobqueue.IsPermanent(err) {
				return false
			}
		}
		return len(errs) == 2
	}

	t.Run("Redirect", func(t *testing.T) {
		var reached atomic.Int64
		canary := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached.Add(1) }))
		t.Cleanup(canary.Close)
		lrs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, canary.URL+"/statements", http.StatusTemporaryRedirect)
		}))
		t.Cleanup(lrs.Close)
		errs, reg := statements(t, lrs.URL, 0)
		if !permanent(errs) || reached.Load() != 0 {
			t.Fatalf("a 307: %v, the place it names reached %d times; want 2 permanent errors, never reached", errs, reached.Load())
		}
		wantCounts(t, reg, map[string]float64{resultRejected: 2})
	})

	t.Run("Unauthorized", func(t *testing.T) {
		lrs := newLRS(t, http.StatusUnauthorized, http.StatusUnauthorized)
		errs, reg := statements(t, lrs.srv.URL, 0)
		if !permanent(errs) || !strings.Contains(errs[0].Error(), "HTTP 401") {
			t.Fatalf("a 401: %v, want 2 permanent errors naming it", errs)
		}
		wantCounts(t, reg, map[string]float64{resultRejected: 2})
	})

	t.Run("EndlessAnswer", func(t *testing.T) {
		var written atomic.Int64
		done := make(chan struct{}, 2)
		chunk := []byte(strings.Repeat("x", 32<<10))
		lrs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() { done <- struct{}{} }()
			w.WriteHeader(http.StatusBadRequest)
			for {
				n, err := w.Write(chunk)
				written.Add(int64(n))
				if err != nil {
					return
				}
			}
		}))
		t.Cleanup(lrs.Close)
		// An attempt without the read limit reads this answer until the timeout.
		errs, reg := statements(t, lrs.URL, 5*time.Second)
		<-done
		<-done
		if !permanent(errs) {
			t.Fatalf("an endless 400: %v, want 2 permanent errors", errs)
		}
		// Two attempts read 64 KiB each; the rest is what the sockets' buffers took before the
		// connections were closed.
		if n := written.Load(); n > 64<<20 {
			t.Errorf("the LRS wrote %d MiB before its connections were closed, want at most 64 MiB", n>>20)
		}
		wantCounts(t, reg, map[string]float64{resultRejected: 2})
	})

	t.Run("NeverAnswers", func(t *testing.T) {
		release := make(chan struct{})
		lrs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		t.Cleanup(lrs.Close)
		t.Cleanup(func() { close(release) })
		errs, reg := statements(t, lrs.URL, 200*time.Millisecond)
		if len(errs) != 2 || jobqueue.IsPermanent(errs[0]) || jobqueue.IsPermanent(errs[1]) {
			t.Fatalf("an LRS that never answers: %v, want 2 retryable errors", errs)
		}
		wantCounts(t, reg, map[string]float64{resultUnreachable: 2})
	})
}
