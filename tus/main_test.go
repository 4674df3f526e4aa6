package tus_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/httpserver"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/internal/s3test"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/notify"
	"github.com/playhead/playhead/storage"
	"github.com/playhead/playhead/tus"
)

func TestMain(m *testing.M) {
	// tusd gives a store some seconds past the end of each request to finish its writes
	// (GracefulRequestCompletionTimeout): that goroutine outlives the request by design.
	pgtest.Main(m, goleak.IgnoreTopFunction("github.com/tus/tusd/v2/pkg/handler.newDelayedContext.func1"))
}

const secret = "tus-test-secret-tus-test-secret-tus-test"

// partSize is the tests' part size, S3's smallest: uploads of a few MiB cross parts.
const partSize = storage.MinPartSize

// cluster is a database and a store shared by the nodes the test starts.
type cluster struct {
	pool    *pgxpool.Pool
	dbURL   string
	objects tus.Objects
	// dir is the local store's directory; "" on S3.
	dir    string
	bucket string
	// released, when set, gets a value each time a node's listener hands a release request
	// to its locker (after the locker acted on it).
	released chan string
}

// backends returns a cluster constructor per storage backend.
func backends() map[string]func(t *testing.T) *cluster {
	return map[string]func(t *testing.T) *cluster{
		"Local": func(t *testing.T) *cluster {
			pool, dbURL := pgtest.Pool(t)
			dir := t.TempDir()
			st, err := storage.NewLocal(dir)
			if err != nil {
				t.Fatal(err)
			}
			return &cluster{pool: pool, dbURL: dbURL, objects: st, dir: dir}
		},
		"S3": func(t *testing.T) *cluster {
			pool, dbURL := pgtest.Pool(t)
			st, bucket := s3test.Store(t)
			return &cluster{pool: pool, dbURL: dbURL, objects: st, bucket: bucket}
		},
	}
}

// node is one API node: a public app with the tus routes, its own locker and listener.
type node struct {
	url     string
	metrics *prometheus.Registry
	locker  *tus.Locker
}

// nodeConfig changes a node's Config before it starts.
type nodeConfig func(*tus.Config)

func (c *cluster) start(t *testing.T, configure ...nodeConfig) *node {
	t.Helper()
	verifier, err := auth.NewVerifier([]byte(secret), 0)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	reg := prometheus.NewRegistry()
	locker := tus.NewLocker(c.pool, logger)
	listener := notify.NewListener(c.dbURL, logger)
	listener.Handle(tus.ChannelRelease, func(id string) {
		locker.Release(id)
		if c.released != nil {
			c.released <- id
		}
	}, nil)
	cfg := tus.Config{Pool: c.pool, Objects: c.objects, Locker: locker, MaxBytes: 2 << 30, PartSize: partSize,
		Limits: &media.UploadLimits{Timeout: 10 * time.Minute}, Commit: media.Committer{JobKind: "encode", MaxAttempts: 3},
		Metrics: tus.NewMetrics(reg)}
	for _, f := range configure {
		f(&cfg)
	}
	h, err := tus.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	app := httpserver.New(httpserver.Config{BodyLimit: 64 << 10, ReadTimeout: 10 * time.Second, FirstByteRoutes: tus.FirstByteRoutes})
	h.Register(app, verifier.Middleware())
	if err := listener.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = app.Listener(ln) }()
	t.Cleanup(func() {
		_ = app.Shutdown()
		<-done
		_ = locker.Stop(context.Background())
		_ = listener.Stop(context.Background())
	})
	return &node{url: "http://" + ln.Addr().String(), metrics: reg, locker: locker}
}

func token(t *testing.T, member int64) string {
	t.Helper()
	tok, err := auth.Mint([]byte(secret), member, false, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// answer is what a request got.
type answer struct {
	status int
	header http.Header
	body   string
}

// do sends a tus request (Tus-Resumable set) as member's token to target (a path or a URL).
func (n *node) do(t *testing.T, member int64, method, target string, header map[string]string, body []byte) answer {
	t.Helper()
	if strings.HasPrefix(target, "/") {
		target = n.url + target
	}
	req, err := http.NewRequest(method, target, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body == nil {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	req.Header.Set("Tus-Resumable", "1.0.0")
	req.Header.Set("Authorization", "Bearer "+token(t, member))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(out)}
}

// metadata encodes Upload-Metadata.
func metadata(pairs ...string) string {
	var parts []string
	for i := 0; i+1 < len(pairs); i += 2 {
		parts = append(parts, pairs[i]+" "+base64.StdEncoding.EncodeToString([]byte(pairs[i+1])))
	}
	return strings.Join(parts, ",")
}

// create creates an upload of length bytes and returns its path (/v1/uploads/{id}).
func (n *node) create(t *testing.T, member int64, length int, meta string) string {
	t.Helper()
	a := n.do(t, member, http.MethodPost, "/v1/uploads", map[string]string{"Upload-Length": strconv.Itoa(length), "Upload-Metadata": meta}, nil)
	if a.status != http.StatusCreated || !strings.HasPrefix(a.header.Get("Location"), "/v1/uploads/") {
		t.Fatalf("create: %d Location %q %s", a.status, a.header.Get("Location"), a.body)
	}
	return a.header.Get("Location")
}

// chunked sends a tus request whose body b goes chunked (no Content-Length), as a client
// streaming a file of a length it does not know sends it.
func (n *node) chunked(t *testing.T, member int64, method, path string, header map[string]string, b []byte) answer {
	t.Helper()
	req, err := http.NewRequest(method, n.url+path, io.NopCloser(bytes.NewReader(b)))
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength, req.TransferEncoding = -1, []string{"chunked"}
	req.Header.Set("Tus-Resumable", "1.0.0")
	req.Header.Set("Authorization", "Bearer "+token(t, member))
	req.Header.Set("Content-Type", "application/offset+octet-stream")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(out)}
}

// patch sends b at offset.
func (n *node) patch(t *testing.T, member int64, path string, offset int, b []byte) answer {
	t.Helper()
	return n.do(t, member, http.MethodPatch, path, map[string]string{"Upload-Offset": strconv.Itoa(offset), "Content-Type": "application/offset+octet-stream"}, b)
}

// offset is the upload's offset as HEAD tells it.
func (n *node) offset(t *testing.T, member int64, path string) int {
	t.Helper()
	a := n.do(t, member, http.MethodHead, path, nil, nil)
	if a.status != http.StatusOK {
		t.Fatalf("HEAD %s: %d", path, a.status)
	}
	off, err := strconv.Atoi(a.header.Get("Upload-Offset"))
	if err != nil {
		t.Fatalf("HEAD %s: Upload-Offset %q", path, a.header.Get("Upload-Offset"))
	}
	return off
}

// rawPatch starts a PATCH of a body of length bytes on its own connection and writes the first
// bytes of it; the caller writes the rest (or closes the connection) and reads the answer.
func (n *node) rawPatch(t *testing.T, member int64, path string, offset, length int, first []byte) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(n.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(2 * time.Minute)) // only if the server hangs
	fmt.Fprintf(conn, "PATCH %s HTTP/1.1\r\nHost: playhead\r\nAuthorization: Bearer %s\r\nTus-Resumable: 1.0.0\r\n"+
		"Content-Type: application/offset+octet-stream\r\nUpload-Offset: %d\r\nContent-Length: %d\r\n\r\n", path, token(t, member), offset, length)
	if _, err := conn.Write(first); err != nil {
		t.Fatal(err)
	}
	return conn, bufio.NewReader(conn)
}

func randomFile(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// stored returns the sha256 of the object at key.
func (c *cluster) stored(t *testing.T, key string) ([32]byte, int64) {
	t.Helper()
	r, err := c.objects.Open(t.Context(), key)
	if err != nil {
		t.Fatalf("open %s: %v", key, err)
	}
	defer r.Close()
	h := sha256.New()
	n, err := io.Copy(h, r)
	if err != nil {
		t.Fatal(err)
	}
	return [32]byte(h.Sum(nil)), n
}

// expireNow makes every upload expire now and runs one pass of an expirer, returning the rows
// it removed.
func (c *cluster) expireNow(t *testing.T) (int, error) {
	t.Helper()
	if _, err := c.pool.Exec(t.Context(), `UPDATE uploads SET expires_at = statement_timestamp()`); err != nil {
		t.Fatal(err)
	}
	expirer, err := tus.NewExpirer(tus.ExpirerConfig{Pool: c.pool, Objects: c.objects, Metrics: tus.NewMetrics(prometheus.NewRegistry())})
	if err != nil {
		t.Fatal(err)
	}
	return expirer.Expire(t.Context())
}

// keys lists the store's objects under prefix.
func (c *cluster) keys(t *testing.T, prefix string) []string {
	t.Helper()
	var out []string
	for obj, err := range c.objects.List(t.Context(), prefix, "") {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, obj.Key)
	}
	return out
}

// unfinished lists the store's unfinished writes (S3 multipart uploads); none on Local.
func (c *cluster) unfinished(t *testing.T) []string {
	t.Helper()
	if c.bucket == "" {
		return nil
	}
	return s3test.Shared(t).Unfinished(t, c.bucket)
}

// metricValue reads the value of a counter or a gauge of reg (without labels).
func metricValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			if g := f.GetMetric()[0].GetGauge(); g != nil {
				return g.GetValue()
			}
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// waitFor polls cond until it holds, failing after a minute (a bound, not a measurement).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
