package jobqueue_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The queue core is generic: it imports none of Playhead's domain packages (media, encodes,
// imports, webhooks…), only the infrastructure ones listed here, so that a kind is added by its
// own package and the queue can be carried to another service.
func TestQueueCoreImportsNoDomainPackage(t *testing.T) {
	infrastructure := []string{"apperr", "backoff", "dbpool", "httpserver", "lifecycle", "notify"}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	const module = "github.com/playhead/playhead/"
	for _, pkg := range strings.Fields(string(out)) {
		name, ours := strings.CutPrefix(pkg, module)
		if ours && name != "jobqueue" && !slices.Contains(infrastructure, name) {
			t.Errorf("jobqueue depends on %s, which is not one of the infrastructure packages %v", pkg, infrastructure)
		}
	}
}
