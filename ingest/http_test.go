package ingest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/collection"
	"github.com/playhead/playhead/httpserver"
	"github.com/playhead/playhead/ingest"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/media"
)

var secret = []byte("ingest-test-secret-ingest-test-secret")

// startImportAPI serves the import and collection routes over a real database, as the binary
// wires them, and returns the base URL, an admin token and the database.
func startImportAPI(t *testing.T) (string, string, *pgxpool.Pool) {
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
	(&collection.Handler{Store: collection.NewStore(pool), Links: &media.Links{Signer: signer, TTL: time.Minute}}).Register(api)
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
	return "http://" + ln.Addr().String(), token, pool
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
	return postSheetTo(t, base+"/v1/admin/imports", token, disposition, content)
}

// postSheetTo is postSheet to the URL given (a dry run's).
func postSheetTo(t *testing.T, target, token, disposition, content string) (int, string) {
	t.Helper()
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	fw, _ := w.CreatePart(map[string][]string{"Content-Disposition": {`form-data; name="file"; ` + disposition}})
	_, _ = io.WriteString(fw, content)
	_ = w.Close()
	req, _ := http.NewRequest(http.MethodPost, target, &body)
	req.Header.Set("Content-Type", w.FormDataContentType())
	return do(t, req, token)
}

// TestImportAPI_TextTheDatabaseCannotStore: a NUL byte in a collection name (a path
// parameter, or a sheet's cell) or in the sheet's file name must not reach PostgreSQL, which
// refuses it (a 500). The path parameter is 400, the file name 422, and a bad cell rejects its
// row only.
func TestImportAPI_TextTheDatabaseCannotStore(t *testing.T) {
	base, token, _ := startImportAPI(t)
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

// TestImportAPI_DryRunAndAdminsOnly: a dry run answers what the import will do and writes
// nothing (no import, row, media, job or member); the import then does what it said. A
// member's token is refused (403) on the import, its dry run and the import's report, and
// writes nothing either.
func TestImportAPI_DryRunAndAdminsOnly(t *testing.T) {
	base, admin, pool := startImportAPI(t)
	member, err := auth.Mint(secret, 2, false, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	counts := func() string {
		var n [5]int
		if err := pool.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM imports), (SELECT count(*) FROM import_rows),
			(SELECT count(*) FROM media), (SELECT count(*) FROM jobs), (SELECT count(*) FROM members)`).Scan(&n[0], &n[1], &n[2], &n[3], &n[4]); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%d imports, %d rows, %d media, %d jobs, %d members", n[0], n[1], n[2], n[3], n[4])
	}
	sheet := "collection,chapter,order,video_url\n" +
		"L,1,1,https://example.com/a.mp4\n" +
		"L,x,2,https://example.com/b.mp4\n" +
		"L,1,3,https://example.com/c.mp4\n"
	empty := counts()
	for _, target := range []string{base + "/v1/admin/imports", base + "/v1/admin/imports?dry_run=true"} {
		if status, body := postSheetTo(t, target, member, `filename="a.csv"`, sheet); status != http.StatusForbidden {
			t.Errorf("a member's POST %s: %d %s, want 403", target, status, body)
		}
	}
	status, dry := postSheetTo(t, base+"/v1/admin/imports?dry_run=true", admin, `filename="a.csv"`, sheet)
	if status != http.StatusOK {
		t.Fatalf("dry run: %d %s, want 200", status, dry)
	}
	if after := counts(); after != empty {
		t.Fatalf("after a dry run and a member's attempts: %s; before: %s", after, empty)
	}
	status, real := postSheet(t, base, admin, `filename="a.csv"`, sheet)
	if status != http.StatusAccepted {
		t.Fatalf("import: %d %s, want 202", status, real)
	}
	type report struct {
		ID                 int64
		DryRun             bool `json:"dry_run"`
		Accepted, Rejected int
		Rows               []struct {
			Row            int
			Collection     string
			Chapter, Order json.RawMessage
			VideoURL       string `json:"video_url"`
			State, Reason  string
		}
	}
	var d, r report
	if err := json.Unmarshal([]byte(dry), &d); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(real), &r); err != nil {
		t.Fatal(err)
	}
	if !d.DryRun || d.ID != 0 || r.DryRun || d.Accepted != 2 || d.Rejected != 1 || d.Accepted != r.Accepted || d.Rejected != r.Rejected || len(d.Rows) != len(r.Rows) {
		t.Fatalf("dry run %s\nimport %s\nwant the same counts (2 accepted, 1 rejected), dry_run only on the first", dry, real)
	}
	for i, dr := range d.Rows {
		rr := r.Rows[i]
		wantState := map[string]string{"ACCEPTED": "PENDING", "REJECTED": "REJECTED"}[dr.State]
		if dr.Row != rr.Row || dr.Collection != rr.Collection || dr.VideoURL != rr.VideoURL || dr.Reason != rr.Reason ||
			string(dr.Chapter)+string(dr.Order) != string(rr.Chapter)+string(rr.Order) || rr.State != wantState {
			t.Errorf("row %d: dry run %s\nimport %s", dr.Row, dry, real)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/v1/admin/imports/%d", base, r.ID), nil)
	if status, body := do(t, req, member); status != http.StatusForbidden {
		t.Errorf("a member's GET of the import: %d %s, want 403", status, body)
	}
}
