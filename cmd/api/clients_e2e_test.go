package main

// Clients generated from the document the binary serves: an integrator takes GET /openapi.yaml,
// runs a mainstream generator on it and expects the result to compile and to work. Each test
// starts the real binary with a worker, fetches the document from it, generates a client from
// it in a temporary folder (never a committed, possibly stale copy), and runs a committed flow
// through the generated code against the binary: a webhook registered, a video uploaded and
// followed to READY, its media.ready delivery received, a position reported, continue watching
// read.
//
//   - Go: oapi-codegen (api/clients/go, a module of its own that pins it as a tool) and the
//     flow test api/clients/go/playhead/flow_test.go.
//   - TypeScript: openapi-typescript's types and openapi-fetch (npm, pinned in package.json),
//     the flow script api/clients/ts/flow.mts, type-checked and compiled by tsc, run by node.

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/playhead/playhead/api"
	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/testvideo"
)

// repoRoot is the repository's root, seen from this package's folder (go test's working
// directory).
const repoRoot = "../.."

// clientFlowEnv starts the binary a generated client's flow runs against and returns the
// served document and the flow's environment (the variables both flows read).
func clientFlowEnv(t *testing.T, node string) ([]byte, []string) {
	t.Helper()
	env := pipelineEnv("all", node, t.TempDir(), t.TempDir(), "ultrafast")
	env["PLAYHEAD_WEBHOOK_ALLOW_PRIVATE"] = "true" // the flow's receiver is on loopback
	env["PLAYHEAD_FLUSH_INTERVAL"] = "200ms"       // continue watching reads flushed rows
	// The flow's 2 s video is shorter than the resume rule's minimum duration, below which
	// continue watching lists nothing; the flow reads its position back from that list.
	env["PLAYHEAD_RESUME_MIN_DURATION"] = "0s"
	s := binarytest.Start(t, env)
	video := testvideo.MP4(t, t.TempDir(), testvideo.Spec{Seconds: 2, Width: 160, Height: 120})
	return servedDocument(t, s), []string{
		"PLAYHEAD_URL=" + s.HTTPURL,
		"PLAYHEAD_MEMBER_TOKEN=" + binarytest.Token(t, 301, false),
		"PLAYHEAD_ADMIN_TOKEN=" + binarytest.Token(t, 1, true),
		"PLAYHEAD_VIDEO=" + video,
	}
}

// servedDocument fetches GET /openapi.yaml from s without a token (through the checked client:
// the exchange is held to the document it returns).
func servedDocument(t *testing.T, s *binarytest.Server) []byte {
	t.Helper()
	resp, err := s.Client.Get(s.URL(api.Path))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !bytes.HasPrefix(body, []byte("openapi: 3.1")) {
		t.Fatalf("GET %s: %d %.200q, want 200 and an OpenAPI 3.1 document", api.Path, resp.StatusCode, body)
	}
	return body
}

// runIn runs name with args in dir, env added to this process's, and returns its output;
// the test fails with the output when the command fails.
func runIn(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s (in %s): %v\n%s", name, strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}

// lookTool returns the path of the program name, failing (never skipping) with how to get it.
func lookTool(t *testing.T, name, install string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is required: %s", name, install)
	}
	return path
}

// untypedField matches a struct field of type interface{} in generated Go code.
var untypedField = regexp.MustCompile(`(?m)^\s+\w+\s+interface\{\}\s+` + "`" + `.*$`)

// TestGeneratedGoClient generates the Go client with oapi-codegen from the served document in
// a copy of api/clients/go and runs its flow test against the binary. A document oapi-codegen
// turns into code that does not compile (a schema used only under `webhooks:` and pruned),
// into untyped fields (a const without a type) or into a parser that cannot read an answer
// (the YAML document as a string) fails it.
func TestGeneratedGoClient(t *testing.T) {
	goTool := lookTool(t, "go", "install Go 1.26")
	doc, env := clientFlowEnv(t, "generated-go")
	module := filepath.Join(t.TempDir(), "go")
	if err := os.CopyFS(module, os.DirFS(filepath.Join(repoRoot, "api", "clients", "go"))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(module, "openapi.yaml"), doc, 0o644); err != nil {
		t.Fatal(err)
	}
	runIn(t, module, nil, goTool, "tool", "oapi-codegen", "-config", "oapi-codegen.yaml", "-o", "playhead/client.gen.go", "openapi.yaml")
	// A schema without a type (a const alone, say) becomes a field of type interface{}: it
	// compiles, and a client can put anything in it.
	generated, err := os.ReadFile(filepath.Join(module, "playhead", "client.gen.go"))
	if err != nil {
		t.Fatal(err)
	}
	if untyped := untypedField.FindAll(generated, -1); len(untyped) > 0 {
		t.Errorf("the generated Go client has untyped fields (a schema without a type in api/openapi.yaml):\n%s", bytes.Join(untyped, []byte("\n")))
	}
	// -timeout 0: this test's own go test run bounds it, as it bounds every other wait here.
	out := runIn(t, module, env, goTool, "test", "-count=1", "-timeout=0", "-v", "./...")
	t.Logf("the generated Go client's flow:\n%s", out)
}

// TestGeneratedTSClient generates TypeScript types with openapi-typescript from the served
// document (api/clients/ts/generate.mjs), type-checks and compiles api/clients/ts/flow.mts
// with them (tsc), and runs it with node against the binary.
func TestGeneratedTSClient(t *testing.T) {
	node := lookTool(t, "node", "run `make deps` as root, or `apt-get install -y nodejs npm`")
	modules, err := filepath.Abs(filepath.Join(repoRoot, "node_modules"))
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range []string{"openapi-typescript", "openapi-fetch", "typescript", "@types/node"} {
		if _, err := os.Stat(filepath.Join(modules, pkg, "package.json")); err != nil {
			t.Fatalf("%s from package-lock.json is not installed: run `make web` (npm ci in the repository's root)", pkg)
		}
	}
	doc, env := clientFlowEnv(t, "generated-ts")
	dir := t.TempDir()
	sources := filepath.Join(repoRoot, "api", "clients", "ts")
	for _, f := range []string{"flow.mts", "tsconfig.json"} {
		b, err := os.ReadFile(filepath.Join(sources, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "openapi.yaml"), doc, 0o644); err != nil {
		t.Fatal(err)
	}
	// The compiled script imports openapi-fetch at run time, and tsc finds the packages' types,
	// through the repository's node_modules.
	if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	generate, err := filepath.Abs(filepath.Join(sources, "generate.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	runIn(t, dir, nil, node, generate, "openapi.yaml", "schema.ts")
	runIn(t, dir, nil, node, filepath.Join(modules, "typescript", "bin", "tsc"), "-p", "tsconfig.json")
	out := runIn(t, dir, env, node, filepath.Join("dist", "flow.mjs"))
	t.Logf("the generated TypeScript client's flow: %s", out)
}
