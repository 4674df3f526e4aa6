package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/testvideo"
)

// waitImport polls the import until no row is PENDING, INGESTING or UPLOADED.
func waitImport(t *testing.T, s *binarytest.Server, token string, id int64) binarytest.Import {
	t.Helper()
	deadline := time.Now().Add(encodeTimeout)
	for {
		out := s.MustDo(t, http.StatusOK, http.MethodGet, s.URL("/v1/admin/imports/%d", id), token, nil)
		var v binarytest.Import
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
	host := binarytest.VideoHost(t, mp4)
	env := pipelineEnv("all", "e2e-import", t.TempDir(), t.TempDir(), "ultrafast")
	env["PLAYHEAD_INGEST_ALLOW_PRIVATE"] = "true"
	env["PLAYHEAD_INGEST_DOWNLOAD_URL_TEMPLATE"] = host.URL + "/download?id={id}"
	env["PLAYHEAD_INGEST_FALLBACK_URL_TEMPLATE"] = host.URL + "/uc?id={id}"
	s := binarytest.Start(t, env)
	admin := binarytest.Token(t, 1, true)

	sheet := "레벨,과번호,순서,영상 URL\n" +
		"레벨1,1,1,https://drive.google.com/file/d/lesson-one/view?usp=sharing\n" +
		"레벨1,1,2," + host.URL + "/direct/lesson-two.mp4\n" +
		"레벨1,2,1,https://drive.google.com/open?id=gone\n" +
		"레벨1,x,2,https://drive.google.com/file/d/bad-chapter/view\n"
	created := s.Import(t, admin, "curriculum.csv", sheet)
	if created.Accepted != 3 || created.Rejected != 1 {
		t.Fatalf("accepted %d, rejected %d; want 3 and 1", created.Accepted, created.Rejected)
	}
	got := waitImport(t, s, admin, created.ID)
	states := map[int]binarytest.ImportRow{}
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
	pool := s.Pool(t)
	var attempts int
	if err := pool.QueryRow(t.Context(), `SELECT attempt_count FROM jobs WHERE subject_id = $1 AND kind = 'ingest'`, *states[4].MediaID).Scan(&attempts); err != nil || attempts != 1 {
		t.Errorf("the 404 row's ingest job took %d attempts (%v), want 1: a 404 is not retried", attempts, err)
	}

	collection := func() collectionView {
		out := s.MustDo(t, http.StatusOK, http.MethodGet, s.HTTPURL+"/v1/collections/"+url.PathEscape("레벨1"), binarytest.Token(t, 50, false), nil)
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
	if status, body := putPosition(t, s, binarytest.Token(t, 50, false), c.Items[0].MediaID, 1000); status != http.StatusNoContent {
		t.Fatalf("PUT a position on imported media: %d %s", status, body)
	}
	if status, _ := fetch(t, s, binarytest.Token(t, 50, false), s.HTTPURL+c.Items[0].HLSURL); status != http.StatusOK {
		t.Fatalf("GET %s: %d", c.Items[0].HLSURL, status)
	}

	// Re-importing (레벨1, 1, 1) replaces the place once the new media is READY.
	again := s.Import(t, admin, "fix.csv", "collection,chapter,order,video_url\n레벨1,1,1,"+host.URL+"/direct/lesson-one-v2.mp4\n")
	redone := waitImport(t, s, admin, again.ID)
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
	s := binarytest.Start(t, pipelineEnv("api", "e2e-import-api", t.TempDir(), t.TempDir(), "ultrafast"))
	var b strings.Builder
	b.WriteString("collection,chapter,order,video_url\n")
	for i := range 501 {
		fmt.Fprintf(&b, "c,1,%d,https://example.com/%d.mp4\n", i+1, i)
	}
	for _, tc := range []struct {
		name, token, content string
		want                 int
	}{
		{"NotAdmin", binarytest.Token(t, 5, false), "collection,chapter,order,video_url\nc,1,1,https://example.com/a.mp4\n", http.StatusForbidden},
		{"Over500Rows", binarytest.Token(t, 1, true), b.String(), http.StatusUnprocessableEntity},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, out, err := s.PostMultipart(s.URL("/v1/admin/imports"), tc.token, nil, "sheet.csv", strings.NewReader(tc.content))
			if err != nil {
				t.Fatal(err)
			}
			if status != tc.want {
				t.Fatalf("status %d (%s), want %d", status, out, tc.want)
			}
		})
	}
	pool := s.Pool(t)
	var n int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM import_rows`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d import rows written by refused imports (%v)", n, err)
	}
}
