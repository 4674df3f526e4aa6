package main

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/playhead/playhead/internal/binarytest"
)

// TestLists_ThroughTheBinary asks the real binary for the two lists the player page reads, with
// the client that checks every exchange against api/openapi.yaml: GET /v1/media?owner=me and
// GET /v1/playback answer 200 with items carrying status and a thumbnail_url, as documented.
func TestLists_ThroughTheBinary(t *testing.T) {
	s := binarytest.Start(t, nil)
	admin := binarytest.Token(t, 1, true)
	const member = 4242
	tok := binarytest.Token(t, member, false)
	id := positiveOwnedID(t, s.MustDo(t, http.StatusCreated, http.MethodPost, s.URL("/v1/admin/media"), admin,
		map[string]any{"title": "mine", "duration_ms": 1_200_000, "owner_id": member}))
	pool := s.Pool(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `UPDATE media SET thumbnail_key = 'thumbs/lists.jpg' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	// A stored position, as the flush writes it: half-way, a resume point.
	if _, err := pool.Exec(ctx, `INSERT INTO playback (member_id, media_id, position_ms, event_time, updated_at)
		VALUES ($1, $2, 600000, now(), now())`, member, id); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/v1/media?owner=me", "/v1/playback"} {
		var page struct {
			Items []struct {
				Status       string `json:"status"`
				ThumbnailURL string `json:"thumbnail_url"`
			} `json:"items"`
		}
		if err := json.Unmarshal(s.MustDo(t, http.StatusOK, http.MethodGet, s.URL("%s", path), tok, nil), &page); err != nil {
			t.Fatal(err)
		}
		if len(page.Items) != 1 || page.Items[0].Status != "READY" || page.Items[0].ThumbnailURL == "" {
			t.Errorf("GET %s: %+v, want the one READY item with a thumbnail_url", path, page.Items)
		}
	}
	s.MustDo(t, http.StatusBadRequest, http.MethodGet, s.URL("/v1/media?owner=%d", member), tok, nil)
}

func positiveOwnedID(t *testing.T, out []byte) int64 {
	t.Helper()
	var m struct {
		ID int64 `json:"id"`
	}
	if err := json.Unmarshal(out, &m); err != nil || m.ID <= 0 {
		t.Fatalf("no media id in %s", out)
	}
	return m.ID
}
