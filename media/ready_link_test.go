package media_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/cache"
	"github.com/playhead/playhead/httpserver"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/storage"
)

// TestMediaGet_ReadyLinkPlaysBeforeTheNotification: a player polls GET /v1/media/{id} until
// the media is READY and opens the hls_url at once. The node's media cache still holds the
// media as PROCESSING until the media_changed notification arrives (milliseconds, or seconds
// on a loaded machine); the playlist request, checked against that cache, answered 404
// meanwhile. The GET that read the READY row must leave the node's cache agreeing with it.
// No listener runs here: the notification never arrives.
func TestMediaGet_ReadyLinkPlaysBeforeTheNotification(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Pool(t)
	store := media.NewStore(pool)
	ctx := context.Background()
	const owner = 5
	m := must(store.Create(ctx, media.Media{OwnerID: owner, Title: "clip",
		Status: media.StatusProcessing, Visibility: media.VisibilityPrivate}))(t)
	objects := must(storage.NewLocal(filepath.Join(t.TempDir(), "objects")))(t)
	prefix := fmt.Sprintf("hls/%d/tok/", m.ID)
	for key, body := range map[string]string{"master.m3u8": "#EXTM3U\n#EXT-X-ENDLIST\n", "thumb.jpg": "JPEG"} {
		must(objects.Put(ctx, prefix+key, strings.NewReader(body)))(t)
	}

	c := startCache(t, cache.Config{Load: store.LookupAccess})
	links := &media.Links{Signer: must(media.NewSigner([]byte(secret)))(t), TTL: time.Minute}
	verifier := must(auth.NewVerifier([]byte(secret), 0))(t)
	app := httpserver.New(httpserver.Config{BodyLimit: 1 << 16})
	(&media.ObjectsHandler{Store: objects, Access: c, Links: links}).Register(app)
	(&media.Handler{Store: store, Access: c, Links: links}).Register(app.Group("/v1", verifier.Middleware()))
	addr := serveApp(t, app)
	token := bearer(must(auth.Mint([]byte(secret), owner, false, time.Hour))(t))

	view := func() (v struct {
		Status string `json:"status"`
		HLSURL string `json:"hls_url"`
	}) {
		t.Helper()
		status, _, body := rawGet(t, addr, fmt.Sprintf("/v1/media/%d", m.ID), token)
		if status != http.StatusOK {
			t.Fatalf("GET /v1/media/%d: status %d: %s", m.ID, status, body)
		}
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := view(); v.Status != string(media.StatusProcessing) {
		t.Fatalf("media is %s, want PROCESSING", v.Status)
	}
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return media.MarkReady(ctx, tx, m.ID, media.Encoded{HLSKey: prefix + "master.m3u8", ThumbnailKey: prefix + "thumb.jpg", DurationMS: 2000}, nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	v := view()
	if v.Status != string(media.StatusReady) || v.HLSURL == "" {
		t.Fatalf("after MarkReady: %+v, want READY with an hls_url", v)
	}
	if status, _, body := rawGet(t, addr, v.HLSURL, nil); status != http.StatusOK {
		t.Fatalf("GET the hls_url of a READY media: status %d (%s), want 200", status, body)
	}
}
