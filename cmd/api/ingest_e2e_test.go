package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/testvideo"
)

// videoHost stands in for a cloud drive on loopback: /download answers Google Drive's HTML
// confirm page, /uc answers the file, /direct/… is a plain link, and id "gone" is a 404.
func videoHost(t *testing.T, mp4 []byte) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Query().Get("id") == "gone":
			http.NotFound(w, r)
		case r.URL.Path == "/download":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = io.WriteString(w, "<html><body>Google Drive can't scan this file for viruses.</body></html>")
		case r.URL.Path == "/uc", strings.HasPrefix(r.URL.Path, "/direct/"):
			w.Header().Set("Content-Type", "video/mp4")
			_, _ = w.Write(mp4)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

type importRow struct {
	Row     int    `json:"row"`
	State   string `json:"state"`
	Reason  string `json:"reason"`
	MediaID *int64 `json:"media_id"`
}

type importView struct {
	ID       int64       `json:"id"`
	Accepted int         `json:"accepted"`
	Rejected int         `json:"rejected"`
	Rows     []importRow `json:"rows"`
}

func (s *server) importSheet(t *testing.T, token, filename, content string) importView {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, err := mw.CreateFormFile("file", filename)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(fw, content)
	_ = mw.Close()
	req, _ := http.NewRequest(http.MethodPost, s.httpURL+"/v1/admin/imports", &body)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /v1/admin/imports: %d %s", resp.StatusCode, out)
	}
	var v importView
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// waitImport polls the import until no row is PENDING, INGESTING or UPLOADED.
func (s *server) waitImport(t *testing.T, token string, id int64) importView {
	t.Helper()
	deadline := time.Now().Add(encodeTimeout)
	for {
		out := s.mustDo(t, http.StatusOK, http.MethodGet, fmt.Sprintf("%s/v1/admin/imports/%d", s.httpURL, id), token, nil)
		var v importView
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatal(err)
		}
		done := true
		for _, r := range v.Rows {
			if r.State == "PENDING" || r.State == "INGESTING" || r.State == "UPLOADED" {
				done = false
			}
		}
		if done {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("import %d not finished after %s: %s", id, encodeTimeout, out)
		}
		time.Sleep(pollEvery)
	}
}

type collectionView struct {
	Items []struct {
		Chapter int    `json:"chapter"`
		Order   int    `json:"order"`
		MediaID int64  `json:"media_id"`
		HLSURL  string `json:"hls_url"`
	} `json:"items"`
}

// TestImport_SheetBecomesPlayable imports a sheet whose rows point at a local video host: a
// share link behind an HTML confirm page (the fallback URL gets the file), a direct link, a
// link that 404s and a bad row. The good rows become READY, placed and playable; the 404 is
// FAILED without retries; the bad row is REJECTED; re-importing a place replaces it.
func TestImport_SheetBecomesPlayable(t *testing.T) {
	mp4, err := os.ReadFile(testvideo.MP4(t, t.TempDir(), testvideo.Spec{Seconds: 2, Width: 320, Height: 240, Audio: true}))
	if err != nil {
		t.Fatal(err)
	}
	host := videoHost(t, mp4)
	env := pipelineEnv("all", "e2e-import", t.TempDir(), t.TempDir(), "ultrafast")
	env["PLAYHEAD_INGEST_ALLOW_PRIVATE"] = "true"
	env["PLAYHEAD_INGEST_DOWNLOAD_URL_TEMPLATE"] = host.URL + "/download?id={id}"
	env["PLAYHEAD_INGEST_FALLBACK_URL_TEMPLATE"] = host.URL + "/uc?id={id}"
	s := startServer(t, env)
	admin := mint(t, 1, true)

	sheet := "레벨,과번호,순서,영상 URL\n" +
		"레벨1,1,1,https://drive.google.com/file/d/lesson-one/view?usp=sharing\n" +
		"레벨1,1,2," + host.URL + "/direct/lesson-two.mp4\n" +
		"레벨1,2,1,https://drive.google.com/open?id=gone\n" +
		"레벨1,x,2,https://drive.google.com/file/d/bad-chapter/view\n"
	created := s.importSheet(t, admin, "curriculum.csv", sheet)
	if created.Accepted != 3 || created.Rejected != 1 {
		t.Fatalf("accepted %d, rejected %d; want 3 and 1", created.Accepted, created.Rejected)
	}
	got := s.waitImport(t, admin, created.ID)
	states := map[int]importRow{}
	for _, r := range got.Rows {
		states[r.Row] = r
	}
	for row, want := range map[int]string{2: "READY", 3: "READY", 4: "FAILED", 5: "REJECTED"} {
		if states[row].State != want {
			t.Errorf("row %d is %s (%s), want %s", row, states[row].State, states[row].Reason, want)
		}
	}
	if !strings.Contains(states[4].Reason, "404") || !strings.Contains(states[5].Reason, "chapter") {
		t.Errorf("reasons: row 4 %q, row 5 %q", states[4].Reason, states[5].Reason)
	}
	pool := openPool(t, s.dbURL)
	var attempts int
	if err := pool.QueryRow(t.Context(), `SELECT attempt_count FROM jobs WHERE media_id = $1 AND kind = 'ingest'`, *states[4].MediaID).Scan(&attempts); err != nil || attempts != 1 {
		t.Errorf("the 404 row's ingest job took %d attempts (%v), want 1: a 404 is not retried", attempts, err)
	}

	collection := func() collectionView {
		out := s.mustDo(t, http.StatusOK, http.MethodGet, s.httpURL+"/v1/collections/"+url.PathEscape("레벨1"), mint(t, 50, false), nil)
		var c collectionView
		if err := json.Unmarshal(out, &c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := collection()
	if len(c.Items) != 2 || c.Items[0].Chapter != 1 || c.Items[0].Order != 1 || c.Items[1].Order != 2 ||
		c.Items[0].MediaID != *states[2].MediaID {
		t.Fatalf("collection = %+v, want rows 2 and 3 at (1,1) and (1,2)", c.Items)
	}
	if status, body := s.putPosition(t, mint(t, 50, false), c.Items[0].MediaID, 1000); status != http.StatusNoContent {
		t.Fatalf("PUT a position on imported media: %d %s", status, body)
	}
	if status, _ := s.fetch(t, mint(t, 50, false), s.httpURL+c.Items[0].HLSURL); status != http.StatusOK {
		t.Fatalf("GET %s: %d", c.Items[0].HLSURL, status)
	}

	// Re-importing (레벨1, 1, 1) replaces the place once the new media is READY.
	again := s.importSheet(t, admin, "fix.csv", "collection,chapter,order,video_url\n레벨1,1,1,"+host.URL+"/direct/lesson-one-v2.mp4\n")
	redone := s.waitImport(t, admin, again.ID)
	if len(redone.Rows) != 1 || redone.Rows[0].State != "READY" {
		t.Fatalf("re-import = %+v", redone.Rows)
	}
	c = collection()
	if len(c.Items) != 2 || c.Items[0].MediaID != *redone.Rows[0].MediaID {
		t.Fatalf("collection after re-import = %+v, want (1,1) to be media %d and still 2 items", c.Items, *redone.Rows[0].MediaID)
	}
}

// Non-admins cannot import; a file over 500 rows is refused whole.
func TestImport_Refusals(t *testing.T) {
	s := startServer(t, pipelineEnv("api", "e2e-import-api", t.TempDir(), t.TempDir(), "ultrafast"))
	var b strings.Builder
	b.WriteString("collection,chapter,order,video_url\n")
	for i := range 501 {
		fmt.Fprintf(&b, "c,1,%d,https://example.com/%d.mp4\n", i+1, i)
	}
	for _, tc := range []struct {
		name, token, content string
		want                 int
	}{
		{"NotAdmin", mint(t, 5, false), "collection,chapter,order,video_url\nc,1,1,https://example.com/a.mp4\n", http.StatusForbidden},
		{"Over500Rows", mint(t, 1, true), b.String(), http.StatusUnprocessableEntity},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body bytes.Buffer
			mw := multipart.NewWriter(&body)
			fw, _ := mw.CreateFormFile("file", "sheet.csv")
			_, _ = io.WriteString(fw, tc.content)
			_ = mw.Close()
			req, _ := http.NewRequest(http.MethodPost, s.httpURL+"/v1/admin/imports", &body)
			req.Header.Set("Authorization", "Bearer "+tc.token)
			req.Header.Set("Content-Type", mw.FormDataContentType())
			resp, err := s.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, out, tc.want)
			}
		})
	}
	pool := openPool(t, s.dbURL)
	var n int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM import_rows`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d import rows written by refused imports (%v)", n, err)
	}
}
