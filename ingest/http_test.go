package ingest_test

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/httpserver"
	"github.com/playhead/playhead/ingest"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/media"
)

var secret = []byte("ingest-test-secret-ingest-test-secret")

// startImportAPI serves the import and collection routes over a real database, as the binary
// wires them, and returns the base URL and an admin token.
func startImportAPI(t *testing.T) (string, string) {
	t.Helper()
	pool, _ := pgtest.Pool(t)
	store := ingest.NewStore(pool, 3)
	verifier, err := auth.NewVerifier(secret, 0)
	if err != nil {
		t.Fatal(err)
	}
	app := httpserver.New(httpserver.Config{BodyLimit: 64 << 10})
	imports := &ingest.AdminHandler{Store: store}
	imports.RegisterUpload(app, verifier.Middleware(), auth.RequireAdmin)
	api := app.Group("/v1", httpserver.LimitBody(64<<10), verifier.Middleware())
	signer, err := media.NewSigner(secret)
	if err != nil {
		t.Fatal(err)
	}
	(&ingest.CollectionHandler{Store: store, Links: &media.Links{Signer: signer, TTL: time.Minute}}).Register(api)
	imports.Register(api.Group("/admin", auth.RequireAdmin))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.Shutdown(); <-done })
	token, err := auth.Mint(secret, 1, true, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return "http://" + ln.Addr().String(), token
}

func do(t *testing.T, req *http.Request, token string) (int, string) {
	t.Helper()
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// postSheet posts content as the import's file part, with the Content-Disposition parameters
// given (filename="…" or filename*=…).
func postSheet(t *testing.T, base, token, disposition, content string) (int, string) {
	t.Helper()
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	fw, _ := w.CreatePart(map[string][]string{"Content-Disposition": {`form-data; name="file"; ` + disposition}})
	_, _ = io.WriteString(fw, content)
	_ = w.Close()
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/admin/imports", &body)
	req.Header.Set("Content-Type", w.FormDataContentType())
	return do(t, req, token)
}

// TestImportAPI_TextTheDatabaseCannotStore is finding 5 of issue 11 for imports: a NUL byte in
// a collection name (a path parameter, or a sheet's cell) or in the sheet's file name reached
// PostgreSQL and answered 500. Now the path parameter is 400, the file name 422, and a bad
// cell rejects its row only.
func TestImportAPI_TextTheDatabaseCannotStore(t *testing.T) {
	base, token := startImportAPI(t)
	for _, name := range []string{"%00", "a%00b", "a%FFb", "%1B%5B31m"} {
		req, _ := http.NewRequest(http.MethodGet, base+"/v1/collections/"+name, nil)
		if status, body := do(t, req, token); status != http.StatusBadRequest {
			t.Errorf("GET /v1/collections/%s: %d %s, want 400", name, status, body)
		}
	}
	sheet := "collection,chapter,order,video_url\n" +
		"bad\x00name,1,1,https://example.com/a.mp4\n" +
		"good,1,2,https://example.com/b.mp4\n" +
		"good,1,3,https://example.com/c\x01.mp4\n"
	status, body := postSheet(t, base, token, `filename="sheet.csv"`, sheet)
	if status != http.StatusAccepted {
		t.Fatalf("POST a sheet with a NUL in one cell: %d %s, want 202", status, body)
	}
	var got struct {
		Accepted, Rejected int
		Rows               []struct {
			Row    int
			State  string
			Reason string
		}
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if got.Accepted != 1 || got.Rejected != 2 {
		t.Errorf("accepted %d rejected %d, want 1 and 2: %s", got.Accepted, got.Rejected, body)
	}
	for _, disposition := range []string{`filename*=UTF-8''sheet%00.csv`, `filename*=UTF-8''%1B%5B2J.csv`} {
		if status, body := postSheet(t, base, token, disposition, sheet); status != http.StatusUnprocessableEntity {
			t.Errorf("POST a sheet named by %s: %d %s, want 422", disposition, status, body)
		}
	}
}
