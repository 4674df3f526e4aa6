// Package k6 holds the k6 load scripts; its test checks that they parse as JavaScript modules.
package k6

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// TestScripts_Parse runs `node --check` on every script, so a syntax error cannot reach a user
// who runs k6. It fails (never skips) without Node.js.
func TestScripts_Parse(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is required to check the k6 scripts (apt-get install nodejs): %v", err)
	}
	scripts, err := filepath.Glob("*.js")
	if err != nil || len(scripts) == 0 {
		t.Fatalf("no k6 scripts found (%v)", err)
	}
	for _, s := range scripts {
		if out, err := exec.Command(node, "--check", s).CombinedOutput(); err != nil {
			t.Errorf("%s does not parse: %v\n%s", s, err, out)
		}
	}
}
