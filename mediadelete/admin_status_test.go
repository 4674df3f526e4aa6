package mediadelete_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/playhead/playhead/internal/pgtest"
)

// TestAdminRoutes_CannotMakeAMediaDeleted: DELETED is reached only through a deletion, which
// enqueues the job that removes the media; an admin's PATCH or POST naming that status is 422
// and changes nothing (a DELETED media without its job would keep its objects for ever).
func TestAdminRoutes_CannotMakeAMediaDeleted(t *testing.T) {
	dbURL := pgtest.URL(t)
	n := startNode(t, dbURL)
	admin := token(t, 1, true)
	status, out := n.call(t, admin, http.MethodPost, "/v1/admin/media", "application/json", []byte(`{"title": "x", "owner_id": 5, "status": "DELETED"}`))
	if status != http.StatusUnprocessableEntity {
		t.Errorf("admin POST of a DELETED media: %d %s, want 422", status, out)
	}
	status, out = n.call(t, admin, http.MethodPost, "/v1/admin/media", "application/json", []byte(`{"title": "x", "owner_id": 5}`))
	if status != http.StatusCreated {
		t.Fatalf("admin POST: %d %s", status, out)
	}
	var id int64
	if _, err := fmt.Sscanf(string(out), `{"id":%d`, &id); err != nil {
		t.Fatalf("admin POST answered %s: %v", out, err)
	}
	path := fmt.Sprintf("/v1/admin/media/%d", id)
	if status, out := n.call(t, admin, http.MethodPatch, path, "application/json", []byte(`{"status": "DELETED"}`)); status != http.StatusUnprocessableEntity {
		t.Errorf("admin PATCH to DELETED: %d %s, want 422", status, out)
	}
	if status, out := n.call(t, admin, http.MethodGet, path, "", nil); status != http.StatusOK {
		t.Errorf("the media after the refused PATCH: %d %s, want it as it was", status, out)
	}
}
