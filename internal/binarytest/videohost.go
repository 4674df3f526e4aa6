package binarytest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"testing"
)

// VideoHost stands in for a cloud drive on loopback, serving mp4 for imports:
//   - /direct/<name>: a plain link to the file;
//   - /download?id=<id>: Google Drive's HTML "can't scan this file" confirm page;
//   - /uc?id=<id>: the file (Drive's fallback URL);
//   - the id "gone" and the name gone.mp4: 404, as is any other path.
//
// It is closed when the test ends. Servers that import from it need
// PLAYHEAD_INGEST_ALLOW_PRIVATE=true (it is on loopback).
func VideoHost(t testing.TB, mp4 []byte) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Query().Get("id") == "gone" || path.Base(r.URL.Path) == "gone.mp4":
			http.NotFound(w, r)
		case r.URL.Path == "/download":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = io.WriteString(w, "<html><body>Google Drive can't scan this file for viruses.</body></html>")
		case r.URL.Path == "/uc", strings.HasPrefix(r.URL.Path, "/direct/"):
			w.Header().Set("Content-Type", "video/mp4")
			_, _ = w.Write(mp4)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}
