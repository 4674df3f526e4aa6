package captions_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/playhead/playhead/erasure"
)

// A caption POST whose token passed auth before its member's erasure (a node that has not
// heard of it yet; or the track's files still being written to the object store while the
// erasure and its job ran) stores no track naming the member: the insert is fenced like every
// write that names a member, and answered 401, its files removed. Without the fence the track
// keeps the erased administrator's id in created_by, which the erasure job has already cleared.
func TestPost_ByAnErasedMemberStoresNothing(t *testing.T) {
	t.Parallel()
	f := setup(t)
	const admin = 9 // f.admin's member id; the verifier here knows nothing of erasures
	if _, err := erasure.Erase(context.Background(), f.pool, admin, erasure.MaxAttempts); err != nil {
		t.Fatal(err)
	}
	if status, out := f.post(t, f.fmp4, f.admin, "en", "English", srtFile); status != http.StatusUnauthorized {
		t.Fatalf("caption POST of an erased administrator = %d %s, want 401", status, out)
	}
	var n int
	if err := f.pool.QueryRow(context.Background(), `SELECT count(*) FROM captions`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d caption rows, want none: a track names the erased member", n)
	}
	if left := f.captionFolders(t, f.fmp4); len(left) > 0 {
		t.Fatalf("the refused track's files stay: %v", left)
	}
}
