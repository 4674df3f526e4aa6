package main

import (
	"strings"
	"testing"

	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/pgtest"
)

// TestServe_UnreachableDirectURLFailsStartUp: an api node whose PLAYHEAD_DATABASE_DIRECT_URL
// reaches no database does not start (it would otherwise answer ready while its LISTEN, and
// so cache invalidation from other nodes, and its progress reads fail for ever); the error
// names the variable.
func TestServe_UnreachableDirectURLFailsStartUp(t *testing.T) {
	// A port that was free a moment ago: nothing answers there.
	nowhere := "postgres://postgres@" + binarytest.FreeAddr(t) + "/playhead?sslmode=disable&connect_timeout=2"
	p := binarytest.Run(t, map[string]string{
		"DATABASE_URL":                 pgtest.URL(t),
		"PLAYHEAD_DATABASE_DIRECT_URL": nowhere,
		"PLAYHEAD_ROLE":                "api",
		"PLAYHEAD_JWT_SECRET":          binarytest.Secret,
		"PLAYHEAD_HTTP_ADDR":           binarytest.FreeAddr(t),
		"PLAYHEAD_METRICS_ADDR":        binarytest.FreeAddr(t),
	}, "serve")
	// The start-up retries the database for 30 s, as it does DATABASE_URL's.
	if code := p.Wait(t, 2*binarytest.ExitTimeout); code == 0 {
		t.Fatalf("exit status 0 with an unreachable direct URL; stderr:\n%s", p.Stderr)
	}
	if !strings.Contains(p.Stderr.String(), "PLAYHEAD_DATABASE_DIRECT_URL") {
		t.Errorf("start-up error does not name PLAYHEAD_DATABASE_DIRECT_URL; stderr:\n%s", p.Stderr)
	}
}
