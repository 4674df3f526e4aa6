package playback

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/media"
)

// Review 5: markAudienceSQL's DO UPDATE … WHERE false does lock an existing mark until the
// marking transaction ends (a second transaction's FOR UPDATE NOWAIT fails with 55P03), and
// writes no new version (xmin unchanged).
func TestReview5_MarkWhereFalseLocksTheExistingMark(t *testing.T) {
	pool, _ := pgtest.Pool(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO audience_dirty VALUES (42)`); err != nil {
		t.Fatal(err)
	}
	var xmin0 string
	if err := pool.QueryRow(ctx, `SELECT xmin::text FROM audience_dirty WHERE media_id = 42`).Scan(&xmin0); err != nil {
		t.Fatal(err)
	}
	flush, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer flush.Rollback(ctx)
	tag, err := flush.Exec(ctx, markAudienceSQL, []int64{42})
	if err != nil {
		t.Fatal(err)
	}
	if tag.RowsAffected() != 0 {
		t.Errorf("mark of an existing row affected %d rows", tag.RowsAffected())
	}
	other, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback(ctx)
	_, err = other.Exec(ctx, `SELECT 1 FROM audience_dirty WHERE media_id = 42 FOR UPDATE NOWAIT`)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "55P03" {
		t.Fatalf("FOR UPDATE NOWAIT while the marking transaction is open: %v; want 55P03", err)
	}
	_ = other.Rollback(ctx)
	if err := flush.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var xmin1 string
	if err := pool.QueryRow(ctx, `SELECT xmin::text FROM audience_dirty WHERE media_id = 42 FOR UPDATE NOWAIT`).Scan(&xmin1); err != nil {
		t.Fatalf("after commit: %v", err)
	}
	if xmin1 != xmin0 {
		t.Errorf("the mark was rewritten: xmin %s -> %s", xmin0, xmin1)
	}
}

// Review 5: the lock that markAudienceSQL now takes on an existing mark is held to the commit,
// so every write of a media serializes on that media's mark, whatever the member: here a
// synchronous UpsertOne (the baseline, one request) of member 2 waits for member 1's flush of
// the same media to commit. Before (DO NOTHING) they did not touch a common row. On a hot
// media every commit (and its WAL flush) of every node's flush, or every request in the
// synchronous mode, goes one at a time.
func TestReview5_WritesOfOneMediaSerializeOnItsMark(t *testing.T) {
	pool, _ := pgtest.Pool(t)
	ctx := context.Background()
	var id int64
	if _, err := pool.Exec(ctx, `INSERT INTO members (id) VALUES (1), (2) ON CONFLICT DO NOTHING`); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `
		INSERT INTO media (owner_id, title, status, visibility, duration_ms, hls_key)
		VALUES (1, 'hot', 'READY', 'PUBLIC', 600000, 'hls/x/master.m3u8') RETURNING id`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO audience_dirty VALUES ($1)`, id); err != nil {
		t.Fatal(err)
	}
	flush, err := pool.Begin(ctx) // member 1's flush, between its mark and its commit
	if err != nil {
		t.Fatal(err)
	}
	defer flush.Rollback(ctx)
	if _, err := flush.Exec(ctx, markAudienceSQL, []int64{id}); err != nil {
		t.Fatal(err)
	}
	s := NewStore(pool, media.DefaultCompletion)
	tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	start := time.Now()
	err = s.UpsertOne(tctx, Key{Member: 2, Media: id}, Position{PositionMS: 1000, EventTime: time.Now()})
	if err != nil || time.Since(start) > time.Second {
		t.Errorf("member 2's write of media %d waited %s on member 1's open flush: %v", id, time.Since(start), err)
	}
}
