package export_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/export"
	"github.com/playhead/playhead/httpserver"
	"github.com/playhead/playhead/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var secret = []byte("test-secret-test-secret-test-secret!")

// bundle is one test's server: a real database and the export route on a loopback port, behind
// the token check and the error handler the binary uses.
type bundle struct {
	pool    *pgxpool.Pool
	baseURL string
}

func setup(t *testing.T) *bundle {
	t.Helper()
	pool, _ := pgtest.Pool(t)
	verifier, err := auth.NewVerifier(secret, 0)
	if err != nil {
		t.Fatal(err)
	}
	app := httpserver.New(httpserver.Config{BodyLimit: 64 << 10, WriteTimeout: 30 * time.Second})
	export.NewHandler(pool, 30*time.Second, slog.New(slog.DiscardHandler)).Register(app.Group("/v1", verifier.Middleware()))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.Shutdown(); <-done })
	return &bundle{pool: pool, baseURL: "http://" + ln.Addr().String()}
}

// exec runs sql with args on the test's database.
func (b *bundle) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := b.pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatal(err)
	}
}

// get asks for the export at query as member (0: without a token) and returns the answer,
// whose body the caller closes.
func (b *bundle) get(t *testing.T, member int64, query string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("GET", b.baseURL+"/v1/me/export"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	if member != 0 {
		tok, err := auth.Mint(secret, member, false, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// download saves the export at query of member to a file and returns its path, failing unless
// it is a 200.
func (b *bundle) download(t *testing.T, member int64, query string) string {
	t.Helper()
	resp := b.get(t, member, query)
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("export%s: %d %s", query, resp.StatusCode, body)
	}
	path := filepath.Join(t.TempDir(), "export")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := io.Copy(f, resp.Body); err != nil {
		t.Fatal(err)
	}
	return path
}
