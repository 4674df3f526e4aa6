package main

// The reliability suite's hostile clients (see chaos_test.go).

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/binarytest"
)

// TestChaos_Abuse: a flood of unknown media ids reaches the database once per id; a body over
// the limit is refused after at most one read buffer, not read to its end; a member over the
// PUT rate gets 429 with Retry-After; slow-loris clients are cut while others are served.
func TestChaos_Abuse(t *testing.T) {
	const readTimeout, loriSlack = time.Second, 3 * time.Second
	// The lookup deadline is raised from 2 s: UnknownIDFlood counts lookups per id, and on a
	// loaded machine a lookup over 2 s answered 503 and its id was looked up again.
	s := binarytest.Start(t, map[string]string{"PLAYHEAD_CACHE_NEGATIVE_TTL": "10m", "PLAYHEAD_CACHE_LOAD_TIMEOUT": "1m", "PLAYHEAD_HTTP_READ_TIMEOUT": readTimeout.String(),
		"PLAYHEAD_PUT_RATE": "1", "PLAYHEAD_PUT_BURST": "5"})
	media := s.CreateMedia(t, binarytest.Token(t, 1, true), "target")

	t.Run("UnknownIDFlood", func(t *testing.T) {
		// The cache may legitimately reload an id when a media_changed notification lands
		// during the flood: the listener's first connect (in the background after start-up)
		// clears the cache, and the eviction of the media created above makes the loads in
		// flight at that moment uncached. On a loaded machine either could land mid-flood and
		// the count below went over. So the flood starts once a notification has been handled,
		// which proves both are behind it.
		waitForNotification(t, s, binarytest.Token(t, 1, true))
		before := s.Metric(t, "playhead_media_cache_loads_total")
		ids := map[int64]bool{}
		var wg sync.WaitGroup
		var notFound atomic.Int64
		for w := range 20 {
			tok := binarytest.Token(t, int64(10_000+w), false)
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			var mine []int64
			for range 500 { // 20 × 500 = 10 000 requests over at most 2 000 ids
				mine = append(mine, 1_000_000+rng.Int64N(2_000))
			}
			for _, id := range mine {
				ids[id] = true
			}
			wg.Go(func() {
				for _, id := range mine {
					status, _, err := s.Do(http.MethodGet, s.URL("/v1/playback/%d", id), tok, nil)
					if err == nil && status == http.StatusNotFound {
						notFound.Add(1)
					}
				}
			})
		}
		wg.Wait()
		loads := s.Metric(t, "playhead_media_cache_loads_total") - before
		t.Logf("10 000 requests for %d distinct unknown ids: %d answered 404, %v database lookups", len(ids), notFound.Load(), loads)
		if notFound.Load() != 10_000 {
			t.Errorf("%d of 10 000 answered 404", notFound.Load())
		}
		if loads > float64(len(ids)) {
			t.Errorf("%v database lookups for %d distinct ids within one negative-TTL window, want at most one each", loads, len(ids))
		}
	})

	t.Run("OversizeBodyRefusedUnread", func(t *testing.T) {
		conn, err := net.Dial("tcp", strings.TrimPrefix(s.HTTPURL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		const announced = 1 << 30 // 1 GiB announced; only 16 KiB ever sent
		fmt.Fprintf(conn, "PUT /v1/playback/%d HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
			media, binarytest.Token(t, 5, false), announced)
		_, _ = conn.Write([]byte(strings.Repeat("x", 16<<10)))
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("no answer to a 1 GiB body of which 16 KiB were sent: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("status %d, want 413", resp.StatusCode)
		}
	})

	t.Run("RateLimit", func(t *testing.T) {
		tok := binarytest.Token(t, 6, false)
		limited := 0
		start := time.Now()
		for i := range 20 {
			req, _ := http.NewRequest(http.MethodPut, s.URL("/v1/playback/%d", media), strings.NewReader(fmt.Sprintf(`{"position_ms": %d}`, i)))
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Content-Type", "application/json") // as api/openapi.yaml asks
			resp, err := s.Client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusTooManyRequests {
				limited++
				if resp.Header.Get("Retry-After") == "" {
					t.Fatal("429 without Retry-After")
				}
			}
		}
		// At 1/s with a burst of 5, at most 5 + 1 per second taken (+1 for the second under
		// way) of the 20 may pass, however slowly the machine sends them.
		elapsed := time.Since(start)
		t.Logf("20 rapid PUTs in %v: %d answered 429 with Retry-After", elapsed.Round(time.Millisecond), limited)
		if allowed := 5 + int(elapsed/time.Second) + 1; 20-limited > allowed {
			t.Fatalf("%d of 20 PUTs sent within %v passed, want at most %d (rate 1/s, burst 5)", 20-limited, elapsed.Round(time.Millisecond), allowed)
		}
	})

	t.Run("SlowLoris", func(t *testing.T) {
		const conns = 100
		closed := make(chan time.Duration, conns)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range conns {
			conn, err := net.Dial("tcp", strings.TrimPrefix(s.HTTPURL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() {
				defer conn.Close()
				start := time.Now()
				_, _ = conn.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: "))
				for {
					select {
					case <-stop:
						return
					case <-time.After(200 * time.Millisecond):
					}
					if _, err := conn.Write([]byte("a")); err != nil {
						closed <- time.Since(start)
						return
					}
					_ = conn.SetReadDeadline(time.Now().Add(time.Millisecond))
					if _, err := conn.Read(make([]byte, 1)); err != nil && !isTimeout(err) {
						closed <- time.Since(start) // the server closed it
						return
					}
				}
			})
		}
		// Others are served meanwhile.
		for range 20 {
			if status, _, err := s.Do(http.MethodGet, s.HTTPURL+"/healthz", "", nil); err != nil || status != http.StatusOK {
				t.Fatalf("a normal request during the slow-loris attack: %d %v", status, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		giveUp := time.After(30 * time.Second)
		var longest time.Duration
		for range conns {
			select {
			case d := <-closed:
				longest = max(longest, d)
			case <-giveUp:
				close(stop)
				wg.Wait()
				t.Fatal("slow-loris connections still open 30 s after they started trickling (read timeout 1 s)")
			}
		}
		close(stop)
		wg.Wait()
		t.Logf("%d slow-loris connections were all cut by the server; the last after %v (read timeout %v)", conns, longest.Round(time.Millisecond), readTimeout)
		// The configured timeout is what cuts them, not some other limit: a threshold of the
		// timeout plus slack (a cut is seen at the next trickled byte, 200 ms apart, and the
		// machine is shared). With the timeout hard-coded to 10 s instead, this fails.
		if longest > readTimeout+loriSlack {
			t.Fatalf("the last slow-loris connection was cut after %v, want within the read timeout %v + %v", longest.Round(time.Millisecond), readTimeout, loriSlack)
		}
	})
}

func isTimeout(err error) bool {
	ne, ok := errors.AsType[net.Error](err)
	return ok && ne.Timeout()
}

// waitForNotification waits until the node's media cache has handled a media_changed
// notification (its invalidation counter moved), creating a media item now and then: one
// created before the listener connected was never delivered.
func waitForNotification(t *testing.T, s *binarytest.Server, adminToken string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for s.Metric(t, "playhead_media_cache_invalidations_total") < 1 {
		if time.Now().After(deadline) {
			t.Fatal("gave up waiting for the node to handle a media_changed notification")
		}
		s.CreateMedia(t, adminToken, "notification probe")
		for range 20 {
			if s.Metric(t, "playhead_media_cache_invalidations_total") >= 1 {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}
