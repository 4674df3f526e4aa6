package main

// The hostile-input cases of the resumable uploads (tus): wrong offsets, lengths over the
// limit, negative and huge, malformed metadata, another member's upload, expired uploads,
// termination of a finished one. Each is a clear 4xx, and once the cases are done nothing
// half-written is left after the expirer's pass.

import (
	"encoding/base64"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/binarytest"
)

// uploadTarget is the path of A's unfinished upload, or of the upload id param.
func uploadTarget(f *hostileFixture, param string) string {
	if param == "" {
		return f.upload
	}
	return "/v1/uploads/" + param
}

func tusHeader(token string, kv ...string) map[string]string {
	h := map[string]string{"Authorization": "Bearer " + token, "Tus-Resumable": "1.0.0"}
	for i := 0; i+1 < len(kv); i += 2 {
		h[kv[i]] = kv[i+1]
	}
	return h
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// tusCases are the requests of the resumable uploads' own attacks.
func (f *hostileFixture) tusCases(t *testing.T) []hostileCase {
	t.Helper()
	const octets = "application/offset+octet-stream"
	var out []hostileCase
	add := func(class, method, target string, header map[string]string, body []byte, want ...int) {
		out = append(out, hostileCase{class: class, method: method, target: target, header: header, body: body, want: want})
	}
	// Lengths: over PLAYHEAD_MAX_UPLOAD_BYTES (2 GiB), negative, huge, not a number, none,
	// empty, deferred.
	for _, length := range []string{strconv.Itoa(2<<30 + 1), "-1", "99999999999999999999", "1e3", "0x10", "", "+5", "5 5"} {
		want := []int{400}
		if length == strconv.Itoa(2<<30+1) {
			want = []int{413}
		}
		add(classBody, "POST", "/v1/uploads", tusHeader(f.a, "Upload-Length", length), nil, want...)
	}
	add(classBody, "POST", "/v1/uploads", tusHeader(f.a, "Upload-Length", "0"), nil, 422)
	add(classBody, "POST", "/v1/uploads", tusHeader(f.a, "Upload-Defer-Length", "1"), nil, 400)
	add(classBody, "POST", "/v1/uploads", tusHeader(f.a, "Upload-Length", "10", "Upload-Concat", "final;/v1/uploads/x"), nil, 400)
	// More bytes than the upload is long, in the creation: refused, nothing created.
	add(classBody, "POST", "/v1/uploads", tusHeader(f.a, "Upload-Length", "4", "Content-Type", octets), []byte("too long"), 413)
	// Malformed metadata: not base64, three words, a key twice, an empty key, a key with a
	// space, 1 MiB of it (fasthttp refuses headers over 4 KiB itself: 431).
	for _, meta := range []string{"title !!!", "title " + b64("a") + " extra", "title " + b64("a") + ",title " + b64("b"),
		" " + b64("x"), "ti%20tle " + b64("x"), "title " + b64("x") + ",,", "title " + strings.Repeat("A", 3000) + "="} {
		add(classBody, "POST", "/v1/uploads", tusHeader(f.a, "Upload-Length", "10", "Upload-Metadata", meta), nil, 400, 422)
	}
	add(classBody, "POST", "/v1/uploads", tusHeader(f.a, "Upload-Length", "10", "Upload-Metadata", "title "+strings.Repeat("QUFB", 1<<18)), nil, 431)
	// Text the database cannot store, or that has no place in a title, in every value.
	for _, v := range []string{"\x00", "a\x00b", "\xff\xfe", "\x1b[2J", "\xc0\x80", "a\r\nb"} {
		for _, key := range []string{"title", "filename", "visibility", "filetype"} {
			add(classText, "POST", "/v1/uploads", tusHeader(f.a, "Upload-Length", "10", "Upload-Metadata", key+" "+b64(v)), nil, 422)
		}
	}
	// A title over 500 characters (a file name is cut to that length instead), and values
	// over 2 KiB.
	add(classText, "POST", "/v1/uploads", tusHeader(f.a, "Upload-Length", "10", "Upload-Metadata", "title "+b64(strings.Repeat("t", 501))), nil, 422)
	add(classText, "POST", "/v1/uploads", tusHeader(f.a, "Upload-Length", "10", "Upload-Metadata", "filetype "+b64(strings.Repeat("t", 2049))), nil, 422)
	// No or another protocol version.
	add(classBody, "POST", "/v1/uploads", map[string]string{"Authorization": "Bearer " + f.a, "Upload-Length": "10"}, nil, 412)
	add(classBody, "PATCH", f.upload, map[string]string{"Authorization": "Bearer " + f.a, "Tus-Resumable": "0.2.2",
		"Upload-Offset": "29", "Content-Type": octets}, []byte("x"), 412)
	// Wrong offsets, a body of another type, longer than the upload, chunked past its end.
	stored := len("the first bytes of A's upload")
	for _, offset := range []string{"0", strconv.Itoa(stored - 1), strconv.Itoa(stored + 1), "999999"} {
		add(classBody, "PATCH", f.upload, tusHeader(f.a, "Upload-Offset", offset, "Content-Type", octets), []byte("x"), 409)
	}
	// "+29" is the stored offset with a sign, which tusd took before the digits check.
	for _, offset := range []string{"-1", "", "abc", "99999999999999999999", "+" + strconv.Itoa(stored), "1e1"} {
		add(classBody, "PATCH", f.upload, tusHeader(f.a, "Upload-Offset", offset, "Content-Type", octets), []byte("x"), 400)
	}
	for _, ct := range []string{"", "application/json", "text/plain", "multipart/form-data; boundary=x"} {
		h := tusHeader(f.a, "Upload-Offset", strconv.Itoa(stored))
		if ct != "" {
			h["Content-Type"] = ct
		}
		add(classBody, "PATCH", f.upload, h, []byte("x"), 415)
	}
	add(classBody, "PATCH", f.upload, tusHeader(f.a, "Upload-Offset", strconv.Itoa(stored), "Content-Type", octets), make([]byte, 1000), 413)
	out = append(out, hostileCase{class: classBody, method: "PATCH", target: f.upload, chunked: true,
		header: tusHeader(f.a, "Upload-Offset", strconv.Itoa(stored), "Content-Type", octets), body: make([]byte, 2000), want: []int{413}})
	// Another member's upload, on every method: as if it did not exist.
	add(classAuth, "HEAD", f.upload, tusHeader(f.b), nil, 404)
	add(classAuth, "PATCH", f.upload, tusHeader(f.b, "Upload-Offset", strconv.Itoa(stored), "Content-Type", octets), []byte("x"), 404)
	add(classAuth, "DELETE", f.upload, tusHeader(f.b), nil, 404)
	add(classAuth, "DELETE", f.finishedUpload, tusHeader(f.b), nil, 404)
	// A finished upload: no more bytes, no termination.
	add(classBody, "DELETE", f.finishedUpload, tusHeader(f.a), nil, 409)
	add(classBody, "PATCH", f.finishedUpload, tusHeader(f.a, "Upload-Offset", "0", "Content-Type", octets), []byte("x"), 409)
	// An expired upload: gone (410) until the expirer removes it, then missing (404).
	expired := f.s.TusUpload(t, f.a, 100, "", []byte("bytes of an upload abandoned"))
	if _, err := f.s.Pool(t).Exec(t.Context(), `UPDATE uploads SET expires_at = statement_timestamp() + interval '2 seconds' WHERE id = $1`,
		strings.TrimPrefix(expired, "/v1/uploads/")); err != nil {
		t.Fatal(err)
	}
	waitExpired(t, f, expired)
	add(classBody, "PATCH", expired, tusHeader(f.a, "Upload-Offset", "28", "Content-Type", octets), []byte("x"), 404, 410)
	add(classBody, "DELETE", expired, tusHeader(f.a), nil, 404, 410)
	add(classBody, "HEAD", expired, tusHeader(f.a), nil, 404, 410)
	return out
}

// waitExpired waits until the upload at path answers 410 (expired) or 404 (removed).
func waitExpired(t *testing.T, f *hostileFixture, path string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		status, _, _ := f.s.Tus(t, http.MethodHead, f.s.URL("%s", path), f.a, nil, nil)
		if status == http.StatusGone || status == http.StatusNotFound {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("[body] the upload %s did not expire: HEAD %d", path, status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// tusTrickle is a member sending an upload one byte a PATCH, as fast as it can: each PATCH
// costs what it carries (its byte, in the upload's tail pieces, never a rewrite of the tail),
// and past the member's request rate (setupHostile: PLAYHEAD_UPLOAD_RATE 0.5/s, burst 200) the
// rest are refused 429 with Retry-After and store nothing. It returns the number of cases.
func (f *hostileFixture) tusTrickle(t *testing.T) int {
	t.Helper()
	const patches = 260
	tok := binarytest.Token(t, 203, false)
	path := f.s.TusUpload(t, tok, 1000, "", nil)
	stored, refused := 0, 0
	for range patches {
		status, header, body := f.s.Tus(t, http.MethodPatch, f.s.URL("%s", path), tok,
			map[string]string{"Upload-Offset": strconv.Itoa(stored), "Content-Type": "application/offset+octet-stream"}, []byte("x"))
		switch {
		case status == http.StatusNoContent:
			stored++
		case status == http.StatusTooManyRequests && header.Get("Retry-After") != "":
			refused++
		default:
			t.Errorf("[slow] a 1-byte PATCH at offset %d: %d (Retry-After %q) %s, want 204 or 429 with Retry-After",
				stored, status, header.Get("Retry-After"), body)
		}
	}
	t.Logf("hostile input: %d 1-byte PATCHes of one member in a row: %d stored, %d refused (429)", patches, stored, refused)
	if refused == 0 {
		t.Errorf("[slow] %d 1-byte PATCHes of one member in a row: none refused by the request rate", patches)
	}
	status, header, _ := f.s.Tus(t, http.MethodHead, f.s.URL("%s", path), tok, nil, nil)
	if status != http.StatusOK || header.Get("Upload-Offset") != strconv.Itoa(stored) {
		t.Errorf("[slow] HEAD after the PATCHes: %d at offset %q, want 200 at %d", status, header.Get("Upload-Offset"), stored)
	}
	var pieces int
	if err := f.s.Pool(t).QueryRow(t.Context(), `SELECT count(*) FROM upload_tail_pieces p JOIN uploads u ON u.id = p.upload_id
		WHERE u.owner_id = 203`).Scan(&pieces); err != nil {
		t.Fatal(err)
	}
	if pieces > 1024 {
		t.Errorf("[slow] the upload holds %d tail pieces, more than 1 024", pieces)
	}
	return patches
}

// tusNothingLeftBehind expires every unfinished upload the suite left (its cases created
// some) and checks that the expirer leaves nothing half-written: no upload row, and under
// tus/ only the sources of finished uploads.
func (f *hostileFixture) tusNothingLeftBehind(t *testing.T) int {
	t.Helper()
	pool := f.s.Pool(t)
	if _, err := pool.Exec(t.Context(), `UPDATE uploads SET expires_at = statement_timestamp() WHERE media_id IS NULL`); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		var unfinished int
		if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM uploads WHERE media_id IS NULL`).Scan(&unfinished); err != nil {
			t.Fatal(err)
		}
		if unfinished == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("[body] %d expired uploads still there after a minute", unfinished)
		}
		time.Sleep(100 * time.Millisecond)
	}
	sources := map[string]bool{}
	rows, err := pool.Query(t.Context(), `SELECT source_key FROM media WHERE source_key LIKE 'tus/%'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var key string
		if err := rows.Scan(&key); err != nil {
			t.Fatal(err)
		}
		sources[key] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(f.storageDir, "tus")
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(f.storageDir, p)
		if !sources[filepath.ToSlash(rel)] {
			t.Errorf("[body] after the expiry %s is left: no finished upload's source", rel)
		}
		return nil
	})
	if len(sources) == 0 {
		t.Error("[body] no finished upload's source under tus/: the suite's finished upload is missing")
	}
	var pieces int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM upload_tail_pieces`).Scan(&pieces); err != nil {
		t.Fatal(err)
	}
	if pieces > 0 {
		t.Errorf("[body] after the expiry %d tail pieces are left", pieces)
	}
	return 1
}
