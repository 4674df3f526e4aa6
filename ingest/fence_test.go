package ingest_test

import (
	"context"
	"testing"
	"time"

	"github.com/playhead/playhead/erasure"
	"github.com/playhead/playhead/ingest"
	"github.com/playhead/playhead/internal/pgtest"
)

// An import does not hold the erasure fence for its whole transaction: its admin's member row
// (whose INSERT takes the fence's shared side, held until the transaction ends) is created
// before, and an erasure waiting for the fence would hold back every writer of every node
// behind it for as long as a large import takes. Here the import's transaction is held by a
// lock on import_rows, after its first statements; an erasure of another member completes
// meanwhile, and the import then succeeds.
func TestCreate_HoldsNoFenceWhileTheImportRuns(t *testing.T) {
	pool, _ := pgtest.Pool(t)
	ctx := context.Background()
	hold, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hold.Rollback(ctx) }()
	var holder int
	if err := hold.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&holder); err != nil {
		t.Fatal(err)
	}
	if _, err := hold.Exec(ctx, `LOCK TABLE import_rows IN SHARE MODE`); err != nil {
		t.Fatal(err)
	}
	created := make(chan error, 1)
	go func() {
		rows := []ingest.Row{{Number: 2, Collection: "c", Chapter: 1, Order: 1, VideoURL: "https://videos.example/a.mp4"}}
		_, err := ingest.NewStore(pool, 3).Create(ctx, 4_700_000_701, "sheet.csv", ingest.Sheet{Rows: rows})
		created <- err
	}()
	pgtest.WaitBlocked(t, pool, holder) // the import's transaction waits for import_rows
	var importer int
	if err := pool.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database()
		AND $1 = ANY(pg_blocking_pids(pid))`, holder).Scan(&importer); err != nil {
		t.Fatal(err)
	}
	erased := make(chan error, 1)
	go func() {
		_, err := erasure.Erase(context.Background(), pool, 4_700_000_702, erasure.MaxAttempts)
		erased <- err
	}()
	// Either the erasure ends, or it waits for the advisory lock the import holds.
	waiting := func() bool {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
			AND $1 = ANY(pg_blocking_pids(pid))`, importer).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	}
	for {
		select {
		case err := <-erased:
			if err != nil {
				t.Fatal(err)
			}
		default:
			if !waiting() {
				time.Sleep(time.Millisecond)
				continue
			}
			_ = hold.Rollback(ctx)
			<-erased
			<-created
			t.Fatal("the erasure waited for an import's transaction: every writer waits behind it for as long as the import takes")
		}
		break
	}
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-created; err != nil {
		t.Fatal(err)
	}
}
