package mediadelete_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/internal/pgtest"
)

// TestOwnerRoutes_AnotherMembersDeleteLocksNothing: another member's DELETE of a media is 404
// before it locks anything. Locking first (the owner's row, then the media row FOR UPDATE)
// would let any member hold a popular media's row with a flood of DELETEs, stalling every
// flush that inserts a first position for it (its foreign key check) and the owner's jobs.
// Here a transaction holds the media row FOR KEY SHARE, as such a flush does: the DELETE must
// answer without waiting for it.
func TestOwnerRoutes_AnotherMembersDeleteLocksNothing(t *testing.T) {
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	n := startNode(t, dbURL)
	admin, other := token(t, 1, true), token(t, 6, false)
	status, out := n.call(t, admin, http.MethodPost, "/v1/admin/media", "application/json", []byte(`{"title": "popular", "owner_id": 5}`))
	var id int64
	if _, err := fmt.Sscanf(string(out), `{"id":%d`, &id); status != http.StatusCreated || err != nil {
		t.Fatalf("admin POST: %d %s", status, out)
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT 1 FROM media WHERE id = $1 FOR KEY SHARE`, id); err != nil {
		t.Fatal(err)
	}
	answered := make(chan int, 1)
	req, err := http.NewRequest(http.MethodDelete, fmt.Sprintf("%s/v1/media/%d", n.addr, id), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+other)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	for {
		select {
		case status := <-answered:
			if status != http.StatusNotFound {
				t.Fatalf("another member's DELETE: %d, want 404", status)
			}
			return
		case <-time.After(10 * time.Millisecond):
		}
		if count(t, pool, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) > 0 {
			_ = tx.Rollback(ctx)
			t.Fatalf("another member's DELETE waits for a lock on the media (answered %d once released)", <-answered)
		}
	}
}
