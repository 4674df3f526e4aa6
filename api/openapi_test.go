package api_test

// The document against two validators nobody on the project wrote: kin-openapi's Validate
// (through internal/contract's New, which every contract check starts with) and Redocly CLI's
// lint (npm @redocly/cli, pinned in package-lock.json) with the recommended rules and the
// repository's redocly.yaml. Both must pass the document, warnings included, and both must
// refuse a broken document that libopenapi-validator alone lets through.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/playhead/playhead/api"
	"github.com/playhead/playhead/internal/contract"
)

// root is the repository's root, seen from this package's folder.
const root = ".."

// redoclyProblem is one problem of `redocly lint --format=json`.
type redoclyProblem struct {
	RuleID   string `json:"ruleId"`
	Severity string `json:"severity"`
	Message  string `json:"message"`
	Location []struct {
		Pointer string `json:"pointer"`
	} `json:"location"`
}

func (p redoclyProblem) String() string {
	where := ""
	if len(p.Location) > 0 {
		where = p.Location[0].Pointer
	}
	return fmt.Sprintf("%s %s at %s: %s", p.Severity, p.RuleID, where, p.Message)
}

// redoclyLint runs `redocly lint` with redocly.yaml on the document doc and returns its
// problems. It fails the test (never skips it) when the CLI is not installed.
func redoclyLint(t *testing.T, doc []byte) []redoclyProblem {
	t.Helper()
	cli := filepath.Join(root, "node_modules", ".bin", "redocly")
	if _, err := os.Stat(cli); err != nil {
		t.Fatalf("Redocly CLI is not installed (%v): run `make web` (npm ci in the repository's root)", err)
	}
	file := filepath.Join(t.TempDir(), "openapi.yaml")
	if err := os.WriteFile(file, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(cli, "lint", "--config", filepath.Join(root, "redocly.yaml"), "--format=json", file)
	// No update check, no usage report: the lint needs nothing from outside this machine.
	cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run() // exits 1 when it finds an error: the report says which
	var report struct {
		Totals struct {
			Errors, Warnings int
		} `json:"totals"`
		Problems []redoclyProblem `json:"problems"`
	}
	if jerr := json.Unmarshal(stdout.Bytes(), &report); jerr != nil {
		t.Fatalf("redocly lint: %v, and no JSON report (%v); output:\n%s\n%s", err, jerr, stdout.Bytes(), stderr.Bytes())
	}
	if len(report.Problems) != report.Totals.Errors+report.Totals.Warnings {
		t.Fatalf("redocly lint reported %d problems and totals %+v", len(report.Problems), report.Totals)
	}
	return report.Problems
}

// TestDocument_Redocly: Redocly's recommended rules find no error and no warning in
// api/openapi.yaml.
func TestDocument_Redocly(t *testing.T) {
	for _, p := range redoclyLint(t, api.Document) {
		t.Error(p)
	}
}

// TestDocument_KinOpenAPI: kin-openapi's Validate (with libopenapi's, in contract.New) accepts
// api/openapi.yaml.
func TestDocument_KinOpenAPI(t *testing.T) {
	if _, err := contract.New(api.Document); err != nil {
		t.Fatal(err)
	}
}

// TestDocument_BrokenIsRefusedByBothValidators breaks the document the way an edit can: an
// unquoted ", " in a flow mapping ({ … }) ends the description, and the rest becomes a stray
// key of the schema. libopenapi-validator lets that through (JSON Schema allows unknown
// keywords); kin-openapi and Redocly must both refuse it, and so must contract.New, which the
// contract tests build their checker with.
func TestDocument_BrokenIsRefusedByBothValidators(t *testing.T) {
	const quoted = `sheet: { type: string, description: "The worksheet read, for .xlsx." }`
	if !bytes.Contains(api.Document, []byte(quoted)) {
		t.Fatalf("api/openapi.yaml no longer has %s, which this test breaks: pick another quoted description with a comma", quoted)
	}
	broken := bytes.Replace(api.Document, []byte(quoted), []byte(strings.ReplaceAll(quoted, `"`, "")), 1)

	_, err := contract.New(broken)
	if err == nil || !strings.Contains(err.Error(), "kin-openapi") || !strings.Contains(err.Error(), "for .xlsx.") {
		t.Errorf("contract.New on the broken document: %v, want kin-openapi's error naming the stray key \"for .xlsx.\"", err)
	}
	var stray bool
	for _, p := range redoclyLint(t, broken) {
		t.Logf("redocly: %s", p)
		stray = stray || (p.Severity == "error" && p.RuleID == "struct" && strings.Contains(p.Message, "for .xlsx."))
	}
	if !stray {
		t.Errorf("redocly lint found no struct error for the stray key \"for .xlsx.\" in the broken document")
	}
}
