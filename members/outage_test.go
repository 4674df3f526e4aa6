package members_test

import (
	"context"
	"testing"
	"time"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/members"
)

// A database that does not answer (a partition: connections open, nothing comes back) cannot
// hold a first sight: the look-up ends at LoadTimeout with an error the verifier answers 503,
// while a subject already cached is answered from memory.
func TestResolver_HungDatabase(t *testing.T) {
	t.Parallel()
	proxy, pool := pgtest.ProxiedPool(t, pgtest.URL(t))
	r := members.NewResolver(pool, members.Config{LoadTimeout: 200 * time.Millisecond})
	known := mustMember(t, r, "auth0|known", time.Now())
	proxy.Partition()
	defer proxy.Heal()
	if _, err := r.Member(context.Background(), issuer, "auth0|first-sight", time.Now()); !apperr.DependencyDown(err) {
		t.Fatalf("first sight with the database hung: %v, want a dependency-down error", err)
	}
	if got := mustMember(t, r, "auth0|known", time.Now()); got != known {
		t.Fatalf("cached subject with the database hung: %d, want %d", got, known)
	}
}
