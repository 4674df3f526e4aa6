package grafana_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/playhead/playhead/internal/pgtest"
)

// envBinary carries the path of the built binary from the parent test process to the child
// that runs the tests (see TestMain).
const envBinary = "PLAYHEAD_GRAFANA_TEST_BINARY"

// binary is the playhead executable the dashboard check runs.
var binary string

// TestMain builds the real binary once, into a temporary directory, and runs the tests
// against it under pgtest.Main. As in cmd/api, pgtest.Main ends with os.Exit, so the process
// that builds the binary runs this test binary again as a child and removes the directory
// when the child has exited.
func TestMain(m *testing.M) {
	if path := os.Getenv(envBinary); path != "" {
		binary = path
		pgtest.Main(m)
		return
	}
	os.Exit(buildAndRun())
}

// buildAndRun builds the binary, runs the tests in a child process and returns its exit code.
func buildAndRun() int {
	dir, err := os.MkdirTemp("", "playhead-grafana-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "grafana: temporary directory:", err)
		return 1
	}
	defer os.RemoveAll(dir)

	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = "/usr/local/go/bin/go"
	}
	path := filepath.Join(dir, "playhead")
	build := exec.Command(goTool, "build", "-o", path, "github.com/playhead/playhead/cmd/api")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "grafana: %s build -o %s ./cmd/api failed: %v\n%s", goTool, path, err, out)
		return 1
	}

	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "grafana: cannot find the test binary to run:", err)
		return 1
	}
	child := exec.Command(self, os.Args[1:]...)
	child.Env = append(os.Environ(), envBinary+"="+path)
	child.Stdin, child.Stdout, child.Stderr = os.Stdin, os.Stdout, os.Stderr
	err = child.Run()
	if exitErr, ok := errors.AsType[*exec.ExitError](err); ok && exitErr.ExitCode() >= 0 {
		return exitErr.ExitCode()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "grafana: running the tests:", err)
		return 1
	}
	return 0
}
