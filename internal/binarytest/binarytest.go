// Package binarytest is the one harness for tests that run the real playhead binary: it builds
// the binary once per test binary, runs it on loopback against a fresh PostgreSQL database
// (internal/pgtest), and drives it over real HTTP.
//
// A package that uses it calls Main from its TestMain:
//
//	func TestMain(m *testing.M) { binarytest.Main(m) }
//
// Then, in a test:
//
//	s := binarytest.Start(t, map[string]string{"PLAYHEAD_FLUSH_INTERVAL": "250ms"})
//	admin, member := binarytest.Token(t, 1, true), binarytest.Token(t, 42, false)
//	id := s.CreateMedia(t, admin, "a film")
//	s.MustDo(t, http.StatusNoContent, http.MethodPut, s.URL("/v1/playback/%d", id), member, map[string]any{"position_ms": 1000})
//	s.Stop(t) // SIGTERM; the test fails unless it exits 0
//
// What there is:
//   - Start: `playhead serve` with a fresh migrated database, loopback listeners for the public
//     API and the metrics, the signing secret Secret, and env on top (a DATABASE_URL in env,
//     such as another Server's DBURL, shares that database). It returns once /readyz answers
//     200. Run starts any other subcommand; StartProcess any other program (Prometheus).
//   - Process (embedded in Server): Wait, Done, Exited, Signal, Kill, Stop (graceful), and the
//     Stdout and Stderr collected so far. Every process is killed when its test ends, and its
//     output logged if the test failed.
//   - Requests: Do and MustDo (JSON in, status and body out), URL and MetricsURL, Token (a
//     member's or an admin's token signed with Secret), CreateMedia, Upload (POST /v1/media),
//     Import (POST /v1/admin/imports), PostMultipart for anything else multipart.
//     Every exchange of Client with the public API is checked against api/openapi.yaml
//     (internal/contract): one the document does not describe fails the test when it ends.
//   - Observing: Metrics and Metric (a sum over /metrics), Ready (the /readyz status), Pool (a
//     pgx pool on the server's database), StoredPositions (every playback row).
//   - VideoHost: a loopback stand-in for a cloud drive, for imports.
//   - The playback load driver: NewPlayers, StartLoad, Load (WaitAccepted, WaitRounds, Stop,
//     Counts, TakeLatencies) and Audit, which compares what the players were told with what is
//     stored.
//
// Every timeout here only bounds how long a test waits before it fails; none is a speed check.
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

// binary is the playhead executable under test, set by Main.
var binary string

// Main builds github.com/playhead/playhead/cmd/api into a temporary directory and runs the
// tests under pgtest.Main (leak check, test PostgreSQL stopped).
//
// pgtest.Main ends with os.Exit, so nothing can run after it in this process. To remove the
// temporary directory anyway, the process that builds the binary runs this same test binary
// again as a child with the binary's path in the environment; the child runs the tests, and
// the parent removes the directory and exits with the child's status.
func Main(m *testing.M) {
	if path := os.Getenv(envBinary); path != "" {
		binary = path
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
