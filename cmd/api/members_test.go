package main

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/pgtest"
)

// TestMembersLink runs `playhead members link`: the subject maps to the member, and a second
// link of the subject, a link missing a flag and an unknown action exit 1 saying why.
func TestMembersLink(t *testing.T) {
	dbURL := pgtest.URL(t)
	env := map[string]string{"DATABASE_URL": dbURL}
	link := []string{"members", "link", "--issuer", "http://localhost:41234/", "--subject", "auth0|6571a", "--member", "1042"}
	p := binarytest.Run(t, env, link...)
	if code := p.Wait(t, binarytest.ExitTimeout); code != 0 {
		t.Fatalf("link: exit %d: %s", code, p.Stderr.String())
	}
	if out := p.Stdout.String(); !strings.Contains(out, "member 1042") {
		t.Errorf("stdout %q", out)
	}
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var member int64
	if err := conn.QueryRow(context.Background(), `SELECT member_id FROM member_subjects WHERE subject = 'auth0|6571a'`).Scan(&member); err != nil || member != 1042 {
		t.Fatalf("mapping: %d, %v", member, err)
	}
	for name, c := range map[string]struct {
		args []string
		says string
	}{
		"Again":         {link, "already linked"},
		"NoMember":      {link[:len(link)-2], "--member"},
		"UnknownAction": {[]string{"members", "unlink"}, "usage: playhead members link"},
	} {
		p := binarytest.Run(t, env, c.args...)
		if code := p.Wait(t, binarytest.ExitTimeout); code != 1 || !strings.Contains(p.Stderr.String(), c.says) {
			t.Errorf("%s: exit %d, stderr %q; want 1 saying %q", name, code, p.Stderr.String(), c.says)
		}
	}
}
