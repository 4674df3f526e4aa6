package js_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	playersdk "github.com/playhead/playhead/sdk/js"
)

// root is the repository's root, where node_modules holds TypeScript (package.json).
func root(t *testing.T) string {
	t.Helper()
	r, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func run(t *testing.T, dir string, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestPackage_PacksAndTypesCompileStrict: npm pack makes the package of exactly its module, its
// declarations and its README; installed from that tarball into a scratch project, a
// consumer's TypeScript compiles under tsc --strict, and one that misuses the API does not.
func TestPackage_PacksAndTypesCompileStrict(t *testing.T) {
	scratch := t.TempDir()
	out, err := run(t, ".", "npm", "pack", "--json", "--pack-destination", scratch)
	if err != nil {
		t.Fatalf("npm pack: %v\n%s", err, out)
	}
	var packed []struct {
		Filename string `json:"filename"`
		Files    []struct {
			Path string `json:"path"`
		} `json:"files"`
	}
	if err := json.Unmarshal([]byte(out[strings.Index(out, "["):]), &packed); err != nil || len(packed) != 1 {
		t.Fatalf("npm pack --json: %v\n%s", err, out)
	}
	var files []string
	for _, f := range packed[0].Files {
		files = append(files, f.Path)
	}
	slices.Sort(files)
	if want := []string{"README.md", "index.d.ts", "index.js", "package.json"}; !slices.Equal(files, want) {
		t.Errorf("npm pack holds %q, want %q", files, want)
	}

	project := filepath.Join(scratch, "consumer")
	if err := os.CopyFS(project, os.DirFS("testdata/consumer")); err != nil {
		t.Fatal(err)
	}
	installed := filepath.Join(project, "node_modules", "@playhead", "player")
	if err := os.MkdirAll(installed, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, installed, "tar", "-xzf", filepath.Join(scratch, packed[0].Filename), "--strip-components=1"); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	tsc := func(file string) (string, error) {
		return run(t, project, filepath.Join(root(t), "node_modules", ".bin", "tsc"), "--strict", "--noEmit", "--target", "es2022",
			"--module", "nodenext", "--moduleResolution", "nodenext", "--lib", "es2022,dom", file)
	}
	if out, err := tsc("consumer.ts"); err != nil {
		t.Errorf("tsc --strict consumer.ts: %v\n%s", err, out)
	}
	out, err = tsc("wrong.ts")
	// mediaId as a string, a getter of a number, position_ms for positionMs.
	for _, want := range []string{"wrong.ts(7,46)", "wrong.ts(7,77)", "wrong.ts(8,29)"} {
		if err == nil || !strings.Contains(out, want) {
			t.Errorf("tsc --strict wrong.ts: %v, want an error about %s:\n%s", err, want, out)
		}
	}
}

// TestPackage_SizeStated: the README states the module's gzipped size (gzip -9), and it is
// the size of the module as it is.
func TestPackage_SizeStated(t *testing.T) {
	var z bytes.Buffer
	w, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
	_, _ = w.Write(playersdk.Module)
	_ = w.Close()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`\*\*([0-9 ]+) bytes gzipped\*\*`).FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md states no gzipped size (**N bytes gzipped**)")
	}
	stated, _ := strconv.Atoi(strings.ReplaceAll(string(m[1]), " ", ""))
	// Go's gzip and GNU gzip -9 differ by a few dozen bytes of header and block choices.
	t.Logf("index.js: %d bytes, %d gzipped by Go's gzip at its best compression", len(playersdk.Module), z.Len())
	if got := z.Len(); got < stated-32 || got > stated+32 {
		t.Errorf("README.md states %d bytes gzipped; index.js is %d gzipped (gzip -9 -c index.js | wc -c): update it", stated, got)
	}
}
