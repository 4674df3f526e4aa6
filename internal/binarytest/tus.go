package binarytest

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"testing"
)

// Tus sends a tus request (Tus-Resumable: 1.0.0, the token, header) through the server's checked
// client and returns the status, the headers and the body.
func (s *Server) Tus(t testing.TB, method, url, token string, header map[string]string, body []byte) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body == nil {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	req.Header.Set("Tus-Resumable", "1.0.0")
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := s.Client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, out
}

// TusUpload creates a resumable upload of length bytes with metadata (an Upload-Metadata
// value), sends it first, and returns the upload's path (/v1/uploads/{id}).
func (s *Server) TusUpload(t testing.TB, token string, length int, metadata string, first []byte) string {
	t.Helper()
	status, header, out := s.Tus(t, http.MethodPost, s.URL("/v1/uploads"), token,
		map[string]string{"Upload-Length": strconv.Itoa(length), "Upload-Metadata": metadata}, nil)
	if status != http.StatusCreated {
		t.Fatalf("POST /v1/uploads: %d %s", status, out)
	}
	path := header.Get("Location")
	if len(first) > 0 {
		status, _, out = s.Tus(t, http.MethodPatch, s.URL("%s", path), token,
			map[string]string{"Upload-Offset": "0", "Content-Type": "application/offset+octet-stream"}, first)
		if status != http.StatusNoContent {
			t.Fatalf("PATCH %s: %d %s", path, status, out)
		}
	}
	return path
}
