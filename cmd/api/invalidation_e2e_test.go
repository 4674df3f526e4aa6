package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/binarytest"
)

// TestCache_PrivateThroughOneNodeRefusedByAnother: a media made PRIVATE through one node is
// refused to other members by another node that had it cached as playable, long before the
// cache's TTL (an hour here): the change's NOTIFY reaches every node's LISTEN and evicts it.
func TestCache_PrivateThroughOneNodeRefusedByAnother(t *testing.T) {
	env := map[string]string{"PLAYHEAD_CACHE_TTL": "1h", "PLAYHEAD_PUT_RATE": "0"}
	a := binarytest.Start(t, env)
	env["DATABASE_URL"], env["PLAYHEAD_ROLE"] = a.DBURL, "api"
	b := binarytest.Start(t, env)
	admin, member := binarytest.Token(t, 1, true), binarytest.Token(t, 42, false)
	id := a.CreateMedia(t, admin, "soon private")

	// b caches the media as playable.
	b.MustDo(t, http.StatusNoContent, http.MethodPut, b.URL("/v1/playback/%d", id), member, map[string]any{"position_ms": 1000})

	a.MustDo(t, http.StatusOK, http.MethodPatch, a.URL("/v1/admin/media/%d", id), admin, map[string]any{"visibility": "PRIVATE"})
	changed := time.Now()
	// A deadline for failure, not a speed check: without the eviction b would answer 204 for
	// an hour.
	giveUp := changed.Add(30 * time.Second)
	for tries := 1; ; tries++ {
		status, out, err := b.Do(http.MethodPut, b.URL("/v1/playback/%d", id), member, map[string]any{"position_ms": 2000})
		if err != nil {
			t.Fatal(err)
		}
		if status == http.StatusNotFound {
			t.Logf("refused by the other node %s after the change (try %d)", time.Since(changed).Round(time.Millisecond), tries)
			break
		}
		if status != http.StatusNoContent || time.Now().After(giveUp) {
			t.Fatalf("PUT on the other node after the media became PRIVATE: %d %s at try %d, want 404 "+
				"(is the media cache evicted by the media_changed notification?)", status, out, tries)
		}
		time.Sleep(10 * time.Millisecond)
	}
	a.Stop(t)
	b.Stop(t)
}
