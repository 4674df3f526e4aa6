package encoder_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/encoder"
	"github.com/playhead/playhead/internal/testvideo"
)

// TestEncoder_YieldRunsEveryFFmpegThreadAtNice10: a yielding run (RenditionOptions.Yield, every
// rendition job of a group but the first) has each thread of its ffmpeg, x264's included, at
// nice 10 while it encodes, and a run that does not yield has them at this process's own nice:
// setting the priority of ffmpeg's first thread after it started would leave the threads it had
// already made at full priority.
func TestEncoder_YieldRunsEveryFFmpegThreadAtNice10(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	input := testvideo.MP4(t, dir, testvideo.Spec{Seconds: 10, Width: 1280, Height: 720})
	e := newEncoder(t)
	plan, err := e.Plan(context.Background(), input)
	if err != nil {
		t.Fatal(err)
	}
	own, ok := threadNice(os.Getpid(), strconv.Itoa(os.Getpid()))
	if !ok {
		t.Fatal("cannot read this process's nice value")
	}
	for _, tc := range []struct {
		yield bool
		want  int
	}{{true, 10 + own}, {false, own}} {
		out := filepath.Join(dir, "out-"+strconv.FormatBool(tc.yield))
		seen := make(chan map[string]int, 1)
		go func() { // every thread of this run's ffmpeg, sampled until it is gone
			threads := map[string]int{}
			giveUp := time.Now().Add(time.Minute)
			pid := 0
			for time.Now().Before(giveUp) {
				if pid == 0 {
					pid = childWithArg("ffmpeg", out)
				} else if _, alive := procState(pid); !alive {
					break
				} else {
					tasks, _ := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
					for _, task := range tasks {
						if nice, ok := threadNice(pid, task.Name()); ok {
							threads[task.Name()] = nice
						}
					}
				}
				time.Sleep(2 * time.Millisecond)
			}
			seen <- threads
		}()
		if _, err := e.EncodeRenditions(context.Background(), input, out, plan, []int{0, 1}, encoder.RenditionOptions{Yield: tc.yield}); err != nil {
			t.Fatal(err)
		}
		threads := <-seen
		if len(threads) < 2 {
			t.Fatalf("yield %v: saw %d threads of the encode's ffmpeg, want its many (x264 runs several)", tc.yield, len(threads))
		}
		for tid, nice := range threads {
			if nice != tc.want {
				t.Errorf("yield %v: ffmpeg thread %s at nice %d, want %d (%d threads seen)", tc.yield, tid, nice, tc.want, len(threads))
			}
		}
	}
}

// threadNice reads the nice value of thread tid of process pid (the 19th field of its stat).
func threadNice(pid int, tid string) (int, bool) {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "task", tid, "stat"))
	if err != nil {
		return 0, false
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(fields) < 17 {
		return 0, false
	}
	nice, err := strconv.Atoi(fields[16])
	return nice, err == nil
}
