// Package binarytest runs a package's tests against the real playhead binary, built once per
// test binary.
package binarytest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/playhead/playhead/internal/pgtest"
)

// envBinary carries the built binary's path from the parent test process to its child.
const envBinary = "PLAYHEAD_TEST_BINARY"

// Main builds github.com/playhead/playhead/cmd/api into a temporary directory, sets *binary to
// its path, and runs the tests under pgtest.Main (leak check, test PostgreSQL stopped).
//
// pgtest.Main ends with os.Exit, so nothing can run after it in this process. To remove the
// temporary directory anyway, the process that builds the binary runs this same test binary
// again as a child with the binary's path in the environment; the child runs the tests, and
// the parent removes the directory and exits with the child's status.
func Main(m *testing.M, binary *string) {
	if path := os.Getenv(envBinary); path != "" {
		*binary = path
		pgtest.Main(m)
		return
	}
	os.Exit(buildAndRun())
}

func buildAndRun() int {
	dir, err := os.MkdirTemp("", "playhead-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "binarytest: temporary directory:", err)
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
		fmt.Fprintf(os.Stderr, "binarytest: %s build -o %s ./cmd/api failed: %v\n%s", goTool, path, err, out)
		return 1
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "binarytest: cannot find the test binary to run:", err)
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
		fmt.Fprintln(os.Stderr, "binarytest: running the tests:", err)
		return 1
	}
	return 0
}
