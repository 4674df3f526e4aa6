package playback_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/playhead/playhead/media"
)

// TestPlayback_ListItemsCarryThumbnailAndStatus: GET /v1/playback gives each item its media's
// status and, when the media has a thumbnail, a thumbnail link signed for the member, so the
// home page needs no request per item.
func TestPlayback_ListItemsCarryThumbnailAndStatus(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	const member = 6
	tok := token(t, member, false)
	withThumb := b.createMedia(t, map[string]any{"title": "with thumbnail", "duration_ms": 600_000})
	without := b.createMedia(t, map[string]any{"title": "without", "duration_ms": 600_000})
	const key = "thumbs/with.jpg"
	if _, err := b.pool.Exec(context.Background(), `UPDATE media SET thumbnail_key = $2 WHERE id = $1`, withThumb, key); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{withThumb, without} {
		if status, body := b.do(t, http.MethodPut, fmt.Sprintf("/v1/playback/%d", id), tok, `{"position_ms": 1000}`); status != http.StatusNoContent {
			t.Fatalf("PUT: %d %s", status, body)
		}
	}
	b.flushNow(t)

	status, body := b.do(t, http.MethodGet, "/v1/playback", tok, nil)
	if status != http.StatusOK {
		t.Fatalf("GET list: %d %s", status, body)
	}
	var resp struct {
		Items []struct {
			MediaID      int64   `json:"media_id"`
			Status       string  `json:"status"`
			ThumbnailURL *string `json:"thumbnail_url"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &resp); err != nil || len(resp.Items) != 2 {
		t.Fatalf("list: %s (%v)", body, err)
	}
	for _, it := range resp.Items {
		if it.Status != string(media.StatusReady) {
			t.Errorf("media %d: status %q, want READY", it.MediaID, it.Status)
		}
		switch it.MediaID {
		case without:
			if it.ThumbnailURL != nil {
				t.Errorf("media %d has no thumbnail but the list gives %q", it.MediaID, *it.ThumbnailURL)
			}
		case withThumb:
			if it.ThumbnailURL == nil {
				t.Fatalf("media %d: no thumbnail_url in %s", it.MediaID, body)
			}
			u, err := url.Parse(*it.ThumbnailURL)
			if err != nil || u.Path != media.ObjectPath(key) {
				t.Fatalf("thumbnail_url %q, want a link to %s", *it.ThumbnailURL, key)
			}
			if got, err := b.links.Signer.Verify(key, u.RawQuery, time.Now()); err != nil || got != member {
				t.Errorf("thumbnail_url %q: signed for member %d (%v), want %d", *it.ThumbnailURL, got, err, member)
			}
		default:
			t.Errorf("unexpected media %d in the list", it.MediaID)
		}
	}
}
