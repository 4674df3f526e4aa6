package main

// The URL-signing key rotated through restarts of the real binary, as
// docs/operations/identity.md describes it.

import (
	"maps"
	"net/http"
	"strings"
	"testing"

	"github.com/playhead/playhead/internal/binarytest"
)

// TestURLSigning_RotationThroughRestarts: a node signing with k1 gives a playlist link; the node
// restarted with k2 signing and k1 still listed plays that link, and the playlist it serves
// signs its files with k2; restarted once more with k1 withdrawn, the k1 link is refused (403)
// while k2's links play. The database and the encoded files stay the same throughout.
func TestURLSigning_RotationThroughRestarts(t *testing.T) {
	const (
		k1 = "k1:rotation-test-first-key-rotation-test-first-key"
		k2 = "k2:rotation-test-second-key-rotation-test-second-key"
	)
	env := pipelineEnv("all", "rotation", t.TempDir(), t.TempDir(), "ultrafast")
	start := func(keys string) *binarytest.Server {
		t.Helper()
		e := maps.Clone(env)
		e["PLAYHEAD_URL_SIGNING_KEYS"] = keys
		return binarytest.Start(t, e)
	}
	get := func(s *binarytest.Server, link string) (int, string) {
		t.Helper()
		status, body, err := s.Do(http.MethodGet, s.HTTPURL+link, "", nil)
		if err != nil {
			t.Fatalf("GET %s: %v", link, err)
		}
		return status, string(body)
	}
	token := binarytest.Token(t, 201, false)

	s := start(k1)
	env["DATABASE_URL"] = s.DBURL
	id, _ := readyUpload(t, s, token, "rotated", "PRIVATE")
	oldLink := mediaOf(t, s, token, id).HLSURL
	if !strings.Contains(oldLink, "?kid=k1&") {
		t.Fatalf("the playlist link %s does not name k1", oldLink)
	}
	s.Process.Stop(t)

	s = start(k2 + "," + k1)
	status, body := get(s, oldLink)
	if status != http.StatusOK || !strings.Contains(body, "?kid=k2&") || strings.Contains(body, "kid=k1") {
		t.Fatalf("k1's link with k2 signing and k1 listed: %d\n%s\nwant 200 and a playlist whose links name k2", status, body)
	}
	newLink := mediaOf(t, s, token, id).HLSURL
	if !strings.Contains(newLink, "?kid=k2&") {
		t.Fatalf("the playlist link %s does not name k2", newLink)
	}
	s.Process.Stop(t)

	s = start(k2)
	if status, body := get(s, oldLink); status != http.StatusForbidden || !strings.Contains(body, "not valid") {
		t.Errorf("k1's link once k1 is withdrawn: %d %s, want 403 not valid", status, body)
	}
	if status, body := get(s, newLink); status != http.StatusOK {
		t.Errorf("k2's link: %d %s, want 200", status, body)
	}
}
