package storage_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/playhead/playhead/internal/heaptest"
	"github.com/playhead/playhead/internal/s3test"
	"github.com/playhead/playhead/storage"
)

// A node with a wrong bucket, wrong credentials or a malformed endpoint stops at NewS3 with an
// error that says which, and that never quotes the secret key.
func TestS3_NewS3SaysWhatIsWrong(t *testing.T) {
	t.Parallel()
	srv, bucket := s3test.Shared(t), s3test.Bucket(t)
	for _, tc := range []struct {
		name, want string
		change     func(*storage.S3Config)
	}{
		{"missing bucket", `bucket "no-such-bucket" does not exist`, func(c *storage.S3Config) { c.Bucket = "no-such-bucket" }},
		{"wrong secret", "cannot reach bucket", func(c *storage.S3Config) { c.SecretAccessKey = "x" + c.SecretAccessKey }},
		{"unknown key id", "cannot reach bucket", func(c *storage.S3Config) { c.AccessKeyID = "nobody" }},
		{"endpoint with a path", "want http(s)://host[:port]", func(c *storage.S3Config) { c.Endpoint += "/bucket" }},
		{"endpoint without a scheme", "want http(s)://host[:port]", func(c *storage.S3Config) { c.Endpoint = strings.TrimPrefix(c.Endpoint, "http://") }},
		{"bad prefix", "s3 prefix", func(c *storage.S3Config) { c.Prefix = "../x" }},
	} {
		cfg := srv.Config(bucket)
		tc.change(&cfg)
		_, err := storage.NewS3(t.Context(), cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: NewS3: %v, want an error saying %q", tc.name, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), srv.SecretAccessKey) {
			t.Errorf("%s: the error quotes the secret key: %v", tc.name, err)
		}
	}
}

// A presigned URL fetches its one object without credentials until it expires; its signature
// opens no other object, and the bucket refuses anonymous requests.
func TestS3_PresignGet(t *testing.T) {
	t.Parallel()
	st, bucket := s3test.Store(t)
	srv := s3test.Shared(t)
	ctx := t.Context()
	put(t, st, "hls/5/tok/v0/seg_000.ts", "segment zero")
	put(t, st, "hls/5/tok/v0/seg_001.ts", "segment one")
	put(t, st, "uploads/u/source", "the source")

	link, err := st.PresignGet(ctx, "hls/5/tok/v0/seg_000.ts", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(link, srv.Endpoint+"/"+bucket+"/hls/5/tok/v0/seg_000.ts?") {
		t.Fatalf("presigned URL %s, want it on the store", link)
	}
	if status, body := get(t, link); status != http.StatusOK || body != "segment zero" {
		t.Fatalf("GET the presigned URL: %d %q", status, body)
	}
	_, query, _ := strings.Cut(link, "?")
	for _, other := range []string{"hls/5/tok/v0/seg_001.ts", "uploads/u/source"} {
		if status, _ := get(t, srv.Endpoint+"/"+bucket+"/"+other+"?"+query); status != http.StatusForbidden {
			t.Errorf("seg_000's signature on %s: status %d, want 403", other, status)
		}
	}
	if status, _ := get(t, srv.Endpoint+"/"+bucket+"/hls/5/tok/v0/seg_000.ts"); status != http.StatusForbidden {
		t.Errorf("an anonymous GET: status %d, want 403", status)
	}

	short, err := st.PresignGet(ctx, "hls/5/tok/v0/seg_000.ts", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(short)
	date, _ := time.Parse("20060102T150405Z", u.Query().Get("X-Amz-Date"))
	secs, _ := strconv.Atoi(u.Query().Get("X-Amz-Expires"))
	time.Sleep(time.Until(date.Add(time.Duration(secs)*time.Second)) + 1100*time.Millisecond)
	if status, _ := get(t, short); status != http.StatusForbidden {
		t.Errorf("an expired presigned URL: status %d, want 403", status)
	}
}

func get(t *testing.T, rawURL string) (int, string) {
	t.Helper()
	resp, err := http.Get(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// An upload that was started and never finished (the process was killed between parts) is no
// object, but holds its parts until aborted: Unfinished lists those under its prefix started
// before its cutoff, and AbortWrite aborts one (again: no error).
func TestS3_Unfinished(t *testing.T) {
	t.Parallel()
	st, bucket := s3test.Store(t)
	srv := s3test.Shared(t)
	ctx := t.Context()
	core := minio.Core{Client: srv.Client}
	for _, key := range []string{"uploads/killed/source", "hls/9/tok/v0/seg_000.ts"} {
		id, err := core.NewMultipartUpload(ctx, bucket, key, minio.PutObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		part := bytes.Repeat([]byte{7}, 5<<20)
		if _, err := core.PutObjectPart(ctx, bucket, key, id, 1, bytes.NewReader(part), int64(len(part)), minio.PutObjectPartOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	list := func(cutoff time.Time) []storage.UnfinishedWrite {
		var out []storage.UnfinishedWrite
		for w, err := range st.Unfinished(ctx, "uploads/", cutoff) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, w)
		}
		return out
	}
	if got := list(time.Now().Add(-time.Hour)); len(got) != 0 {
		t.Fatalf("Unfinished with a cutoff before the upload: %+v; want none", got)
	}
	got := list(time.Now().Add(time.Minute))
	if len(got) != 1 || got[0].Key != "uploads/killed/source" || got[0].ID == "" {
		t.Fatalf("Unfinished after the upload: %+v; want uploads/killed/source with its id", got)
	}
	for range 2 {
		if err := st.AbortWrite(ctx, got[0]); err != nil {
			t.Fatalf("AbortWrite: %v", err)
		}
	}
	if left := srv.Unfinished(t, bucket); !slices.Equal(left, []string{"hls/9/tok/v0/seg_000.ts"}) {
		t.Fatalf("unfinished uploads left: %q, want only the one outside uploads/", left)
	}
}

// A store with a prefix keeps every key under it, and shows keys without it.
func TestS3_Prefix(t *testing.T) {
	t.Parallel()
	srv, bucket := s3test.Shared(t), s3test.Bucket(t)
	cfg := srv.Config(bucket)
	cfg.Prefix = "deploy/a"
	st, err := storage.NewS3(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	put(t, st, "hls/1/tok/master.m3u8", "x")
	if got := srv.Keys(t, bucket); !slices.Equal(got, []string{"deploy/a/hls/1/tok/master.m3u8"}) {
		t.Fatalf("bucket keys %q, want the key under the prefix", got)
	}
	if got := keys(t, st, "hls/", ""); !slices.Equal(got, []string{"hls/1/tok/master.m3u8"}) {
		t.Fatalf("List %q, want keys without the prefix", got)
	}
	if got, err := st.Children(t.Context(), "hls/1/"); err != nil || !slices.Equal(got, []string{"tok"}) {
		t.Fatalf("Children %q, %v", got, err)
	}
	if err := st.DeletePrefix(t.Context(), "hls/1/tok/"); err != nil || len(srv.Keys(t, bucket)) != 0 {
		t.Fatalf("DeletePrefix: %v, left %q", err, srv.Keys(t, bucket))
	}
}

// An upload of 256 MiB streamed into S3 (a client's upload: the size is not known in advance)
// raises the Go heap by less than 32 MiB: minio-go holds one 8 MiB part at a time. The figure
// is in docs/benchmarks/README.md.
func TestS3_Put256MiBStreamKeepsTheHeapFlat(t *testing.T) {
	st, _ := s3test.Store(t)
	const size = 256 << 20
	var n int64
	var err error
	growth, baseline := heaptest.Growth(func() { n, err = st.Put(context.Background(), "uploads/big/source", pattern(size)) })
	if err != nil || n != size {
		t.Fatalf("Put: %d bytes, %v", n, err)
	}
	t.Logf("heap: baseline %.1f MiB, growth %.1f MiB for a %d MiB stream into S3", float64(baseline)/(1<<20), float64(growth)/(1<<20), size>>20)
	if growth >= 32<<20 {
		t.Fatalf("the heap grew by %s during a 256 MiB Put, want < 32 MiB", fmt.Sprintf("%.1f MiB", float64(growth)/(1<<20)))
	}
}

// Throttling (503 SlowDown) and server errors are retried by the client library, with backoff:
// a store that refuses the first two tries of every request still gets every Put and Open
// through.
func TestS3_RetriesThrottlingAnd5xx(t *testing.T) {
	t.Parallel()
	srv, bucket := s3test.Shared(t), s3test.Bucket(t)
	target, err := url.Parse(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	forward := httputil.NewSingleHostReverseProxy(target) // keeps the Host header the signature covers
	var mu sync.Mutex
	tries := map[string]int{}
	var refused atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		tries[r.Method+" "+r.URL.RequestURI()]++
		n := tries[r.Method+" "+r.URL.RequestURI()]
		mu.Unlock()
		if n <= 2 && r.URL.Path != "/"+bucket+"/" {
			refused.Add(1)
			code, status := "SlowDown", http.StatusServiceUnavailable
			if n == 2 {
				code, status = "InternalError", http.StatusInternalServerError
			}
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(status)
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>refused by the test</Message></Error>`, code)
			return
		}
		forward.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	cfg := srv.Config(bucket)
	cfg.Endpoint = proxy.URL
	st, err := storage.NewS3(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	put(t, st, "hls/1/tok/master.m3u8", "#EXTM3U\n")
	if got := read(t, st, "hls/1/tok/master.m3u8"); got != "#EXTM3U\n" {
		t.Fatalf("read back %q", got)
	}
	if refused.Load() < 4 {
		t.Fatalf("the proxy refused %d requests, want the first two of the Put and of the Open", refused.Load())
	}
}
