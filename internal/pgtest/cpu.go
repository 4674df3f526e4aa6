package pgtest

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/internal/proccpu"
)

// ServerCPU returns the CPU time (user + system) the PostgreSQL server behind pool has used so
// far: its postmaster, the children it has reaped, and its living children (backends, WAL
// writer, checkpointer, autovacuum). The server must run on this machine, which holds for the
// cluster this package starts and for scripts/devdb.sh's; benchmarks take the difference
// around their timed loop to report the database's CPU per row.
func ServerCPU(ctx context.Context, pool *pgxpool.Pool) (time.Duration, error) {
	var backend int
	if err := pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		return 0, fmt.Errorf("server cpu: %w", err)
	}
	return proccpu.PostgreSQL(backend)
}
