package encoder

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill ffmpeg when the worker dies, even by SIGKILL: without
// it a kill -9'd worker leaves its encode running, burning the cores its replacement needs.
// (The signal follows the OS thread that started ffmpeg; the Go runtime keeps its threads
// unless a goroutine exits while locked to one, which this program never does.)
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
