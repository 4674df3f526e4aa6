package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/sheettest"
	"github.com/playhead/playhead/internal/testvideo"
)

// operatorsSheet is a schedule as operators keep it, written by openpyxl: an unrelated first
// sheet, a title row and a blank row above the header, the level merged over its three rows,
// chapter numbers as a number and as "1과", a hyperlink cell behind "강의 보기", a HYPERLINK formula
// without a cached value, a full-width order, an extra column, a blank row, and one row whose
// chapter is not a whole number.
func operatorsSheet(t *testing.T, host string) []byte {
	return sheettest.Openpyxl(t, `
host = "`+host+`"
wb = Workbook()
wb.active.title = "메모"
wb.active.append(["담당자", "김운영"])
ws = wb.create_sheet("편성표")
ws.append(["2026 봄학기 편성표"])
ws.append([])
ws.append(["레벨", "과번호", "순서", "영상 URL", "비고"])
ws.append(["레벨1", 1, 1, "강의 보기", "드라이브"])
ws["D4"].hyperlink = "https://drive.google.com/file/d/lesson-a/view?usp=sharing"
ws.append([None, "1과", "02", '=HYPERLINK("' + host + '/direct/lesson-b.mp4","2번 영상")'])
ws.append([None, 2, "３", host + "/direct/lesson-c.mp4"])
ws.merge_cells("A4:A6")
ws.append([])
ws.append(["레벨1", 1.5, 1, host + "/direct/lesson-d.mp4"])
`)
}

// TestImport_OperatorsSheet: a dry run of the operators' sheet reports every row and writes
// nothing; the real import then does what the dry run said, and every intended row becomes
// READY and placed through the real binary.
func TestImport_OperatorsSheet(t *testing.T) {
	mp4, err := os.ReadFile(testvideo.MP4(t, t.TempDir(), testvideo.Spec{Seconds: 2, Width: 320, Height: 240, Audio: true}))
	if err != nil {
		t.Fatal(err)
	}
	host := binarytest.VideoHost(t, mp4)
	env := pipelineEnv("all", "e2e-import-sheet", t.TempDir(), t.TempDir(), "ultrafast")
	env["PLAYHEAD_INGEST_ALLOW_PRIVATE"] = "true"
	env["PLAYHEAD_INGEST_DOWNLOAD_URL_TEMPLATE"] = host.URL + "/download?id={id}"
	env["PLAYHEAD_INGEST_FALLBACK_URL_TEMPLATE"] = host.URL + "/uc?id={id}"
	s := binarytest.Start(t, env)
	admin := binarytest.Token(t, 1, true)
	sheet := operatorsSheet(t, host.URL)
	pool := s.Pool(t)
	counts := func() [4]int {
		var n [4]int
		if err := pool.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM media), (SELECT count(*) FROM jobs),
			(SELECT count(*) FROM imports), (SELECT count(*) FROM import_rows)`).Scan(&n[0], &n[1], &n[2], &n[3]); err != nil {
			t.Fatal(err)
		}
		return n
	}

	before := counts()
	status, out, err := s.PostMultipart(s.URL("/v1/admin/imports?dry_run=true"), admin, nil, "편성표.xlsx", bytes.NewReader(sheet))
	if err != nil || status != http.StatusOK {
		t.Fatalf("dry run: %d %s %v, want 200", status, out, err)
	}
	var dry struct {
		DryRun   bool   `json:"dry_run"`
		Sheet    string `json:"sheet"`
		Accepted int    `json:"accepted"`
		Rejected int    `json:"rejected"`
		Rows     []struct {
			Row      int    `json:"row"`
			State    string `json:"state"`
			Reason   string `json:"reason"`
			VideoURL string `json:"video_url"`
			Label    string `json:"label"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(out, &dry); err != nil {
		t.Fatal(err)
	}
	if after := counts(); after != before {
		t.Fatalf("the dry run wrote rows: media, jobs, imports, import_rows went from %v to %v", before, after)
	}
	predicted := map[int]string{}
	for _, r := range dry.Rows {
		predicted[r.Row] = r.State
	}
	wantPredicted := map[int]string{4: "ACCEPTED", 5: "ACCEPTED", 6: "ACCEPTED", 8: "REJECTED"}
	if !dry.DryRun || dry.Sheet != "편성표" || dry.Accepted != 3 || dry.Rejected != 1 || len(predicted) != len(wantPredicted) {
		t.Fatalf("dry run = %s; want sheet 편성표, rows 4-6 accepted and row 8 rejected", out)
	}
	for row, want := range wantPredicted {
		if predicted[row] != want {
			t.Errorf("dry run row %d is %s, want %s (%s)", row, predicted[row], want, out)
		}
	}
	if dry.Rows[0].VideoURL != "https://drive.google.com/file/d/lesson-a/view?usp=sharing" || dry.Rows[0].Label != "강의 보기" ||
		dry.Rows[1].Label != "2번 영상" || dry.Rows[3].Reason != `chapter must be a whole number from 1 (as 3, 3.0, 03, ３, 3과 or 레벨3), got "1.5"` {
		t.Errorf("dry run rows = %s", out)
	}

	created := s.Import(t, admin, "편성표.xlsx", string(sheet))
	if created.Accepted != dry.Accepted || created.Rejected != dry.Rejected {
		t.Fatalf("import accepted %d, rejected %d; the dry run said %d and %d", created.Accepted, created.Rejected, dry.Accepted, dry.Rejected)
	}
	got := waitImport(t, s, admin, created.ID)
	for _, r := range got.Rows {
		want := map[string]string{"ACCEPTED": "READY", "REJECTED": "REJECTED"}[predicted[r.Row]]
		if r.State != want {
			t.Errorf("row %d is %s (%s), want %s", r.Row, r.State, r.Reason, want)
		}
	}
	var report struct {
		Sheet    string `json:"sheet"`
		Progress struct {
			Counts    map[string]int `json:"counts"`
			Remaining int            `json:"remaining"`
			Left      *int64         `json:"estimated_seconds_left"`
		} `json:"progress"`
	}
	out = s.MustDo(t, http.StatusOK, http.MethodGet, s.URL("/v1/admin/imports/%d", created.ID), admin, nil)
	if err := json.Unmarshal(out, &report); err != nil {
		t.Fatal(err)
	}
	if p := report.Progress; report.Sheet != "편성표" || p.Counts["READY"] != 3 || p.Counts["REJECTED"] != 1 || p.Remaining != 0 || p.Left == nil || *p.Left != 0 {
		t.Errorf("import report = %s, want sheet 편성표, 3 READY, 1 REJECTED, none remaining", out)
	}
	out = s.MustDo(t, http.StatusOK, http.MethodGet, s.HTTPURL+"/v1/collections/"+url.PathEscape("레벨1"), binarytest.Token(t, 50, false), nil)
	var c collectionView
	if err := json.Unmarshal(out, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Items) != 3 || c.Items[0].Chapter != 1 || c.Items[0].Order != 1 || c.Items[1].Chapter != 1 || c.Items[1].Order != 2 ||
		c.Items[2].Chapter != 2 || c.Items[2].Order != 3 {
		t.Fatalf("collection 레벨1 = %s, want (1,1), (1,2), (2,3)", out)
	}
}

// TestImport_GoogleSheetsLink imports a Google Sheets link through the binary, with a local
// server standing in for Google's export: the spreadsheet is fetched as .xlsx from the
// configured template, and its rows become READY. A sheet that is not shared (Google answers
// its sign-in page) is refused with a reason, and nothing is written.
func TestImport_GoogleSheetsLink(t *testing.T) {
	mp4, err := os.ReadFile(testvideo.MP4(t, t.TempDir(), testvideo.Spec{Seconds: 2, Width: 320, Height: 240, Audio: true}))
	if err != nil {
		t.Fatal(err)
	}
	host := binarytest.VideoHost(t, mp4)
	sheet := sheettest.Openpyxl(t, `
wb = Workbook()
ws = wb.active
ws.title = "Sheet1"
ws.append(["레벨", "과번호", "순서", "영상 URL"])
ws.append(["구글", 1, 1, "`+host.URL+`/direct/g1.mp4"])
ws.append(["구글", 1, 2, "`+host.URL+`/direct/g2.mp4"])
`)
	var exported []string
	var mu sync.Mutex
	google := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		exported = append(exported, r.URL.RequestURI())
		mu.Unlock()
		switch r.URL.Path {
		case "/spreadsheets/d/shared-sheet_1/export":
			w.Header().Set("Content-Type", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet")
			_, _ = w.Write(sheet)
		default: // a sheet not shared with "anyone with the link": the sign-in page
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = io.WriteString(w, "<html><body>Sign in</body></html>")
		}
	}))
	t.Cleanup(google.Close)
	env := pipelineEnv("all", "e2e-import-link", t.TempDir(), t.TempDir(), "ultrafast")
	env["PLAYHEAD_INGEST_ALLOW_PRIVATE"] = "true"
	env["PLAYHEAD_INGEST_SHEET_EXPORT_URL_TEMPLATE"] = google.URL + "/spreadsheets/d/{id}/export?format=xlsx"
	s := binarytest.Start(t, env)
	admin := binarytest.Token(t, 1, true)

	out := s.MustDo(t, http.StatusUnprocessableEntity, http.MethodPost, s.URL("/v1/admin/imports"), admin,
		map[string]string{"sheet_url": "https://docs.google.com/spreadsheets/d/private-sheet/edit"})
	if !strings.Contains(string(out), "anyone with the link") {
		t.Errorf("a private sheet: %s, want the reason to say how to share it", out)
	}
	out = s.MustDo(t, http.StatusAccepted, http.MethodPost, s.URL("/v1/admin/imports"), admin,
		map[string]string{"sheet_url": "https://docs.google.com/spreadsheets/d/shared-sheet_1/edit?usp=sharing#gid=0"})
	var created binarytest.Import
	if err := json.Unmarshal(out, &created); err != nil {
		t.Fatal(err)
	}
	if created.Accepted != 2 || created.Rejected != 0 {
		t.Fatalf("import = %s, want 2 rows accepted", out)
	}
	got := waitImport(t, s, admin, created.ID)
	for _, r := range got.Rows {
		if r.State != "READY" {
			t.Errorf("row %d is %s (%s), want READY", r.Row, r.State, r.Reason)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"/spreadsheets/d/private-sheet/export?format=xlsx", "/spreadsheets/d/shared-sheet_1/export?format=xlsx"}
	if !slices.Equal(exported, want) {
		t.Errorf("the export server saw %v, want %v", exported, want)
	}
	var imports int
	if err := s.Pool(t).QueryRow(t.Context(), `SELECT count(*) FROM imports`).Scan(&imports); err != nil || imports != 1 {
		t.Errorf("%d imports recorded (%v), want 1: the refused private sheet writes nothing", imports, err)
	}
}

// TestImport_GoogleSheetsLinkKeepsTheAddressGuard: the sheet's download goes through the
// same address guard as the videos'. With the guard on (the default) and the export template
// pointing at a loopback server, a Sheets link is refused with a reason, as a dry run and as
// an import, the server sees no request and nothing is written. (The sheet's fetcher was
// wired in public.go with its own FetchConfig; allowing private addresses there survived
// every test.)
func TestImport_GoogleSheetsLinkKeepsTheAddressGuard(t *testing.T) {
	var mu sync.Mutex
	seen := 0
	inside := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen++
		mu.Unlock()
		http.Error(w, "an internal service", http.StatusOK)
	}))
	t.Cleanup(inside.Close)
	env := pipelineEnv("api", "e2e-import-link-guard", t.TempDir(), t.TempDir(), "ultrafast")
	env["PLAYHEAD_INGEST_SHEET_EXPORT_URL_TEMPLATE"] = inside.URL + "/spreadsheets/d/{id}/export?format=xlsx"
	s := binarytest.Start(t, env)
	admin := binarytest.Token(t, 1, true)
	link := map[string]string{"sheet_url": "https://docs.google.com/spreadsheets/d/abc/edit"}
	for _, query := range []string{"?dry_run=true", ""} {
		out := s.MustDo(t, http.StatusUnprocessableEntity, http.MethodPost, s.URL("/v1/admin/imports%s", query), admin, link)
		if !strings.Contains(string(out), "not allowed") {
			t.Errorf("POST /v1/admin/imports%s: %s, want a reason saying the address is not allowed", query, out)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if seen != 0 {
		t.Errorf("the loopback server saw %d requests, want none", seen)
	}
	var imports int
	if err := s.Pool(t).QueryRow(t.Context(), `SELECT count(*) FROM imports`).Scan(&imports); err != nil || imports != 0 {
		t.Errorf("%d imports recorded (%v), want none", imports, err)
	}
}
