package main

// The contract: api/openapi.yaml describes every route the public app registers, and nothing
// else. Every exchange of the end-to-end tests is checked against it where it is made
// (binarytest's client, the hostile-input suite's raw requests: internal/contract), and the
// routes × statuses they covered are printed when the package's tests have run.

import (
	"bytes"
	"net/http"
	"slices"
	"testing"

	"github.com/playhead/playhead/api"
	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/contract"
)

// TestContractRoutes fails when the app `playhead serve` builds has a route the document
// lacks, or the document an operation the app does not have. HEAD counts like any method:
// fiber's Router.Get registers one with every GET, so a route registered that way where the
// document declares no HEAD fails here (handlers register GET alone with httpserver.Get).
func TestContractRoutes(t *testing.T) {
	checker, err := contract.Shared()
	if err != nil {
		t.Fatal(err)
	}
	documented := checker.Routes()
	var registered []string
	for _, r := range appRoutes(t) {
		registered = append(registered, contract.FiberRoute(r.Method, r.Path))
	}
	slices.Sort(registered)
	registered = slices.Compact(registered)
	for _, r := range registered {
		if !slices.Contains(documented, r) {
			t.Errorf("the server registers %s and api/openapi.yaml does not document it", r)
		}
	}
	for _, r := range documented {
		if !slices.Contains(registered, r) {
			t.Errorf("api/openapi.yaml documents %s and the server does not register it", r)
		}
	}
	if !t.Failed() {
		t.Logf("%d operations, registered and documented alike", len(registered))
	}
}

// TestOpenAPIServed fetches the document from the real binary without a token: it is the one
// embedded in it, byte for byte.
func TestOpenAPIServed(t *testing.T) {
	s := binarytest.Start(t, nil)
	req, err := http.NewRequest(http.MethodGet, s.URL(api.Path), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	if _, err := body.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/yaml" || !bytes.Equal(body.Bytes(), api.Document) {
		t.Fatalf("GET %s: %d %q, %d bytes; want 200 application/yaml with the %d bytes of api/openapi.yaml",
			api.Path, resp.StatusCode, resp.Header.Get("Content-Type"), body.Len(), len(api.Document))
	}
	s.Stop(t)
}
