package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/binarytest"
)

// screenshotsDir is where a browser test saves its screenshots: a temporary folder, so a test
// run leaves the tree as it was, unless `make screenshots` points screenshotsEnv at docs/img
// to refresh the committed ones.
func screenshotsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(screenshotsEnv)
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// browserScript is one run of a script of web/e2e under node, driving Debian's Chromium. The
// script prints one JSON event per line; the test reads them with next and may answer on
// Stdin.
type browserScript struct {
	name    string
	cmd     *exec.Cmd
	lines   *bufio.Scanner
	started time.Time
	// Stdin is the script's standard input.
	Stdin io.WriteCloser
}

// startBrowserScript starts web/e2e/<name> with env added to the test's environment (and
// CHROMIUM set). It is killed after playerTimeout; its stderr is logged if the test fails.
func startBrowserScript(t *testing.T, root, node, name string, env ...string) *browserScript {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), playerTimeout)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, node, filepath.Join(root, "web", "e2e", name))
	cmd.Dir = root
	cmd.Env = append(append(os.Environ(), env...), "CHROMIUM="+chromiumPath)
	stderr := &binarytest.Output{}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s web/e2e/%s: %v", node, name, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s stderr:\n%s", name, stderr)
		}
	})
	lines := bufio.NewScanner(stdout)
	lines.Buffer(make([]byte, 64*1024), 1<<20)
	return &browserScript{name: name, cmd: cmd, lines: lines, started: started, Stdin: stdin}
}

// next decodes the script's next event into ev and logs it; false once the script's output
// has ended. A line that is not an event is a test error and is skipped.
func (b *browserScript) next(t *testing.T, ev any) bool {
	t.Helper()
	for b.lines.Scan() {
		if err := json.Unmarshal(b.lines.Bytes(), ev); err != nil {
			t.Errorf("%s printed a line that is not an event: %q", b.name, b.lines.Text())
			continue
		}
		t.Logf("%6.1fs %s: %s", time.Since(b.started).Seconds(), b.name, b.lines.Text())
		return true
	}
	return false
}

// wait waits for the script to exit and returns its error and how long it ran.
func (b *browserScript) wait() (time.Duration, error) {
	err := b.cmd.Wait()
	return time.Since(b.started), err
}
