package erasure

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/backoff"
)

// fenceKey is the advisory lock key of the fence (playhead_erasure_fence and
// playhead_erasure_lock, migration 00027, hold the same number).
const fenceKey int64 = 4707270001

// writersBeforeSQL counts the transactions of this database that hold the fence's shared side
// and began at or before $1. pg_locks shows a bigint advisory key as classid (its high 32
// bits) and objid (its low 32 bits) with objsubid 1. A holder whose xact_start this role cannot
// see (another role's backend, without pg_read_all_stats) counts: it may be older. Both views
// are the server's, so the count is right behind a transaction pooler too: a transaction runs
// on one server connection, whose xact_start is its own.
const writersBeforeSQL = `
SELECT count(*) FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.classid = ($2::bigint >> 32)::oid AND l.objid = ($2::bigint & 4294967295)::oid
  AND l.objsubid = 1 AND l.mode = 'ShareLock' AND l.granted
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND (a.xact_start IS NULL OR a.xact_start <= $1)`

// The polls of WaitForWritersBefore start pollBase apart and double up to pollCap: a flush
// holds the fence for milliseconds.
const (
	pollBase = time.Millisecond
	pollCap  = 50 * time.Millisecond
)

// WaitForWritersBefore waits until no transaction that holds the fence's shared side and
// began at or before t (a time read from the database) is still running, polling pg_locks. A
// writer whose statement took its snapshot before a change committed holds the fence from
// before that statement until it ends, and began before the change: once this returns for a t
// read after the commit, every such writer has ended, and what it wrote is there to be seen.
// It takes no lock, so a caller that repeats it holds no writer back; a writer that runs long
// keeps it waiting, so the caller bounds ctx. It returns ctx's error when ctx ends first.
func WaitForWritersBefore(ctx context.Context, pool *pgxpool.Pool, t time.Time) error {
	for attempt := 1; ; attempt++ {
		var n int
		if err := pool.QueryRow(ctx, writersBeforeSQL, t, fenceKey).Scan(&n); err != nil {
			return fmt.Errorf("wait for the fenced writers before %s: %w", t.Format(time.RFC3339Nano), err)
		}
		if n == 0 {
			return nil
		}
		timer := time.NewTimer(backoff.Ceiling(attempt, pollBase, pollCap))
		select {
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("wait for %d fenced writers before %s: %w", n, t.Format(time.RFC3339Nano), ctx.Err())
		case <-timer.C:
		}
	}
}
