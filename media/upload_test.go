package media_test

import (
	"bufio"
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
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/minio/minio-go/v7"

	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/httpserver"
	"github.com/playhead/playhead/internal/formtest"
	"github.com/playhead/playhead/internal/heaptest"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/internal/s3test"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/storage"
)

type uploadServer struct {
	pool    *pgxpool.Pool
	url     string
	storage string
	token   string
}

// startUploadServer serves an UploadHandler with maxBytes and a one-minute timeout, changed by
// configure.
func startUploadServer(t *testing.T, maxBytes int64, configure ...func(*media.UploadHandler)) *uploadServer {
	t.Helper()
	pool, _ := pgtest.Pool(t)
	dir := t.TempDir()
	store, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := auth.NewVerifier([]byte(secret), 0)
	if err != nil {
		t.Fatal(err)
	}
	app := httpserver.New(httpserver.Config{BodyLimit: 64 << 10, FirstByteRoutes: []httpserver.Route{media.UploadRoute}})
	h := &media.UploadHandler{Pool: pool, Store: store, MaxBytes: maxBytes, Limits: &media.UploadLimits{Timeout: 10 * time.Minute},
		Commit: media.Committer{JobKind: "encode", MaxAttempts: 3}}
	for _, f := range configure {
		f(h)
	}
	h.Register(app, verifier.Middleware())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.Shutdown() })
	tok, err := auth.Mint([]byte(secret), 11, false, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return &uploadServer{pool: pool, url: "http://" + ln.Addr().String() + "/v1/media", storage: dir, token: tok}
}

func (s *uploadServer) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := s.pool.QueryRow(t.Context(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// post sends body with contentType; size -1 sends it chunked.
func (s *uploadServer) post(t *testing.T, contentType string, body io.Reader, size int64) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = size
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// postRaw sends the request over a raw connection, writing the body in the background, and
// reads the answer even if the server answers (413) and closes before the body is written:
// net/http's client may report the broken write instead of the answer it already got.
func (s *uploadServer) postRaw(t *testing.T, contentType string, body []byte, chunked bool) (int, []byte) {
	t.Helper()
	u, _ := url.Parse(s.url)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	header := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: %s\r\n", u.Path, u.Host, s.token, contentType)
	if chunked {
		header += "Transfer-Encoding: chunked\r\n\r\n"
	} else {
		header += fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body))
	}
	go func() {
		if _, err := io.WriteString(conn, header); err != nil {
			return
		}
		for rest := body; len(rest) > 0; {
			n := min(len(rest), 32<<10)
			var err error
			if chunked {
				_, err = fmt.Fprintf(conn, "%x\r\n%s\r\n", n, rest[:n])
			} else {
				_, err = conn.Write(rest[:n])
			}
			if err != nil {
				return // the server answered and closed: expected for a refused body
			}
			rest = rest[n:]
		}
		if chunked {
			_, _ = io.WriteString(conn, "0\r\n\r\n")
		}
	}()
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// multipartBody builds a small form in memory, its fields in the order of their names.
func multipartBody(t *testing.T, fields map[string]string, file []byte) (string, *bytes.Buffer) {
	t.Helper()
	var pairs [][2]string
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		pairs = append(pairs, [2]string{k, fields[k]})
	}
	body, contentType := formtest.Multipart(pairs, "clip.mp4", file)
	return contentType, bytes.NewBuffer(body)
}

// storedObjects counts files under the storage dir.
func storedObjects(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return nil
	})
	return n
}

func TestUpload_BadInput(t *testing.T) {
	t.Parallel()
	s := startUploadServer(t, 1<<20)
	big := bytes.Repeat([]byte("x"), 2<<20)
	for _, chunked := range []bool{false, true} {
		ct, b := multipartBody(t, nil, big)
		if status, out := s.postRaw(t, ct, b.Bytes(), chunked); status != http.StatusRequestEntityTooLarge {
			t.Fatalf("a 2 MiB upload over a 1 MiB limit (chunked %v): %d %s, want 413", chunked, status, out)
		}
	}
	cases := []struct {
		name   string
		build  func() (string, io.Reader, int64)
		status int
	}{
		{"NotMultipart", func() (string, io.Reader, int64) {
			return "application/json", strings.NewReader(`{"file":"x"}`), 12
		}, 415},
		{"NoBoundary", func() (string, io.Reader, int64) {
			return "multipart/form-data", strings.NewReader("--x\r\n"), 5
		}, 400},
		{"NoFile", func() (string, io.Reader, int64) {
			ct, b := multipartBody(t, map[string]string{"title": "t"}, nil)
			return ct, b, int64(b.Len())
		}, 422},
		{"EmptyFile", func() (string, io.Reader, int64) {
			ct, b := multipartBody(t, nil, []byte{})
			return ct, b, int64(b.Len())
		}, 422},
		{"UnknownField", func() (string, io.Reader, int64) {
			ct, b := multipartBody(t, map[string]string{"colour": "red"}, []byte("abc"))
			return ct, b, int64(b.Len())
		}, 400},
		{"BadVisibility", func() (string, io.Reader, int64) {
			ct, b := multipartBody(t, map[string]string{"visibility": "FRIENDS"}, []byte("abc"))
			return ct, b, int64(b.Len())
		}, 422},
		{"NULInTitle", func() (string, io.Reader, int64) { // PostgreSQL refuses NUL: a 500 if it got there
			ct, b := multipartBody(t, map[string]string{"title": "a\x00b"}, []byte("abc"))
			return ct, b, int64(b.Len())
		}, 422},
		{"InvalidUTF8Title", func() (string, io.Reader, int64) {
			ct, b := multipartBody(t, map[string]string{"title": "a\xff\xfeb"}, []byte("abc"))
			return ct, b, int64(b.Len())
		}, 422},
		{"ControlCharacterTitle", func() (string, io.Reader, int64) {
			ct, b := multipartBody(t, map[string]string{"title": "a\x1b[31mred"}, []byte("abc"))
			return ct, b, int64(b.Len())
		}, 422},
		{"Truncated", func() (string, io.Reader, int64) {
			ct, b := multipartBody(t, nil, []byte("some bytes"))
			cut := b.Bytes()[:b.Len()-20]
			return ct, bytes.NewReader(cut), int64(len(cut))
		}, 400},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ct, body, size := tc.build()
			status, out := s.post(t, ct, body, size)
			if status != tc.status {
				t.Fatalf("status = %d, want %d (%s)", status, tc.status, out)
			}
			var e struct{ Error string }
			if json.Unmarshal(out, &e) != nil || e.Error == "" {
				t.Fatalf("body %q is not a JSON error", out)
			}
		})
	}
	if n := s.count(t, `SELECT count(*) FROM media`); n != 0 {
		t.Fatalf("%d media rows from bad uploads", n)
	}
	if n := s.count(t, `SELECT count(*) FROM jobs`); n != 0 {
		t.Fatalf("%d jobs from bad uploads", n)
	}
	if n := storedObjects(t, s.storage); n != 0 {
		t.Fatalf("%d stored objects left behind by bad uploads", n)
	}
}

// TestUpload_HostileFileNameMakesACleanTitle: without a title field the file's name is the
// title, and a name with invalid UTF-8 or control characters must neither fail the upload nor
// reach the database as such (PostgreSQL refuses a NUL byte, and the upload would end in a
// 500).
func TestUpload_HostileFileNameMakesACleanTitle(t *testing.T) {
	t.Parallel()
	s := startUploadServer(t, 1<<20)
	// Raw control bytes in a header line are refused by the multipart reader (400); RFC 2231's
	// percent-encoded filename* is decoded by it, so that is where a NUL gets in.
	for disposition, want := range map[string]string{
		`filename="bad` + "\xff\xfe" + `name.mp4"`: "badname",
		"filename=\"holiday\tclip.mp4\"":           "holidayclip",
		"filename*=UTF-8''nul%00%01name.mp4":       "nulname",
		"filename*=UTF-8''%00%00.mp4":              "untitled",
	} {
		var buf bytes.Buffer
		w := multipart.NewWriter(&buf)
		fw, _ := w.CreatePart(map[string][]string{
			"Content-Disposition": {`form-data; name="file"; ` + disposition},
			"Content-Type":        {"video/mp4"},
		})
		_, _ = fw.Write([]byte("not really a video"))
		_ = w.Close()
		status, out := s.post(t, w.FormDataContentType(), &buf, int64(buf.Len()))
		if status != http.StatusAccepted {
			t.Errorf("%s: status %d %s, want 202", disposition, status, out)
			continue
		}
		var got struct {
			ID    int64
			Title string
		}
		_ = json.Unmarshal(out, &got)
		var title string
		if err := s.pool.QueryRow(context.Background(), `SELECT title FROM media WHERE id = $1`, got.ID).Scan(&title); err != nil {
			t.Fatal(err)
		}
		if title != want || got.Title != want {
			t.Errorf("%s: title %q, answered %q, want %q", disposition, title, got.Title, want)
		}
	}
}

func TestUpload_CreatesMediaAndJobTogether(t *testing.T) {
	t.Parallel()
	s := startUploadServer(t, 1<<20)
	ct, body := multipartBody(t, map[string]string{"title": "Holiday", "visibility": "public"}, []byte("fake video bytes"))
	status, out := s.post(t, ct, body, int64(body.Len()))
	if status != http.StatusAccepted {
		t.Fatalf("upload: %d %s", status, out)
	}
	var resp struct {
		ID     int64
		Status string
	}
	if err := json.Unmarshal(out, &resp); err != nil || resp.ID == 0 || resp.Status != "PROCESSING" {
		t.Fatalf("response %s", out)
	}
	if n := s.count(t, `SELECT count(*) FROM media WHERE id = $1 AND owner_id = 11 AND title = 'Holiday' AND visibility = 'PUBLIC' AND status = 'PROCESSING'`, resp.ID); n != 1 {
		t.Fatal("media row not as uploaded")
	}
	if n := s.count(t, `SELECT count(*) FROM jobs WHERE subject_id = $1 AND kind = 'encode' AND status = 'PENDING'`, resp.ID); n != 1 {
		t.Fatal("no pending encode job for the upload")
	}
	var key string
	if err := s.pool.QueryRow(t.Context(), `SELECT source_key FROM media WHERE id = $1`, resp.ID).Scan(&key); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(s.storage, filepath.FromSlash(key)))
	if err != nil || string(got) != "fake video bytes" {
		t.Fatalf("stored source = %q, %v", got, err)
	}
}

// TestUpload_RequestPipelinedBehindAnUpload writes a small upload and another request in one
// go. The upload route is a first-byte route, whose pre-read took the second request's bytes
// with the body: the upload is stored exactly as sent, the connection is closed after
// its answer, and the second request is never answered. With the form's closing boundary
// missing, the upload is refused (400); read past its Content-Length, fasthttp's stream would
// have handed the handler the next request's bytes and then panicked, ending the process.
func TestUpload_RequestPipelinedBehindAnUpload(t *testing.T) {
	t.Parallel()
	s := startUploadServer(t, 1<<20)
	u, _ := url.Parse(s.url)
	ct, body := multipartBody(t, nil, []byte("fake video bytes"))
	complete := body.String()
	truncated := complete[:strings.LastIndex(complete, "\r\n--")] // the file, without the closing boundary
	next := "GET /v1/media HTTP/1.1\r\nHost: playhead\r\n\r\n" + strings.Repeat("junk", 1000)
	for _, c := range []struct {
		name, body string
		status     int
	}{{"complete", complete, http.StatusAccepted}, {"without its closing boundary", truncated, http.StatusBadRequest}} {
		conn, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(time.Minute)) // only if the server hangs
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s%s",
			u.Path, u.Host, s.token, ct, len(c.body), c.body, next)
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: no answer: %v", c.name, err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !resp.Close {
			t.Errorf("%s: %d %s (Connection: close %v), want %d closing the connection", c.name, resp.StatusCode, out, resp.Close, c.status)
		}
		if extra, err := http.ReadResponse(br, nil); err == nil {
			t.Errorf("%s: the request behind the upload was answered %d", c.name, extra.StatusCode)
		}
		conn.Close()
	}
	var key string
	if err := s.pool.QueryRow(t.Context(), `SELECT source_key FROM media`).Scan(&key); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(s.storage, filepath.FromSlash(key))); err != nil || string(got) != "fake video bytes" {
		t.Errorf("stored source = %q, %v; want the file as sent", got, err)
	}
}

// A 256 MiB upload, streamed chunked from a generator, raises the Go heap by less than 32 MiB:
// the body goes from the socket to the file in small buffers.
func TestUpload_256MiBKeepsTheHeapFlat(t *testing.T) {
	s := startUploadServer(t, 1<<30)
	key := upload256MiB(t, s)
	info, err := os.Stat(filepath.Join(s.storage, filepath.FromSlash(key)))
	if err != nil || info.Size() != 256<<20 {
		t.Fatalf("stored %v bytes (%v), want %d", info.Size(), err, 256<<20)
	}
}

// The same upload into S3 (SeaweedFS) raises the heap by less than 32 MiB too: the body goes
// to the bucket in 8 MiB multipart parts, one held at a time (the figure is in
// docs/benchmarks/README.md).
func TestUpload_256MiBToS3KeepsTheHeapFlat(t *testing.T) {
	st, bucket := s3test.Store(t)
	s := startUploadServer(t, 1<<30, func(h *media.UploadHandler) { h.Store = st })
	key := upload256MiB(t, s)
	info, err := s3test.Shared(t).Client.StatObject(t.Context(), bucket, key, minio.StatObjectOptions{})
	if err != nil || info.Size != 256<<20 {
		t.Fatalf("the bucket holds %d bytes at %s (%v), want %d", info.Size, key, err, 256<<20)
	}
}

// upload256MiB streams a 256 MiB upload to s chunked, checks that the heap grew by less than
// 32 MiB meanwhile, and returns the stored source's key.
func upload256MiB(t *testing.T, s *uploadServer) string {
	t.Helper()
	const size = 256 << 20
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		fw, err := mw.CreateFormFile("file", "big.bin")
		if err != nil {
			pw.CloseWithError(err)
			return
		}
		chunk := bytes.Repeat([]byte{0xAB}, 64<<10)
		for written := 0; written < size; written += len(chunk) {
			if _, err := fw.Write(chunk); err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		pw.CloseWithError(mw.Close())
	}()
	var status int
	var out []byte
	growth, baseline := heaptest.Growth(func() { status, out = s.post(t, mw.FormDataContentType(), pr, -1) })
	if status != http.StatusAccepted {
		t.Fatalf("upload: %d %s", status, out)
	}
	var key string
	if err := s.pool.QueryRow(t.Context(), `SELECT source_key FROM media`).Scan(&key); err != nil {
		t.Fatal(err)
	}
	t.Logf("heap: baseline %.1f MiB, growth %.1f MiB for a %d MiB upload", float64(baseline)/(1<<20), float64(growth)/(1<<20), size>>20)
	if growth >= 32<<20 {
		t.Fatalf("the heap grew by %s during a 256 MiB upload, want < 32 MiB", fmt.Sprintf("%.1f MiB", float64(growth)/(1<<20)))
	}
	return key
}

// The media row and its encode job are committed in one transaction: when the enqueue fails,
// the upload is refused and leaves no media row and no stored file behind (an orphan row would
// stay PROCESSING for ever, with no job to finish it).
func TestUpload_FailedEnqueueLeavesNothing(t *testing.T) {
	t.Parallel()
	s := startUploadServer(t, 1<<20)
	// This test's own database refuses every new job.
	if _, err := s.pool.Exec(t.Context(), `
		CREATE FUNCTION refuse_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'enqueue refused by the test'; END $$;
		CREATE TRIGGER refuse_jobs BEFORE INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION refuse_jobs();`); err != nil {
		t.Fatal(err)
	}
	ct, body := multipartBody(t, map[string]string{"title": "Orphan"}, []byte("fake video bytes"))
	status, out := s.post(t, ct, body, int64(body.Len()))
	if status != http.StatusInternalServerError {
		t.Fatalf("upload whose job cannot be enqueued: %d %s, want 500", status, out)
	}
	if n := s.count(t, `SELECT count(*) FROM media`); n != 0 {
		t.Fatalf("%d media rows after an upload whose enqueue failed, want 0", n)
	}
	var files []string
	err := filepath.WalkDir(s.storage, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, path)
		}
		return err
	})
	if err != nil || len(files) != 0 {
		t.Fatalf("stored files after an upload whose enqueue failed: %v (%v), want none", files, err)
	}
}
