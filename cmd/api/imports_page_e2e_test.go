package main

// The import page end to end: the real binary, real PostgreSQL and ffmpeg, a local host for the
// sheet's videos, and Debian's Chromium driven by playwright-core from web/e2e/imports.mjs,
// which checks a sheet, confirms it and watches its rows reach READY through the page while
// this test reads the database.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/testvideo"
)

// importPageRow is one row of the page's report table.
type importPageRow struct {
	Row       int    `json:"row"`
	State     string `json:"state"`
	Video     string `json:"video"`
	Reason    string `json:"reason"`
	MediaLink string `json:"mediaLink"`
}

type importPageEvent struct {
	Event    string          `json:"event"`
	Message  string          `json:"message"`
	Rows     []importPageRow `json:"rows"`
	Summary  string          `json:"summary"`
	Confirm  string          `json:"confirm"`
	Progress string          `json:"progress"`
	Browser  string          `json:"browser"`
	Problems []string        `json:"problems"`
	// Accessibility are the axe-core violations (WCAG 2.1 A and AA) the page had.
	Accessibility []string `json:"accessibility"`
	Notice        string   `json:"notice"`
}

// TestImportPage_CheckConfirmWatchInChromium: the operators' sheet chosen on the import page;
// the check shows every row with the rejected one's reason and writes nothing; confirmed, the
// accepted rows reach READY on the page with a link to watch them.
func TestImportPage_CheckConfirmWatchInChromium(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	node := requireBrowser(t, root)
	mp4, err := os.ReadFile(testvideo.MP4(t, t.TempDir(), testvideo.Spec{Seconds: 2, Width: 320, Height: 240, Audio: true}))
	if err != nil {
		t.Fatal(err)
	}
	host := binarytest.VideoHost(t, mp4)
	env := pipelineEnv("all", "e2e-import-page", t.TempDir(), t.TempDir(), "ultrafast")
	env["PLAYHEAD_INGEST_ALLOW_PRIVATE"] = "true"
	env["PLAYHEAD_INGEST_DOWNLOAD_URL_TEMPLATE"] = host.URL + "/download?id={id}"
	env["PLAYHEAD_INGEST_FALLBACK_URL_TEMPLATE"] = host.URL + "/uc?id={id}"
	s := binarytest.Start(t, env)
	pool := s.Pool(t)
	sheet := filepath.Join(t.TempDir(), "편성표.xlsx")
	if err := os.WriteFile(sheet, operatorsSheet(t, host.URL), 0o644); err != nil {
		t.Fatal(err)
	}
	shots := screenshotsDir(t)
	script := startBrowserScript(t, root, node, "imports.mjs", "PLAYHEAD_URL="+s.HTTPURL,
		"PLAYHEAD_TOKEN="+binarytest.Token(t, 1, true), "PLAYHEAD_SHEET="+sheet, "PLAYHEAD_SHOTS="+shots)
	events := map[string]importPageEvent{}
	for {
		var ev importPageEvent
		if !script.next(t, &ev) {
			break
		}
		events[ev.Event] = ev
		if ev.Event == "checked" {
			var media, imports, rows int
			if err := pool.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM media), (SELECT count(*) FROM imports),
				(SELECT count(*) FROM import_rows)`).Scan(&media, &imports, &rows); err != nil {
				t.Fatal(err)
			}
			if media+imports+rows != 0 {
				t.Errorf("after the check on the page: %d media, %d imports, %d import rows; want nothing written", media, imports, rows)
			}
			if _, err := fmt.Fprintln(script.Stdin, "confirm"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := script.wait(); err != nil || events["error"].Message != "" {
		t.Fatalf("imports.mjs failed (%v): %s", err, events["error"].Message)
	}

	checked := events["checked"]
	wantChecked := map[int]string{4: "ACCEPTED", 5: "ACCEPTED", 6: "ACCEPTED", 8: "REJECTED"}
	if len(checked.Rows) != len(wantChecked) || checked.Confirm != "Import 3 rows" || !strings.Contains(checked.Summary, "편성표") {
		t.Fatalf("the check showed %+v, summary %q, button %q; want rows 4-6 accepted and 8 rejected, sheet 편성표, \"Import 3 rows\"",
			checked.Rows, checked.Summary, checked.Confirm)
	}
	for _, r := range checked.Rows {
		if r.State != wantChecked[r.Row] {
			t.Errorf("the check shows row %d as %s, want %s", r.Row, r.State, wantChecked[r.Row])
		}
		if r.Row == 8 && !strings.Contains(r.Reason, `chapter must be a whole number from 1`) {
			t.Errorf("the check shows row 8's reason as %q, want the chapter's", r.Reason)
		}
		if r.Row == 4 && r.Video != "강의 보기" {
			t.Errorf("the check shows row 4's video as %q, want its label 강의 보기", r.Video)
		}
	}
	imported := events["imported"]
	for _, r := range imported.Rows {
		want := map[string]string{"ACCEPTED": "READY", "REJECTED": "REJECTED"}[wantChecked[r.Row]]
		if r.State != want {
			t.Errorf("the page shows row %d as %s (%s), want %s", r.Row, r.State, r.Reason, want)
		}
		if want == "READY" && !strings.HasPrefix(r.MediaLink, "/watch/") {
			t.Errorf("the page's READY row %d links to %q, want /watch/{id}", r.Row, r.MediaLink)
		}
	}
	if len(imported.Rows) != 4 || !strings.HasPrefix(imported.Progress, "Done") {
		t.Errorf("after the import the page shows %d rows and %q, want 4 rows and Done", len(imported.Rows), imported.Progress)
	}
	done := events["done"]
	if len(done.Problems) > 0 || done.Notice != "" {
		t.Errorf("the page reported problems %q, notice %q", done.Problems, done.Notice)
	}
	for _, v := range done.Accessibility {
		t.Errorf("accessibility violation: %s", v)
	}
	for _, name := range []string{"import-check.png", "import-ready.png"} {
		b, err := os.ReadFile(filepath.Join(shots, name))
		if err != nil || len(b) < 1000 || string(b[1:4]) != "PNG" {
			t.Errorf("screenshot %s: %d bytes, %v; want a PNG", filepath.Join(shots, name), len(b), err)
		}
	}
}
