package binarytest

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ExitTimeout bounds how long a test waits for a process to exit after a signal, or for a
// short-lived command (a refused configuration, `playhead token`) to end.
const ExitTimeout = 60 * time.Second

// Process is one running program.
type Process struct {
	// Cmd is the command as started; Cmd.Process.Pid is its pid.
	Cmd *exec.Cmd
	// Stdout and Stderr collect the output so far (both are the same Output for StartProcess).
	Stdout, Stderr *Output

	done    chan struct{} // closed once the process exited and Wait returned
	waitErr error         // Wait's result, written before done is closed
}

// Run starts the binary with args and exactly the environment env (plus PATH and HOME), in a
// temporary working directory.
func Run(t testing.TB, env map[string]string, args ...string) *Process {
	t.Helper()
	return runBinary(t, binary, env, args...)
}

// runBinary is Run with the playhead executable at path.
func runBinary(t testing.TB, path string, env map[string]string, args ...string) *Process {
	t.Helper()
	cmd := exec.Command(path, args...)
	cmd.Dir = t.TempDir()
	// Only the variables the test chooses: a PLAYHEAD_* or DATABASE_URL in the developer's
	// shell must not change what the binary does here.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	p := &Process{Cmd: cmd, Stdout: &Output{}, Stderr: &Output{}}
	p.start(t, "playhead "+strings.Join(args, " "))
	return p
}

// StartProcess starts cmd (another program the test needs, such as Prometheus), with its
// stdout and stderr collected into one Output.
func StartProcess(t testing.TB, cmd *exec.Cmd) *Process {
	t.Helper()
	out := &Output{}
	p := &Process{Cmd: cmd, Stdout: out, Stderr: out}
	p.start(t, cmd.Path)
	return p
}

// start runs the command, kills it in t.Cleanup if it is still running then, and logs its
// output if the test failed.
func (p *Process) start(t testing.TB, name string) {
	t.Helper()
	p.Cmd.Stdout, p.Cmd.Stderr = p.Stdout, p.Stderr
	p.done = make(chan struct{})
	if err := p.Cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.waitErr = p.Cmd.Wait()
		close(p.done)
	}()
	// Cleanups run last-registered first: kill and reap, then log the complete output.
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		if p.Stdout == p.Stderr {
			t.Logf("%s output:\n%s", name, p.Stdout)
			return
		}
		t.Logf("%s stdout:\n%s", name, p.Stdout)
		t.Logf("%s stderr:\n%s", name, p.Stderr)
	})
	t.Cleanup(func() {
		if exited, _ := p.Exited(); exited {
			return
		}
		_ = p.Cmd.Process.Kill()
		select {
		case <-p.done:
		case <-time.After(ExitTimeout):
			t.Errorf("%s pid %d did not exit after SIGKILL", name, p.Cmd.Process.Pid)
		}
	})
}

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited, and then how (exec.Cmd.Wait's error).
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// Wait waits up to timeout for the process to exit and returns its exit code (-1 when a
// signal killed it); it fails the test if the process is still running then.
func (p *Process) Wait(t testing.TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("pid %d still running %s after it should have exited", p.Cmd.Process.Pid, timeout)
	}
	if exitErr, ok := errors.AsType[*exec.ExitError](p.waitErr); ok {
		return exitErr.ExitCode()
	}
	if p.waitErr != nil {
		t.Fatalf("waiting for pid %d: %v", p.Cmd.Process.Pid, p.waitErr)
	}
	return 0
}

// Signal sends sig to the process.
func (p *Process) Signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := p.Cmd.Process.Signal(sig); err != nil {
		t.Fatalf("send %v to pid %d: %v", sig, p.Cmd.Process.Pid, err)
	}
}

// Kill sends SIGKILL and waits until the process is gone.
func (p *Process) Kill(t testing.TB) {
	t.Helper()
	p.Signal(t, syscall.SIGKILL)
	p.Wait(t, ExitTimeout)
}

// Stop sends SIGTERM and fails the test unless the process exits with status 0 within
// ExitTimeout: a graceful stop.
func (p *Process) Stop(t testing.TB) {
	t.Helper()
	p.Signal(t, syscall.SIGTERM)
	if code := p.Wait(t, ExitTimeout); code != 0 {
		t.Fatalf("pid %d exited with status %d after SIGTERM, want 0", p.Cmd.Process.Pid, code)
	}
}
