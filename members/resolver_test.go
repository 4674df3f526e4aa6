package members_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/erasure"
	"github.com/playhead/playhead/internal/metrictest"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/members"
)

const issuer = "http://localhost:41234/"

// mustMember resolves subject and fails the test on an error.
func mustMember(t *testing.T, r *members.Resolver, subject string, iat time.Time) int64 {
	t.Helper()
	id, err := r.Member(context.Background(), issuer, subject, iat)
	if err != nil {
		t.Fatalf("Member(%q): %v", subject, err)
	}
	return id
}

// count returns the single integer sql answers.
func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// secondPool opens another pool on the test's database: another node.
func secondPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func TestResolver_FirstSight(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Pool(t)
	r := members.NewResolver(pool, members.Config{})
	now := time.Now()

	a := mustMember(t, r, "auth0|6571a", now)
	b := mustMember(t, r, "0b6c8f1e-2f0e-4a8e-9d7e-3c1b5a2d9e11", time.Time{})
	if a < members.FirstID || b < members.FirstID || a == b {
		t.Fatalf("ids %d and %d: want two distinct ids from %d on", a, b, members.FirstID)
	}
	if n := count(t, pool, `SELECT count(*) FROM members WHERE id IN ($1, $2)`, a, b); n != 2 {
		t.Fatalf("%d members rows, want 2: the member's row comes with the mapping", n)
	}
	if n := count(t, pool, `SELECT member_id FROM member_subjects WHERE issuer = $1 AND subject = 'auth0|6571a'`, issuer); n != a {
		t.Fatalf("mapped to %d, want %d", n, a)
	}
	// Another resolver (a restarted node) reads the same mapping and creates nothing.
	again := members.NewResolver(pool, members.Config{})
	if got := mustMember(t, again, "auth0|6571a", now); got != a {
		t.Fatalf("second sight: %d, want %d", got, a)
	}
	// The same subject at another issuer is another person.
	other, err := again.Member(context.Background(), "https://other.example/", "auth0|6571a", now)
	if err != nil || other == a {
		t.Fatalf("other issuer: %d, %v; want a new id", other, err)
	}
	if n := count(t, pool, `SELECT count(*) FROM member_subjects`); n != 3 {
		t.Fatalf("%d mappings, want 3", n)
	}
}

// Two nodes (two pools) seeing the same new subjects at once give every subject one id.
func TestResolver_ConcurrentFirstSight(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.Pool(t)
	nodes := []*members.Resolver{
		members.NewResolver(pool, members.Config{}),
		members.NewResolver(secondPool(t, url), members.Config{}),
	}
	const subjects, perNode = 50, 4
	got := make([][]int64, subjects)
	for i := range got {
		got[i] = make([]int64, len(nodes)*perNode)
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, len(nodes)*perNode)
	for n, r := range nodes {
		for g := range perNode {
			wg.Go(func() {
				<-start
				for s := range subjects {
					id, err := r.Member(context.Background(), issuer, fmt.Sprintf("user-%d", s), time.Now())
					if err != nil {
						errs <- err
						return
					}
					got[s][n*perNode+g] = id
				}
			})
		}
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for s, ids := range got {
		for _, id := range ids {
			if id != ids[0] {
				t.Fatalf("subject %d got ids %v: want one", s, ids)
			}
		}
	}
	if n := count(t, pool, `SELECT count(*) FROM member_subjects`); n != subjects {
		t.Fatalf("%d mappings, want %d", n, subjects)
	}
	if n := count(t, pool, `SELECT count(*) FROM members`); n != subjects {
		t.Fatalf("%d members, want %d: a conflict must not leave a member without a subject", n, subjects)
	}
}

// A mapping is read once per node: the next tokens are answered from memory.
func TestResolver_Cache(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Pool(t)
	reg := prometheus.NewRegistry()
	r := members.NewResolver(pool, members.Config{Registerer: reg})
	id := mustMember(t, r, "cached", time.Now())
	// Gone from the database, the mapping still answers here: the proof it came from memory.
	if _, err := pool.Exec(context.Background(), `DELETE FROM member_subjects`); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if got := mustMember(t, r, "cached", time.Now()); got != id {
			t.Fatalf("cached sight: %d, want %d", got, id)
		}
	}
	for name, want := range map[string]float64{"created_total": 1, "resolver_misses_total": 1, "resolver_hits_total": 3} {
		if got := metrictest.Counter(t, reg, "playhead_members_"+name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}

// A full cache drops an entry for each new one: a dropped subject is read again.
func TestResolver_CacheBound(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Pool(t)
	subjects := []string{"a", "b", "c"}
	for _, c := range []struct {
		max          int
		readAgainMin int64
		readAgainMax int64
	}{{max: 3, readAgainMin: 0, readAgainMax: 0}, {max: 2, readAgainMin: 1, readAgainMax: 3}} {
		r := members.NewResolver(pool, members.Config{MaxCached: c.max})
		for _, s := range subjects {
			mustMember(t, r, s, time.Now())
		}
		// Without the mappings in the database, a subject the cache dropped is created again.
		if _, err := pool.Exec(context.Background(), `DELETE FROM member_subjects`); err != nil {
			t.Fatal(err)
		}
		for _, s := range subjects {
			mustMember(t, r, s, time.Now())
		}
		if n := count(t, pool, `SELECT count(*) FROM member_subjects`); n < c.readAgainMin || n > c.readAgainMax {
			t.Fatalf("cache of %d: %d of 3 subjects read again, want %d to %d", c.max, n, c.readAgainMin, c.readAgainMax)
		}
		if _, err := pool.Exec(context.Background(), `DELETE FROM member_subjects`); err != nil {
			t.Fatal(err)
		}
	}
}

func TestResolver_Bounds(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Pool(t)
	r := members.NewResolver(pool, members.Config{})
	long := strings.Repeat("é", 127) + "x" // 255 bytes
	if id := mustMember(t, r, long, time.Now()); id < members.FirstID {
		t.Fatalf("255-byte subject: id %d", id)
	}
	for name, c := range map[string]struct{ issuer, subject string }{
		"Subject256":   {issuer, long + "x"},
		"SubjectEmpty": {issuer, ""},
		"IssuerEmpty":  {"", "a"},
		"Issuer2049":   {"https://" + strings.Repeat("a", 2041), "a"},
		"NotUTF8":      {issuer, "a\xffb"},
		"NUL":          {issuer, "a\x00b"},
	} {
		_, err := r.Member(context.Background(), c.issuer, c.subject, time.Now())
		if apperr.CodeOf(err) != apperr.Unauthenticated {
			t.Errorf("%s: %v, want an unauthenticated error", name, err)
		}
	}
	if n := count(t, pool, `SELECT count(*) FROM member_subjects`); n != 1 {
		t.Fatalf("%d mappings, want 1", n)
	}
}

// An erasure deletes the mapping and keeps its digest: an older token of the subject is
// refused on every node, a newer one is a new member; a node that cached the mapping drops it
// once its Set knows of the erasure.
func TestResolver_Erasure(t *testing.T) {
	t.Parallel()
	pool, url := pgtest.Pool(t)
	ctx := context.Background()
	other := secondPool(t, url)
	otherErased := erasure.NewSet(other, nil)
	node1 := members.NewResolver(pool, members.Config{})
	node2 := members.NewResolver(other, members.Config{Erased: otherErased.Contains})
	const subject = "auth0|erased"
	before := time.Now().Add(-time.Minute)

	id := mustMember(t, node1, subject, before)
	if got := mustMember(t, node2, subject, before); got != id {
		t.Fatalf("node 2: %d, want %d", got, id)
	}
	if _, err := erasure.Erase(ctx, pool, id, 1); err != nil {
		t.Fatal(err)
	}
	var erasedAt time.Time
	var digest []byte
	if err := pool.QueryRow(ctx, `SELECT erased_at, subject_digest FROM member_erasures WHERE member_id = $1`, id).Scan(&erasedAt, &digest); err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256([]byte(issuer + "\x00" + subject))
	if string(digest) != string(want[:]) {
		t.Fatalf("digest %x, want SHA-256(issuer NUL subject) %x", digest, want)
	}
	if n := count(t, pool, `SELECT count(*) FROM member_subjects WHERE member_id = $1`, id); n != 0 {
		t.Fatal("the erased member's subject is still stored")
	}
	// Node 2 learns of the erasure the way a node does (its Set reads member_erasures).
	if err := otherErased.Start(ctx); err != nil {
		t.Fatal(err)
	}
	fresh := members.NewResolver(pool, members.Config{})
	for name, r := range map[string]*members.Resolver{"node2": node2, "fresh": fresh} {
		for _, iat := range []time.Time{before, {}, erasedAt.Add(-time.Millisecond)} {
			if got, err := r.Member(ctx, issuer, subject, iat); !errors.Is(err, members.ErrErased) {
				t.Fatalf("%s, token issued at %v: %d, %v; want ErrErased", name, iat, got, err)
			}
		}
	}
	if n := count(t, pool, `SELECT count(*) FROM member_subjects`); n != 0 {
		t.Fatalf("%d mappings after refused tokens: a refused token creates no member", n)
	}
	// Refused twice from memory, then a token issued after the erasure: a new member, which an
	// old token does not reach either.
	after := erasedAt.Add(time.Second)
	newID := mustMember(t, node2, subject, after)
	if newID == id || newID < members.FirstID {
		t.Fatalf("after the erasure: %d, want a new id (erased %d)", newID, id)
	}
	if got := mustMember(t, fresh, subject, after); got != newID {
		t.Fatalf("fresh node after the erasure: %d, want %d", got, newID)
	}
	if _, err := node2.Member(ctx, issuer, subject, before); !errors.Is(err, members.ErrErased) {
		t.Fatalf("old token after the new sign-up: %v, want ErrErased", err)
	}
}
