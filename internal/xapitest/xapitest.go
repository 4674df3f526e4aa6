// Package xapitest runs the third-party xAPI validator (Learning Locker's
// @learninglocker/xapi-validation, from npm, driven by xapi/testdata/validate.js) on statements,
// for the xapi package's tests and the binary's.
package xapitest

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Validate runs the validator on statements and returns its output and whether it found nothing
// wrong. root is the repository's root, relative to the test's package (where node_modules is).
func Validate(t testing.TB, root string, statements [][]byte) (string, bool) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(root, "node_modules", "@learninglocker", "xapi-validation", "package.json")); err != nil {
		t.Fatalf("the validator is not installed (npm ci at the repository's root): %v", err)
	}
	raw := make([]json.RawMessage, len(statements))
	for i, s := range statements {
		raw[i] = s
	}
	all, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "statements.json")
	if err := os.WriteFile(file, all, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("node", filepath.Join(root, "xapi", "testdata", "validate.js"), file).CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("node: %v: %s", err, out)
	}
	return string(out), err == nil
}
