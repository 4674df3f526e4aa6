package s3test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The tests look for the weed binary where scripts/weed.sh builds it: both name one version.
func TestVersion_IsTheOneTheBuildScriptBuilds(t *testing.T) {
	script, err := os.ReadFile(filepath.Join("..", "..", "scripts", "weed.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(script), "\nversion="+Version+"\n") {
		t.Fatalf("scripts/weed.sh does not build SeaweedFS %s, the version s3test looks for", Version)
	}
}
