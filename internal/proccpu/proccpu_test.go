package proccpu

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// burn is a shell loop that spends CPU in the shell itself, about a third of a second here.
const burn = `i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done`

// TestTree_CountsReapedAndLivingChildren: a child this process has waited for and one still
// running are both charged to its Tree, at least as much as the kernel says each used.
func TestTree_CountsReapedAndLivingChildren(t *testing.T) {
	before, ok := Tree(os.Getpid())
	if !ok {
		t.Fatal("this process is not in /proc")
	}
	reaped := exec.Command("sh", "-c", burn)
	if err := reaped.Run(); err != nil {
		t.Fatal(err)
	}
	used := reaped.ProcessState.UserTime() + reaped.ProcessState.SystemTime()
	after, _ := Tree(os.Getpid())
	// The kernel's two counts round differently, by at most a tick each.
	if after-before < used-2*time.Second/clockTicks {
		t.Errorf("Tree grew by %v after a reaped child used %v", after-before, used)
	}

	living := exec.Command("sh", "-c", burn+"; sleep 60")
	if err := living.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = living.Process.Kill(); _ = living.Wait() }()
	var ticks int64
	for ticks < 10 { // the child's own CPU reaches 100 ms before it sleeps
		var ok bool
		if ticks, _, ok = stat(living.Process.Pid, false); !ok {
			t.Fatal("the running child is not in /proc")
		}
		time.Sleep(10 * time.Millisecond)
	}
	start := after
	after, _ = Tree(os.Getpid())
	if after-start < time.Duration(ticks)*time.Second/clockTicks {
		t.Errorf("Tree grew by %v while a living child used %d ticks", after-start, ticks)
	}

	if _, ok := Tree(1 << 30); ok {
		t.Error("Tree of a pid that cannot exist is ok")
	}
	if _, err := PostgreSQL(1 << 30); err == nil {
		t.Error("PostgreSQL of a pid that cannot exist has no error")
	}
}
