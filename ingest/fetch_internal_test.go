package ingest

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"testing"

	"github.com/playhead/playhead/egress"
)

// A redirect from an allowed server to a loopback address is refused at the redirect's dial:
// the first server listens on 127.0.0.2, which this test's policy allows, and redirects to
// 127.0.0.1, which it does not.
func TestFetcher_RefusesRedirectToLoopback(t *testing.T) {
	var hit bool
	inner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hit = true }))
	defer inner.Close()
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatalf("listen on 127.0.0.2: %v", err)
	}
	outer := httptest.NewUnstartedServer(http.RedirectHandler(inner.URL+"/secret", http.StatusFound))
	outer.Listener = ln
	outer.Start()
	defer outer.Close()

	f := NewFetcher(FetchConfig{allow: func(a netip.Addr) bool { return a == netip.MustParseAddr("127.0.0.2") }})
	dst, err := os.CreateTemp(t.TempDir(), "dl")
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	_, err = f.Fetch(context.Background(), outer.URL+"/video.mp4", "", dst)
	if !errors.Is(err, egress.ErrForbiddenAddress) || !IsPermanent(err) {
		t.Fatalf("Fetch through a redirect to loopback = %v, want a permanent ErrForbiddenAddress", err)
	}
	if hit {
		t.Fatal("the loopback server behind the redirect was reached")
	}
}
