package playback

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/playhead/playhead/internal/pgtest"
)

// markAudienceSQL's DO UPDATE … WHERE false does lock an existing mark until the
// marking transaction ends (a second transaction's FOR UPDATE NOWAIT fails with 55P03), and
// writes no new version (xmin unchanged).
func TestMarkAudience_HoldsAnExistingMarkWithoutWritingIt(t *testing.T) {
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
