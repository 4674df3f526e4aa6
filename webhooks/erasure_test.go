package webhooks

import (
	"testing"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/erasure"
)

// An endpoint registration by an administrator erased after their token passed auth (a node
// that has not heard of the erasure yet) stores no endpoint naming them: the insert is fenced
// like every write that names a member, and answered 401. Without the fence the endpoint keeps
// the erased id in created_by, which the erasure job has already cleared.
func TestCreate_ByAnErasedAdministratorStoresNothing(t *testing.T) {
	pool, _, _, _, _ := setup(t)
	const admin = 4_700_000_401
	if _, err := erasure.Erase(t.Context(), pool, admin, erasure.MaxAttempts); err != nil {
		t.Fatal(err)
	}
	_, err := NewStore(pool).Create(t.Context(), "http://127.0.0.1/late", []string{"media.ready"}, admin)
	if code := apperr.CodeOf(err); code != apperr.Unauthenticated {
		t.Fatalf("Create by an erased administrator = %v (%s), want unauthenticated", err, code)
	}
	var n int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM webhook_endpoints WHERE created_by = $1`, admin).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d endpoints name the erased administrator (%v), want none", n, err)
	}
}
