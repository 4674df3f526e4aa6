package encoder_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/testvideo"
)

// TestEncoder_CancelKillsFFmpeg: a cancelled encode (its claim lost, its worker stopping)
// returns the cancel cause only once its ffmpeg is gone from /proc, so a lost claim does not
// leave an encode burning the cores that the job's next worker needs. Checking the error alone
// passed with an Encode that returned at once and left ffmpeg running.
func TestEncoder_CancelKillsFFmpeg(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	input := testvideo.MP4(t, dir, testvideo.Spec{Seconds: 10, Width: 1280, Height: 720})
	out := filepath.Join(dir, "out")
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("claim lost")
	found := make(chan int, 1)
	go func() { // cancel mid-encode: once this encode's ffmpeg runs
		giveUp := time.Now().Add(time.Minute)
		for time.Now().Before(giveUp) {
			if pid := childWithArg("ffmpeg", out); pid != 0 {
				found <- pid
				cancel(cause)
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		found <- 0
		cancel(errors.New("no ffmpeg seen"))
	}()
	_, err := newEncoder(t).Encode(ctx, input, out)
	pid := <-found
	if pid == 0 {
		t.Fatalf("no ffmpeg writing to %s appeared among this process's children within a minute (Encode: %v)", out, err)
	}
	if !errors.Is(err, cause) {
		t.Fatalf("Encode with a cancelled context = %v, want the cancel cause", err)
	}
	if state, ok := procState(pid); ok {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("ffmpeg (pid %d) still exists after the cancelled Encode returned (state %s)", pid, state)
	}
}

// childWithArg returns the pid of a child of this process named comm whose command line has
// an argument containing arg, or 0.
func childWithArg(comm, arg string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces, so split after its closing bracket.
		open, end := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
		if open < 0 || end < open {
			continue
		}
		fields := strings.Fields(string(stat[end+1:]))
		if string(stat[open+1:end]) != comm || len(fields) < 2 || fields[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if bytes.Contains(cmdline, []byte(arg)) {
			return pid
		}
	}
	return 0
}

// procState returns the state letter of process pid (Z for a zombie not yet reaped), and
// false when no such process exists.
func procState(pid int) (string, bool) {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "", false
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(fields) == 0 {
		return "?", true
	}
	return fields[0], true
}
