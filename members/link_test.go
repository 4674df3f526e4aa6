package members_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/erasure"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/members"
)

func TestLink(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Pool(t)
	ctx := context.Background()

	// A member of the shared-secret mode, with data, becomes the provider's subject.
	if err := members.Link(ctx, pool, issuer, "auth0|linked", 42); err != nil {
		t.Fatal(err)
	}
	r := members.NewResolver(pool, members.Config{})
	if got := mustMember(t, r, "auth0|linked", time.Now()); got != 42 {
		t.Fatalf("linked subject resolves to %d, want 42", got)
	}
	if n := count(t, pool, `SELECT count(*) FROM members WHERE id = 42`); n != 1 {
		t.Fatal("the linked member has no members row")
	}

	if _, err := erasure.Erase(ctx, pool, 7, 1); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		subject string
		member  int64
		want    error
		says    string
	}{
		"SubjectLinked": {"auth0|linked", 43, members.ErrLinked, "the subject is another member's"},
		"MemberLinked":  {"auth0|other", 42, members.ErrLinked, "the member has another subject"},
		"Erased":        {"auth0|erased", 7, members.ErrLinkErased, "erased"},
	} {
		if err := members.Link(ctx, pool, issuer, c.subject, c.member); !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want %v saying %q", name, err, c.want, c.says)
		}
	}
	for _, member := range []int64{0, -1, members.FirstID} {
		if err := members.Link(ctx, pool, issuer, "auth0|range", member); err == nil {
			t.Errorf("member %d linked: want a refusal (not a shared-secret id)", member)
		}
	}
	if n := count(t, pool, `SELECT count(*) FROM member_subjects`); n != 1 {
		t.Fatalf("%d mappings, want 1: a refused link stores nothing", n)
	}
	if n := count(t, pool, `SELECT count(*) FROM members WHERE id = 7`); n != 0 {
		t.Fatal("the refused link of an erased member created its row")
	}
}
