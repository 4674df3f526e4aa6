package members_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/members"
)

// A token of a subject whose erasure is in flight, on a node that has not cached the
// subject: its first sight waits for the erasure behind the fence, then reads its record
// and refuses the token. Without the fence it read no record, its insert waited only for the
// erased mapping's row, and once that row was gone it mapped the erased subject's old token
// to a new member.
func TestResolver_FirstSightDuringAnErasure(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Pool(t)
	ctx := context.Background()
	const subject = "auth0|erased-meanwhile"
	before := time.Now().Add(-time.Minute)
	id := mustMember(t, members.NewResolver(pool, members.Config{}), subject, before)

	// The erasure, as erasure.Erase does it, held open.
	tx, pid := beginErasure(t, pool)
	if _, err := tx.Exec(ctx, `WITH unlinked AS (
		DELETE FROM member_subjects WHERE member_id = $1 RETURNING playhead_subject_digest(issuer, subject) AS digest)
		INSERT INTO member_erasures (member_id, erased_at, subject_digest) VALUES ($1, statement_timestamp(), (SELECT digest FROM unlinked))`, id); err != nil {
		t.Fatal(err)
	}

	type result struct {
		id  int64
		err error
	}
	done := make(chan result, 1)
	go func() {
		got, err := members.NewResolver(pool, members.Config{}).Member(ctx, issuer, subject, before)
		done <- result{got, err}
	}()
	pgtest.WaitBlocked(t, pool, pid)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-done; !errors.Is(r.err, members.ErrErased) {
		t.Fatalf("the old token of a subject erased during its first sight: member %d, %v; want ErrErased", r.id, r.err)
	}
	if n := count(t, pool, `SELECT count(*) FROM member_subjects`); n != 0 {
		t.Fatalf("%d mappings after the erasure", n)
	}
}

// A link to a member whose erasure is in flight waits for it behind the fence and is refused
// as erased, storing nothing. (Without the fence the members table's trigger still refuses it,
// as a database error rather than ErrLinkErased.)
func TestLink_DuringAnErasure(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Pool(t)
	ctx := context.Background()
	const member = 77
	tx, pid := beginErasure(t, pool)
	if _, err := tx.Exec(ctx, `INSERT INTO member_erasures (member_id, erased_at) VALUES ($1, statement_timestamp())`, member); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- members.Link(ctx, pool, issuer, "auth0|linked-meanwhile", member) }()
	pgtest.WaitBlocked(t, pool, pid)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, members.ErrLinkErased) {
		t.Fatalf("a link during the member's erasure: %v, want ErrLinkErased", err)
	}
	if n := count(t, pool, `SELECT count(*) FROM member_subjects`); n != 0 {
		t.Fatalf("%d mappings of an erased member", n)
	}
}

// beginErasure opens a transaction holding the erasure's lock, as erasure.Erase does, and
// returns it with its backend's pid; the test's cleanup rolls it back if it is still open.
func beginErasure(t *testing.T, pool *pgxpool.Pool) (pgx.Tx, int) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	var pid int
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT playhead_erasure_lock()`); err != nil {
		t.Fatal(err)
	}
	return tx, pid
}
