package pgtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// clockTicks is the unit of the CPU times in /proc/<pid>/stat (USER_HZ, 100 on Linux).
const clockTicks = 100

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
	_, postmaster, ok := procCPU(backend, false)
	if !ok {
		return 0, fmt.Errorf("server cpu: backend %d is not a process of this machine", backend)
	}
	total, _, ok := procCPU(postmaster, true)
	if !ok {
		return 0, fmt.Errorf("server cpu: postmaster %d is gone", postmaster)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("server cpu: %w", err)
	}
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil || child == postmaster {
			continue
		}
		if ticks, ppid, ok := procCPU(child, false); ok && ppid == postmaster {
			total += ticks
		}
	}
	return time.Duration(total) * time.Second / clockTicks, nil
}

// procCPU returns the CPU clock ticks (user + system) pid has used, and with children also
// those of its children it has waited for; ppid is its parent's pid. ok is false when pid is
// gone.
func procCPU(pid int, withChildren bool) (ticks int64, ppid int, ok bool) {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, 0, false
	}
	// The command name (field 2) may hold spaces; the fields after it start past its ')'.
	fields := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	// fields[0] is field 3 (state): ppid is field 4, utime..cstime fields 14..17.
	num := func(field int) int64 {
		v, _ := strconv.ParseInt(fields[field-3], 10, 64)
		return v
	}
	ticks = num(14) + num(15)
	if withChildren {
		ticks += num(16) + num(17)
	}
	return ticks, int(num(4)), true
}
