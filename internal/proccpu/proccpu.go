// Package proccpu reads the CPU time processes of this machine have used, from /proc (Linux):
// what benchmarks and the load generator divide by the work done to report CPU per row or per
// request of a server they did not start, PostgreSQL's above all.
package proccpu

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the unit of the CPU times in /proc/<pid>/stat (USER_HZ, 100 on Linux).
const clockTicks = 100

// Process returns the CPU time (user + system) process pid has used so far, its children
// left out. ok is false when pid is gone.
func Process(pid int) (total time.Duration, ok bool) {
	ticks, _, ok := stat(pid, false)
	return time.Duration(ticks) * time.Second / clockTicks, ok
}

// Tree returns the CPU time (user + system) process pid has used so far, with the children it
// has reaped and its living children (one level: PostgreSQL's backends, WAL writer,
// checkpointer and autovacuum are children of the postmaster). ok is false when pid is gone.
func Tree(pid int) (total time.Duration, ok bool) {
	ticks, _, ok := stat(pid, true)
	if !ok {
		return 0, false
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil || child == pid {
			continue
		}
		if t, ppid, ok := stat(child, false); ok && ppid == pid {
			ticks += t
		}
	}
	return time.Duration(ticks) * time.Second / clockTicks, true
}

// PostgreSQL returns the CPU time the PostgreSQL server that backend (a backend's pid, from
// `SELECT pg_backend_pid()`) belongs to has used so far: its postmaster's Tree. The server
// must run on this machine.
func PostgreSQL(backend int) (time.Duration, error) {
	_, postmaster, ok := stat(backend, false)
	if !ok {
		return 0, fmt.Errorf("postgresql cpu: backend %d is not a process of this machine", backend)
	}
	total, ok := Tree(postmaster)
	if !ok {
		return 0, fmt.Errorf("postgresql cpu: postmaster %d is gone", postmaster)
	}
	return total, nil
}

// stat returns the CPU clock ticks (user + system) pid has used, and with children also those
// of its children it has waited for; ppid is its parent's pid. ok is false when pid is gone.
func stat(pid int, withChildren bool) (ticks int64, ppid int, ok bool) {
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
