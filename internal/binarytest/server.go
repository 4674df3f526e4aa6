package binarytest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/internal/contract"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/media"
)

// Secret signs the tokens of every Server (at least auth.MinSecretBytes long).
const Secret = "binarytest-secret-binarytest-secret-0123"

// ReadyTimeout bounds how long Start waits for /readyz to answer 200.
const ReadyTimeout = 30 * time.Second

// Server is a running `playhead serve`.
type Server struct {
	*Process
	// DBURL is the database the server uses, reached directly (not through PgBouncer under
	// make test-pgbouncer); pass it as DATABASE_URL to Start to share it.
	DBURL string
	// HTTPURL is the public API, http://127.0.0.1:port.
	HTTPURL string
	// MetricsAddr is the metrics listener, 127.0.0.1:port, and MetricsURL the same as a URL.
	MetricsAddr, MetricsURL string
	// Client is the HTTP client Do uses: 10 s per request. Every exchange it carries is
	// checked against the OpenAPI document (checkedTransport).
	Client *http.Client
}

// Start runs `playhead serve` with the environment env on top of the harness's (a fresh
// migrated database, loopback listeners on free ports, Secret, a 30 s shutdown budget) and
// waits until /readyz on the metrics address answers 200 and, unless its log level hides it,
// the node's "serving" line is in Stderr: everything it logged while starting (a spill file's
// replay, say) is there when Start returns, not still in the pipe. A DATABASE_URL in env makes
// the server share that database instead of getting a fresh one.
func Start(t testing.TB, env map[string]string) *Server {
	t.Helper()
	return StartBinary(t, binary, env)
}

// StartBinary is Start with the playhead executable at path instead of the one under test: a
// benchmark runs an older build beside it, on the same load and the same PostgreSQL.
func StartBinary(t testing.TB, path string, env map[string]string) *Server {
	t.Helper()
	httpAddr, metricsAddr := FreeAddr(t), FreeAddr(t)
	all := map[string]string{
		"PLAYHEAD_JWT_SECRET":       Secret,
		"PLAYHEAD_HTTP_ADDR":        httpAddr,
		"PLAYHEAD_METRICS_ADDR":     metricsAddr,
		"PLAYHEAD_SHUTDOWN_TIMEOUT": "30s",
	}
	maps.Copy(all, env)
	if all["DATABASE_URL"] == "" {
		all["DATABASE_URL"] = pgtest.URL(t)
	}
	dbURL := all["DATABASE_URL"]
	// make test-pgbouncer: the pools of requests and flushes go through PgBouncer in
	// transaction mode, what needs a session straight to the server, as in production.
	if pooled := pgtest.PooledURL(t, dbURL); pooled != "" && all["PLAYHEAD_DB_POOLER"] == "" {
		all["DATABASE_URL"] = pooled
		all["PLAYHEAD_DATABASE_DIRECT_URL"] = dbURL
		all["PLAYHEAD_DB_POOLER"] = "transaction"
	}
	transport := &http.Transport{MaxIdleConnsPerHost: 16}
	t.Cleanup(transport.CloseIdleConnections)
	checked := checkedTransport(t, transport, all["PLAYHEAD_HTTP_ADDR"])
	s := &Server{
		DBURL:       dbURL,
		HTTPURL:     "http://" + all["PLAYHEAD_HTTP_ADDR"],
		MetricsAddr: all["PLAYHEAD_METRICS_ADDR"],
		MetricsURL:  "http://" + all["PLAYHEAD_METRICS_ADDR"],
		Client:      &http.Client{Transport: checked, Timeout: 10 * time.Second},
	}
	s.Process = runBinary(t, path, all, "serve")
	level := strings.ToLower(all["PLAYHEAD_LOG_LEVEL"])
	logsServing := level == "" || level == "info" || level == "debug"

	deadline := time.Now().Add(ReadyTimeout)
	var last string
	for {
		if exited, err := s.Exited(); exited {
			t.Fatalf("playhead serve exited before it was ready (%v); stderr:\n%s", err, s.Stderr)
		}
		status, body, err := s.Do(http.MethodGet, s.MetricsURL+"/readyz", "", nil)
		logged := !logsServing || strings.Contains(s.Stderr.String(), `"msg":"serving"`)
		if err == nil && status == http.StatusOK && logged {
			if all["PLAYHEAD_DB_POOLER"] == "transaction" && all["DATABASE_URL"] != dbURL {
				checkPooled(t, dbURL)
			}
			return s
		}
		last = fmt.Sprintf("status %d %s, err %v, serving logged %v", status, body, err, logged)
		if time.Now().After(deadline) {
			t.Fatalf("playhead serve not ready on %s/readyz after %s (last answer: %s)", s.MetricsURL, ReadyTimeout, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkPooled fails the test unless the server on the database at dbURL connects through
// PgBouncer (its request pool keeps the connection of its start-up ping).
func checkPooled(t testing.TB, dbURL string) {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	database := strings.TrimPrefix(u.Path, "/")
	if n := pgtest.PooledClients(t, database); n == 0 {
		t.Fatalf("playhead serve is ready but holds no connection through PgBouncer to %s", database)
	}
}

// reportOnce registers the contract coverage report once per test process.
var reportOnce sync.Once

// checkedTransport wraps base in a contract.Transport: the test fails, when it ends, for every
// exchange with the public API at host that departs from api/openapi.yaml. The routes × statuses all the tests of the
// process saw are printed when they have run.
func checkedTransport(t testing.TB, base http.RoundTripper, host string) *contract.Transport {
	t.Helper()
	checker, err := contract.Shared()
	if err != nil {
		t.Fatal(err)
	}
	reportOnce.Do(func() { pgtest.AtExit(func() { fmt.Print(checker.Report()) }) })
	tr := &contract.Transport{Base: base, Checker: checker, Host: host}
	t.Cleanup(func() {
		for _, err := range tr.Violations() {
			t.Errorf("contract (api/openapi.yaml): %v", err)
		}
	})
	return tr
}

// handedOut holds every address FreeAddr returned in this test process: the kernel may give
// a port it just gave back again, and two listeners of one server on the same port fail.
var handedOut sync.Map

// FreeAddr returns a loopback address with a port that was free a moment ago and that no
// earlier FreeAddr call of this process returned.
func FreeAddr(t testing.TB) string {
	t.Helper()
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		if _, seen := handedOut.LoadOrStore(addr, true); !seen {
			return addr
		}
	}
}

// Token returns a token for member, with the admin role when admin, signed with Secret and
// valid for an hour.
func Token(t testing.TB, member int64, admin bool) string {
	t.Helper()
	tok, err := auth.Mint([]byte(Secret), member, admin, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// URL returns the public API's URL of the path fmt.Sprintf(format, args...).
func (s *Server) URL(format string, args ...any) string {
	return s.HTTPURL + fmt.Sprintf(format, args...)
}

// Do sends a request with an optional bearer token and JSON body (nil: none), and returns the
// status and body.
func (s *Server) Do(method, url, token string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return s.send(req)
}

func (s *Server) send(req *http.Request) (int, []byte, error) {
	resp, err := s.Client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// MustDo is Do that fails the test on a transport error or a status other than want, and
// returns the body.
func (s *Server) MustDo(t testing.TB, want int, method, url, token string, body any) []byte {
	t.Helper()
	status, out, err := s.Do(method, url, token, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	if status != want {
		t.Fatalf("%s %s: status %d, want %d; body %s", method, url, status, want, out)
	}
	return out
}

// CreateMedia registers a READY public media item of one hour (MediaDurationMS) through the
// admin API and returns its id.
func (s *Server) CreateMedia(t testing.TB, adminToken, title string) int64 {
	t.Helper()
	out := s.MustDo(t, http.StatusCreated, http.MethodPost, s.URL("/v1/admin/media"), adminToken,
		map[string]any{"title": title, "duration_ms": MediaDurationMS})
	return positiveID(t, "POST /v1/admin/media", out)
}

func positiveID(t testing.TB, what string, out []byte) int64 {
	t.Helper()
	var v struct {
		ID int64 `json:"id"`
	}
	if err := json.Unmarshal(out, &v); err != nil || v.ID <= 0 {
		t.Fatalf("%s answered %s (%v), want a positive id", what, out, err)
	}
	return v.ID
}

// PostMultipart posts fields (in key order) and then content as the form's file field "file"
// named fileName, and returns the status and body.
func (s *Server) PostMultipart(url, token string, fields map[string]string, fileName string, content io.Reader) (int, []byte, error) {
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if err := mw.WriteField(k, fields[k]); err != nil {
			return 0, nil, err
		}
	}
	fw, err := mw.CreateFormFile("file", fileName)
	if err != nil {
		return 0, nil, err
	}
	if _, err := io.Copy(fw, content); err != nil {
		return 0, nil, err
	}
	if err := mw.Close(); err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequest(http.MethodPost, url, &body)
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	return s.send(req)
}

// Upload is one POST /v1/media.
type Upload struct {
	Path       string // the file to send
	FileName   string // the name the form gives it; the base of Path when empty
	Title      string // sent when not empty
	Visibility string // PUBLIC or PRIVATE, sent when not empty
}

// Upload posts u as token's member, expects 202 {"id", "status": "PROCESSING"} and returns
// the new media's id.
func (s *Server) Upload(t testing.TB, token string, u Upload) int64 {
	t.Helper()
	f, err := os.Open(u.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fields := map[string]string{}
	if u.Title != "" {
		fields["title"] = u.Title
	}
	if u.Visibility != "" {
		fields["visibility"] = u.Visibility
	}
	name := u.FileName
	if name == "" {
		name = filepath.Base(u.Path)
	}
	status, out, err := s.PostMultipart(s.URL("/v1/media"), token, fields, name, f)
	if err != nil {
		t.Fatalf("POST /v1/media (%s): %v", u.Path, err)
	}
	if status != http.StatusAccepted {
		t.Fatalf("POST /v1/media (%s): status %d, want 202; body %s", u.Path, status, out)
	}
	var got struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(out, &got); err != nil || got.Status != string(media.StatusProcessing) {
		t.Fatalf("POST /v1/media answered %s (%v), want status PROCESSING", out, err)
	}
	return positiveID(t, "POST /v1/media", out)
}

// ImportRow is one row of an import as GET /v1/admin/imports/{id} shows it.
type ImportRow struct {
	Row     int    `json:"row"`
	State   string `json:"state"`
	Reason  string `json:"reason"`
	MediaID *int64 `json:"media_id"`
}

// Import is an import as the admin API shows it.
type Import struct {
	ID       int64       `json:"id"`
	Accepted int         `json:"accepted"`
	Rejected int         `json:"rejected"`
	Rows     []ImportRow `json:"rows"`
}

// Import posts the CSV sheet csv (named fileName) to POST /v1/admin/imports, expects 202 and
// returns the import.
func (s *Server) Import(t testing.TB, adminToken, fileName, csv string) Import {
	t.Helper()
	status, out, err := s.PostMultipart(s.URL("/v1/admin/imports"), adminToken, nil, fileName, strings.NewReader(csv))
	if err != nil {
		t.Fatalf("POST /v1/admin/imports: %v", err)
	}
	if status != http.StatusAccepted {
		t.Fatalf("POST /v1/admin/imports: status %d, want 202; body %s", status, out)
	}
	var v Import
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("POST /v1/admin/imports answered %s: %v", out, err)
	}
	return v
}

// Metrics returns the text of /metrics on the metrics address.
func (s *Server) Metrics(t testing.TB) string {
	t.Helper()
	return string(s.MustDo(t, http.StatusOK, http.MethodGet, s.MetricsURL+"/metrics", "", nil))
}

// Metric returns the sum of every sample of the metric name on /metrics (0 when absent).
func (s *Server) Metric(t testing.TB, name string) float64 {
	t.Helper()
	var total float64
	for line := range strings.Lines(s.Metrics(t)) {
		if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
			continue
		}
		fields := strings.Fields(line)
		if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil {
			total += v
		}
	}
	return total
}

// Sample returns the value of one series of /metrics, written as the exposition writes it
// (`name{label="value"}`); the test fails when the node does not expose it.
func (s *Server) Sample(t testing.TB, series string) float64 {
	t.Helper()
	for line := range strings.Lines(s.Metrics(t)) {
		if v, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", series, err)
			}
			return f
		}
	}
	t.Fatalf("no %s on /metrics", series)
	return 0
}

// Ready returns the status /readyz answers on the metrics address, 0 when it does not answer.
func (s *Server) Ready() int {
	status, _, err := s.Do(http.MethodGet, s.MetricsURL+"/readyz", "", nil)
	if err != nil {
		return 0
	}
	return status
}

// Pool opens a pgx pool on the server's database, closed when the test ends.
func (s *Server) Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), s.DBURL)
	if err != nil {
		t.Fatalf("connect to the test database: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}
