package pgtest

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// WaitBlocked waits until a backend of pool's database waits for a lock that the backend
// blocker (a pg_backend_pid) holds, or, with blocker 0, for any lock: what a test that holds a
// lock on purpose waits on before it lets go, so that the other side has really reached it. It
// fails the test after 30 s.
func WaitBlocked(t testing.TB, pool *pgxpool.Pool, blocker int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND ($1 = 0 OR $1 = ANY(pg_blocking_pids(pid)))`,
			blocker).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no backend waited for a lock (held by backend %d; 0: any) within 30 s", blocker)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
