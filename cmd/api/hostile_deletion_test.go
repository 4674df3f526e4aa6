package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/playhead/playhead/encodejobs"
	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/testvideo"
	"github.com/playhead/playhead/mediadelete"
)

// createOwned registers a READY private media of member owner through the admin route and
// returns its id.
func createOwned(t *testing.T, s *binarytest.Server, adminToken string, owner int64, title string) int64 {
	t.Helper()
	out := s.MustDo(t, http.StatusCreated, http.MethodPost, s.URL("/v1/admin/media"), adminToken,
		map[string]any{"title": title, "owner_id": owner, "visibility": "PRIVATE", "duration_ms": binarytest.MediaDurationMS})
	var m struct {
		ID int64 `json:"id"`
	}
	if err := json.Unmarshal(out, &m); err != nil || m.ID <= 0 {
		t.Fatalf("POST /v1/admin/media answered %s (%v), want an id", out, err)
	}
	return m.ID
}

// hostileDeletion sends the media deletion's own cases, after every other case: another
// member's media (PATCH, DELETE, and the admin route) left as it was, a double deletion, the
// deletion of the media a resumable upload became (its upload is then gone too), and a
// deletion while the media encodes (its encode ends, its deletion job removes it). It returns
// the number of cases.
func (f *hostileFixture) hostileDeletion(t *testing.T) int {
	t.Helper()
	n := 0
	expect := func(want int, method, target, tok string, body any) []byte {
		t.Helper()
		n++
		status, out, err := f.s.Do(method, f.s.URL("%s", target), tok, body)
		if err != nil || status != want {
			t.Errorf("deletion: %s %s = %d %s (%v), want %d", method, target, status, out, err, want)
		}
		return out
	}
	mine := fmt.Sprintf("/v1/media/%d", f.mine)
	// Another member's media: as if it did not exist, and it stays as it was.
	expect(http.StatusNotFound, http.MethodDelete, mine, f.b, nil)
	expect(http.StatusNotFound, http.MethodPatch, mine, f.b, map[string]any{"title": "B's now", "visibility": "PUBLIC"})
	expect(http.StatusForbidden, http.MethodDelete, "/v1/admin"+mine, f.b, nil)
	if out := expect(http.StatusOK, http.MethodGet, mine, f.a, nil); !strings.Contains(string(out), `"visibility":"PRIVATE"`) {
		t.Errorf("deletion: A's media after B's attempts: %s, want it PRIVATE as it was", out)
	}
	// A double deletion: the second, by the owner or an admin, is 404, and so is a PATCH.
	twice := createOwned(t, f.s, f.adm, 201, "deleted twice")
	path := fmt.Sprintf("/v1/media/%d", twice)
	expect(http.StatusAccepted, http.MethodDelete, path, f.a, nil)
	expect(http.StatusNotFound, http.MethodDelete, path, f.a, nil)
	expect(http.StatusNotFound, http.MethodDelete, "/v1/admin"+path, f.adm, nil)
	expect(http.StatusNotFound, http.MethodPatch, path, f.a, map[string]any{"title": "back"})
	expect(http.StatusNotFound, http.MethodGet, path, f.a, nil)
	// The media a resumable upload became: deleted, its upload is gone for its member too.
	pool := f.s.Pool(t)
	var fromUpload int64
	uploadID := strings.TrimPrefix(f.finishedUpload, "/v1/uploads/")
	if err := pool.QueryRow(t.Context(), `SELECT media_id FROM uploads WHERE id = $1`, uploadID).Scan(&fromUpload); err != nil {
		t.Fatalf("deletion: the finished upload's media: %v", err)
	}
	expect(http.StatusAccepted, http.MethodDelete, fmt.Sprintf("/v1/media/%d", fromUpload), f.a, nil)
	n++
	if status, _, body := f.s.Tus(t, http.MethodHead, f.s.URL("%s", f.finishedUpload), f.a, nil, nil); status != http.StatusNotFound {
		t.Errorf("deletion: HEAD of the upload whose media was deleted: %d %s, want 404", status, body)
	}
	// While it encodes: the encode's jobs end (cancelled, or their completion writes nothing)
	// and the deletion job removes the media row.
	src := testvideo.MP4(t, t.TempDir(), testvideo.Spec{Seconds: 4, Width: 320, Height: 240, Audio: true})
	encoding := f.s.Upload(t, f.a, binarytest.Upload{Path: src, FileName: "encoding.mp4", Title: "deleted while it encodes", Visibility: "PRIVATE"})
	expect(http.StatusAccepted, http.MethodDelete, fmt.Sprintf("/v1/media/%d", encoding), f.a, nil)
	expect(http.StatusNotFound, http.MethodGet, fmt.Sprintf("/v1/media/%d", encoding), f.a, nil)
	for _, id := range []int64{twice, fromUpload, encoding} {
		waitFor(t, encodeTimeout, fmt.Sprintf("the deletion of media %d", id), func() bool {
			var left bool
			err := pool.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM media WHERE id = $1)
				OR EXISTS (SELECT 1 FROM jobs WHERE subject_id = $1 AND (kind = ANY($2) OR kind = $3 AND status <> 'COMPLETED'))`,
				id, encodejobs.Kinds, mediadelete.KindDelete).Scan(&left)
			if err != nil {
				t.Fatal(err)
			}
			return !left
		}, f.s)
	}
	return n
}
