package media_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/media"
)

type ownedPage struct {
	Items []struct {
		ID           int64     `json:"id"`
		Title        string    `json:"title"`
		Status       string    `json:"status"`
		Visibility   string    `json:"visibility"`
		CreatedAt    time.Time `json:"created_at"`
		DurationMS   int64     `json:"duration_ms"`
		ThumbnailURL string    `json:"thumbnail_url"`
	} `json:"items"`
	NextCursor string `json:"next_cursor"`
}

// TestMediaListOwned_OnlyTheCallersUploadsNewestFirstPaged: GET /v1/media?owner=me lists the
// calling member's media and no one else's, newest first, with status, and pages by cursor
// without loss or repetition; a READY item with a thumbnail carries a link signed for the
// caller, any other item none.
func TestMediaListOwned_OnlyTheCallersUploadsNewestFirstPaged(t *testing.T) {
	a := setupMediaAPI(t)
	ctx := context.Background()
	const mine, theirs = 7, 8
	var want []int64 // newest first
	for i, st := range []media.Status{media.StatusReady, media.StatusProcessing, media.StatusFailed, media.StatusReady, media.StatusUploaded} {
		m := must(a.store.Create(ctx, media.Media{OwnerID: mine, Title: "mine " + string(st), Status: st,
			Visibility: media.VisibilityPrivate, DurationMS: int64(1000 * (i + 1))}))(t)
		want = append([]int64{m.ID}, want...)
		// Another member's media, public and READY, interleaved in time.
		must(a.store.Create(ctx, media.Media{OwnerID: theirs, Title: "theirs", Status: media.StatusReady,
			Visibility: media.VisibilityPublic}))(t)
	}
	// Every media gets a thumbnail key: only the READY ones may show it.
	if _, err := a.pool.Exec(ctx, `UPDATE media SET thumbnail_key = 'thumbs/' || id || '.jpg'`); err != nil {
		t.Fatal(err)
	}
	token := must(auth.Mint([]byte(secret), mine, false, time.Hour))(t)

	var got []int64
	target := "/v1/media?owner=me&limit=2"
	pages := 0
	for {
		status, _, body := rawGet(t, a.addr, target, bearer(token))
		if status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", target, status, body)
		}
		var page ownedPage
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatal(err)
		}
		pages++
		for _, it := range page.Items {
			got = append(got, it.ID)
			m := must(a.store.Get(ctx, it.ID))(t)
			if m.OwnerID != mine {
				t.Fatalf("listed media %d of member %d", it.ID, m.OwnerID)
			}
			if it.Status != string(m.Status) || it.Title != m.Title || it.Visibility != string(m.Visibility) ||
				it.DurationMS != m.DurationMS || !it.CreatedAt.Equal(m.CreatedAt) {
				t.Errorf("item %+v, row %+v", it, m)
			}
			if m.Status != media.StatusReady {
				if it.ThumbnailURL != "" {
					t.Errorf("media %d is %s but has thumbnail_url %q", it.ID, m.Status, it.ThumbnailURL)
				}
				continue
			}
			u, err := url.Parse(it.ThumbnailURL)
			if err != nil || u.Path != media.ObjectPath(m.ThumbnailKey) {
				t.Fatalf("media %d: thumbnail_url %q, want a link to %s", it.ID, it.ThumbnailURL, m.ThumbnailKey)
			}
			if member, err := a.links.Signer.Verify(m.ThumbnailKey, u.RawQuery, time.Now()); err != nil || member != mine {
				t.Errorf("media %d: thumbnail_url %q does not verify for member %d: %v (member %d)", it.ID, it.ThumbnailURL, mine, err, member)
			}
		}
		if page.NextCursor == "" {
			break
		}
		if pages > len(want) {
			t.Fatal("the cursor never ends")
		}
		target = "/v1/media?owner=me&limit=2&cursor=" + url.QueryEscape(page.NextCursor)
	}
	if pages != 3 || len(got) != len(want) {
		t.Fatalf("%d pages, ids %v, want 3 pages of ids %v", pages, got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("ids %v, want %v (newest first)", got, want)
		}
	}

	// The other member sees only its own five.
	other := must(auth.Mint([]byte(secret), theirs, false, time.Hour))(t)
	status, _, body := rawGet(t, a.addr, "/v1/media?owner=me", bearer(other))
	var page ownedPage
	if err := json.Unmarshal(body, &page); status != http.StatusOK || err != nil || len(page.Items) != 5 || page.NextCursor != "" {
		t.Fatalf("the other member's list: %d %s", status, body)
	}
	for _, it := range page.Items {
		if it.Title != "theirs" {
			t.Errorf("member %d sees %q", theirs, it.Title)
		}
	}
	// A member with no uploads gets an empty list, not null.
	status, _, body = rawGet(t, a.addr, "/v1/media?owner=me", bearer(must(auth.Mint([]byte(secret), 9, false, time.Hour))(t)))
	if status != http.StatusOK || strings.TrimSpace(string(body)) != `{"items":[]}` {
		t.Errorf("empty list: %d %s", status, body)
	}
}

// TestMediaListOwned_BadQuery: a missing or other owner, a bad limit and a forged cursor are
// refused with 400 and a JSON error; no token is 401.
func TestMediaListOwned_BadQuery(t *testing.T) {
	a := setupMediaAPI(t)
	token := must(auth.Mint([]byte(secret), 7, false, time.Hour))(t)
	for _, target := range []string{
		"/v1/media",
		"/v1/media?owner=",
		"/v1/media?owner=8",
		"/v1/media?owner=ME",
		"/v1/media?owner=me&limit=0",
		"/v1/media?owner=me&limit=101",
		"/v1/media?owner=me&limit=ten",
		"/v1/media?owner=me&cursor=nope",
		"/v1/media?owner=me&cursor=" + "MTIzLjA", // "123.0": id 0
	} {
		status, header, body := rawGet(t, a.addr, target, bearer(token))
		var e struct {
			Error string `json:"error"`
		}
		if status != http.StatusBadRequest || !strings.HasPrefix(header.Get("Content-Type"), "application/json") ||
			json.Unmarshal(body, &e) != nil || e.Error == "" {
			t.Errorf("GET %s: %d %q %s, want 400 with a JSON error", target, status, header.Get("Content-Type"), body)
		}
	}
	if status, _, body := rawGet(t, a.addr, "/v1/media?owner=me", nil); status != http.StatusUnauthorized {
		t.Errorf("GET without a token: %d %s, want 401", status, body)
	}
	if status, _, body := rawGet(t, a.addr, "/v1/media?owner=me&limit=100", bearer(token)); status != http.StatusOK {
		t.Errorf("GET limit=100: %d %s, want 200", status, body)
	}
}
