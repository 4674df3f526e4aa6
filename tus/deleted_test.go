package tus_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/mediadelete"
)

// TestUpload_OfADeletedMediaIsGone: once the media a resumable upload became is deleted, the
// upload is not found for its member (HEAD, PATCH), before the deletion job removes its row.
func TestUpload_OfADeletedMediaIsGone(t *testing.T) {
	c := backends()["Local"](t)
	n := c.start(t)
	file := randomFile(t, 1000)
	path := n.create(t, 7, len(file), metadata("filename", "wrong file.mp4"))
	if ans := n.patch(t, 7, path, 0, file); ans.status != http.StatusNoContent {
		t.Fatalf("PATCH: %d %s", ans.status, ans.body)
	}
	head := n.do(t, 7, http.MethodHead, path, nil, nil)
	mediaID, err := strconv.ParseInt(head.header.Get("Playhead-Media-Id"), 10, 64)
	if head.status != http.StatusOK || err != nil {
		t.Fatalf("HEAD of the finished upload: %d, media %q", head.status, head.header.Get("Playhead-Media-Id"))
	}
	if err := pgx.BeginFunc(t.Context(), c.pool, func(tx pgx.Tx) error { return mediadelete.Delete(t.Context(), tx, mediaID) }); err != nil {
		t.Fatal(err)
	}
	if ans := n.do(t, 7, http.MethodHead, path, nil, nil); ans.status != http.StatusNotFound {
		t.Errorf("HEAD of the upload of a deleted media: %d, want 404", ans.status)
	}
	if ans := n.patch(t, 7, path, len(file), []byte("more")); ans.status != http.StatusNotFound {
		t.Errorf("PATCH of the upload of a deleted media: %d %s, want 404", ans.status, ans.body)
	}
}
