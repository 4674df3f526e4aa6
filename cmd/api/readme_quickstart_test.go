package main

// The README's quickstart, run as a reader runs it: `make run` in one terminal, the block in a
// second one. The block is read from README.md (the fenced block after the quickstart marker),
// so the README cannot drift from what works.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/pgtest"
)

// quickstartMarker is the HTML comment of README.md that the quickstart block follows.
const quickstartMarker = "<!-- quickstart: the test runs this block"

// quickstartRunLimit bounds the block's run. The block waits for the node's first flush (at
// most PLAYHEAD_FLUSH_INTERVAL, 5 s) before it lists; a block whose position never shows in
// the list would wait for ever, so it fails after this, far above any flush.
const quickstartRunLimit = 2 * time.Minute

// TestReadme_Quickstart starts `make run` in a scratch copy of the repository, on free ports
// and this test binary's PostgreSQL (DATABASE_URL, so make run starts none of its own), waits
// for the node's /readyz, runs README.md's quickstart block with bash -euo pipefail, and checks
// that the list it ends with holds the media it registered at the position it reported. Then
// it stops make run with SIGINT, as Ctrl-C does, and checks the node stopped cleanly.
func TestReadme_Quickstart(t *testing.T) {
	block := readmeQuickstartBlock(t, filepath.Join(repoRoot, "README.md"))
	title := mustSubmatch(t, block, `"title":"([^"]+)"`)
	position := mustSubmatch(t, block, `"position_ms":([0-9]+)`)
	for _, tool := range []string{"make", "bash", "curl", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the quickstart needs %s: %v (Debian: apt-get install %s)", tool, err, tool)
		}
	}

	dir := scratchCheckout(t)
	httpAddr, metricsAddr := binarytest.FreeAddr(t), binarytest.FreeAddr(t)
	node := startMakeRun(t, dir, map[string]string{
		"DATABASE_URL":          pgtest.EmptyURL(t), // make run migrates it, as it would a server of one's own
		"PLAYHEAD_HTTP_ADDR":    httpAddr,
		"PLAYHEAD_METRICS_ADDR": metricsAddr,
	})
	node.waitReady(t, "http://"+metricsAddr+"/readyz")

	ctx, cancel := context.WithTimeout(context.Background(), quickstartRunLimit)
	defer cancel()
	run := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", block)
	run.Dir = dir
	run.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "PLAYHEAD=http://" + httpAddr}
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("README.md's quickstart failed (%v; a run gets %s):\n%s\nthe block:\n%s", err, quickstartRunLimit, out, block)
	}
	t.Logf("the quickstart's output:\n%s", out)

	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if !containsLine(lines, "204") {
		t.Errorf("the quickstart's PUT did not print 204:\n%s", out)
	}
	var list struct {
		Items []struct {
			MediaID    int64  `json:"media_id"`
			Title      string `json:"title"`
			PositionMS int64  `json:"position_ms"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &list); err != nil {
		t.Fatalf("the quickstart's last line is not the continue-watching list: %v\n%s", err, out)
	}
	want, _ := strconv.ParseInt(position, 10, 64)
	found := false
	for _, it := range list.Items {
		found = found || (it.Title == title && it.PositionMS == want && it.MediaID > 0)
	}
	if !found {
		t.Errorf("the list does not hold %q at position_ms %d: %+v", title, want, list.Items)
	}

	node.stop(t)
}

// readmeQuickstartBlock returns the body of the first fenced block after the quickstart marker.
func readmeQuickstartBlock(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(raw), quickstartMarker)
	if !ok {
		t.Fatalf("%s has no %q comment before its quickstart block", path, quickstartMarker)
	}
	lines := strings.Split(after, "\n")[1:] // the rest of the marker's line
	for len(lines) > 0 && strings.TrimSpace(lines[0]) == "" {
		lines = lines[1:]
	}
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "```") {
		t.Fatalf("%s: the quickstart marker is not followed by a fenced block", path)
	}
	for i, line := range lines[1:] {
		if strings.HasPrefix(line, "```") {
			return strings.Join(lines[1:i+1], "\n") + "\n"
		}
	}
	t.Fatalf("%s: the quickstart block is not closed", path)
	return ""
}

func mustSubmatch(t *testing.T, s, expr string) string {
	t.Helper()
	m := regexp.MustCompile(expr).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("the quickstart block has no %s: the test reads what to look for from it", expr)
	}
	return m[1]
}

func containsLine(lines []string, want string) bool {
	for _, l := range lines {
		if strings.TrimSpace(l) == want {
			return true
		}
	}
	return false
}

// scratchCheckout copies the working tree's files (tracked and untracked, not ignored) into a
// temporary folder, so that make run's bin/, .data/ and data/ land there and a developer's
// checkout is left as it was. node_modules, which make web copies the player's scripts from, is
// linked rather than copied (npm ci needs the network): package.json and package-lock.json get
// its install's time, so that make sees it up to date and runs no npm ci into the link.
func scratchCheckout(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	ls := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	ls.Dir = root
	names, err := ls.Output()
	if err != nil {
		t.Fatalf("git ls-files in %s: %v", root, err)
	}
	dir := t.TempDir()
	for _, name := range strings.Split(strings.TrimRight(string(names), "\x00"), "\x00") {
		if name == "node_modules" || strings.HasPrefix(name, "node_modules/") {
			continue // linked below (a node_modules that is itself a link is not ignored)
		}
		if err := copyEntry(filepath.Join(root, name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	installed, err := os.Stat(filepath.Join(root, "node_modules", ".package-lock.json"))
	if err != nil {
		t.Fatalf("no npm install in %s (%v): run make web first", root, err)
	}
	if err := os.Symlink(filepath.Join(root, "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"package.json", "package-lock.json"} {
		if err := os.Chtimes(filepath.Join(dir, f), installed.ModTime(), installed.ModTime()); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// copyEntry copies one file or symbolic link from to to; a file the index lists but the tree
// no longer has is skipped.
func copyEntry(from, to string) error {
	info, err := os.Lstat(from)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	switch {
	case info.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(from)
		if err != nil {
			return err
		}
		return os.Symlink(target, to)
	case info.Mode().IsRegular():
		data, err := os.ReadFile(from)
		if err != nil {
			return err
		}
		return os.WriteFile(to, data, info.Mode().Perm())
	}
	return nil // a submodule or another kind of entry: nothing make run needs
}

// makeRun is `make run` running in its own process group.
type makeRun struct {
	cmd  *exec.Cmd
	out  *binarytest.Output
	done chan struct{}
}

// startMakeRun starts `make run` in dir with the caller's environment, less what would change
// what it does here (the developer's PLAYHEAD_* and DATABASE_URL, and the flags of a make that
// runs this test), plus env. It is killed with its children if the test ends first.
func startMakeRun(t *testing.T, dir string, env map[string]string) *makeRun {
	t.Helper()
	cmd := exec.Command("make", "--no-print-directory", "run")
	cmd.Dir = dir
	path := os.Getenv("PATH")
	if _, err := exec.LookPath("go"); err != nil {
		path = "/usr/local/go/bin:" + path // where binarytest finds it too
	}
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(name, "PLAYHEAD_"), name == "DATABASE_URL", name == "PATH",
			name == "MAKEFLAGS", name == "MFLAGS", name == "MAKELEVEL", name == "MAKEOVERRIDES", name == "GNUMAKEFLAGS":
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.Env = append(cmd.Env, "PATH="+path)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Ctrl-C reaches make and the node
	r := &makeRun{cmd: cmd, out: &binarytest.Output{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = r.out, r.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("make run: %v", err)
	}
	go func() {
		_ = cmd.Wait()
		close(r.done)
	}()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-r.done
		}
		if t.Failed() {
			t.Logf("make run's output:\n%s", r.out)
		}
	})
	return r
}

// stop sends SIGINT to make run's process group, as Ctrl-C in its terminal does, and checks
// that the node stopped gracefully.
func (r *makeRun) stop(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(-r.cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatalf("SIGINT to make run: %v", err)
	}
	select {
	case <-r.done:
	case <-time.After(binarytest.ExitTimeout):
		t.Fatalf("make run still running %s after SIGINT", binarytest.ExitTimeout)
	}
	if !strings.Contains(r.out.String(), `"msg":"stopped cleanly"`) {
		t.Errorf("the node did not stop cleanly after SIGINT")
	}
}

// waitReady polls the node's readiness until it answers 200; make run building the binary
// and migrating comes first. It fails the test if make run exits instead.
func (r *makeRun) waitReady(t *testing.T, url string) {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		if resp, err := client.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-r.done:
			t.Fatalf("make run exited before the node was ready (%s)", fmt.Sprint(r.cmd.ProcessState))
		case <-time.After(100 * time.Millisecond):
		}
	}
}
