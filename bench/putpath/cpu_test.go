package putpath

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// clockTicks is the unit of the CPU times in /proc/<pid>/stat (USER_HZ, 100 on Linux).
const clockTicks = 100

// procCPU returns the CPU seconds (user + system) pid has used, and with children also those
// of its children it has waited for; ppid is its parent's pid. ok is false when pid is gone.
func procCPU(pid int, withChildren bool) (seconds float64, ppid int, ok bool) {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, 0, false
	}
	// The command name (field 2) may hold spaces; the fields after it start past its ')'.
	fields := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	// fields[0] is field 3 (state): ppid is field 4, utime..cstime fields 14..17.
	num := func(field int) float64 {
		v, _ := strconv.ParseFloat(fields[field-3], 64)
		return v
	}
	ticks := num(14) + num(15)
	if withChildren {
		ticks += num(16) + num(17)
	}
	return ticks / clockTicks, int(num(4)), true
}

// cpuOf returns the CPU seconds pid has used.
func cpuOf(pid int) float64 {
	s, _, _ := procCPU(pid, false)
	return s
}

// treeCPU returns the CPU seconds of pid, of its living children and of those it has reaped:
// a PostgreSQL postmaster and its backends.
func treeCPU(pid int) float64 {
	total, _, _ := procCPU(pid, true)
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil || child == pid {
			continue
		}
		if s, ppid, ok := procCPU(child, false); ok && ppid == pid {
			total += s
		}
	}
	return total
}
