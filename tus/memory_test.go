package tus_test

import (
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/playhead/playhead/internal/heaptest"
	"github.com/playhead/playhead/tus"
)

// pattern is an endless body of repeated bytes, read in the client's small buffers.
type pattern struct{}

func (pattern) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(i)
	}
	return len(p), nil
}

// A 1 GiB upload in one PATCH raises the Go heap by less than 32 MiB, as POST /v1/media does:
// the body goes from the socket into one 8 MiB part buffer at a time, never into memory whole
// (Fiber's adaptor would read it all before tusd saw a byte).
func TestUpload_1GiBKeepsTheHeapFlat(t *testing.T) {
	for name, newCluster := range backends() {
		t.Run(name, func(t *testing.T) {
			c := newCluster(t)
			n := c.start(t, func(cfg *tus.Config) { cfg.PartSize = 8 << 20 })
			const size = 1 << 30
			path := n.create(t, 81, size, "")
			req, err := http.NewRequest(http.MethodPatch, n.url+path, io.LimitReader(pattern{}, size))
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = size
			req.Header.Set("Tus-Resumable", "1.0.0")
			req.Header.Set("Upload-Offset", "0")
			req.Header.Set("Content-Type", "application/offset+octet-stream")
			req.Header.Set("Authorization", "Bearer "+token(t, 81))
			var status int
			growth, baseline := heaptest.Growth(func() {
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				status = resp.StatusCode
			})
			if status != http.StatusNoContent {
				t.Fatalf("PATCH of 1 GiB: %d", status)
			}
			var source string
			if err := c.pool.QueryRow(t.Context(), `SELECT source_key FROM media WHERE owner_id = 81`).Scan(&source); err != nil {
				t.Fatal(err)
			}
			if _, stored := c.stored(t, source); stored != size {
				t.Fatalf("stored %d bytes, want %d", stored, size)
			}
			t.Logf("heap: baseline %.1f MiB, growth %.1f MiB for a 1 GiB tus upload (%s)", float64(baseline)/(1<<20), float64(growth)/(1<<20), name)
			if growth >= 32<<20 {
				t.Fatalf("the heap grew by %s during a 1 GiB upload, want < 32 MiB", fmt.Sprintf("%.1f MiB", float64(growth)/(1<<20)))
			}
		})
	}
}
