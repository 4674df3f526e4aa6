package ingest_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/xuri/excelize/v2"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/ingest"
)

func csvRows(header string, n int) []byte {
	var b strings.Builder
	b.WriteString(header + "\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "Level 1,%d,%d,https://drive.google.com/file/d/id%d/view\n", (i-1)/10+1, (i-1)%10+1, i)
	}
	return []byte(b.String())
}

func TestParse_CSVRowLimit(t *testing.T) {
	sheet, err := ingest.Parse("curriculum.csv", csvRows("collection,chapter,order,video_url", 500))
	rows := sheet.Rows
	if err != nil {
		t.Fatalf("500 rows: %v", err)
	}
	if len(rows) != 500 {
		t.Fatalf("parsed %d rows, want 500", len(rows))
	}
	for _, r := range rows {
		if r.Reject != "" {
			t.Fatalf("row %d rejected: %s", r.Number, r.Reject)
		}
	}
	if _, err := ingest.Parse("curriculum.csv", csvRows("collection,chapter,order,video_url", 501)); apperr.CodeOf(err) != apperr.Unprocessable {
		t.Fatalf("501 rows: %v, want the whole file rejected (422)", err)
	}
}

func TestParse_KoreanHeadersAndBOM(t *testing.T) {
	data := append([]byte("\xef\xbb\xbf"), csvRows("레벨,과번호,순서,영상 URL", 3)...)
	sheet, err := ingest.Parse("목록.CSV", data)
	rows := sheet.Rows
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || rows[0].Collection != "Level 1" || rows[2].Order != 3 || rows[0].Number != 2 {
		t.Fatalf("rows = %+v", rows)
	}
}

func TestParse_XLSXWithOneBadRow(t *testing.T) {
	f := excelize.NewFile()
	sheet := f.GetSheetName(0)
	cells := [][]any{
		{"레벨", "과번호", "순서", "영상 URL"},
		{"레벨1", 3, 1, "https://drive.google.com/file/d/aaa/view"},
		{"레벨1", "three", 2, "https://drive.google.com/file/d/bbb/view"}, // bad chapter
		{"레벨1", 3, 3, "https://drive.google.com/open?id=ccc"},
		{},                                   // blank: skipped
		{"레벨2", 1, 1, "javascript:alert(1)"}, // bad URL
		{"레벨2", 1, 2, "https://cdn.example.com/lesson.mp4"}, // a direct link is fine
	}
	for i, row := range cells {
		if err := f.SetSheetRow(sheet, fmt.Sprintf("A%d", i+1), &row); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := f.Write(&buf); err != nil {
		t.Fatal(err)
	}
	parsed, err := ingest.Parse("curriculum.xlsx", buf.Bytes())
	rows := parsed.Rows
	if err != nil {
		t.Fatal(err)
	}
	rejected := map[int]string{}
	for _, r := range rows {
		if r.Reject != "" {
			rejected[r.Number] = r.Reject
		}
	}
	if len(rows) != 5 || len(rejected) != 2 || !strings.Contains(rejected[3], "chapter") || !strings.Contains(rejected[6], "video_url") {
		t.Fatalf("rows %d, rejected %v; want 5 rows with rows 3 (chapter) and 6 (video_url) rejected", len(rows), rejected)
	}
	if rows[0].Chapter != 3 || rows[0].Collection != "레벨1" {
		t.Fatalf("first row = %+v: numbers must be read as the strings they show", rows[0])
	}
}

func TestParse_WholeFileErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		file string
		data []byte
	}{
		"MissingColumn": {"a.csv", []byte("collection,chapter,video_url\nx,1,https://a/b\n")},
		"NoDataRows":    {"a.csv", []byte("collection,chapter,order,video_url\n\n\n")},
		"Empty":         {"a.csv", nil},
		"NotXLSX":       {"a.xlsx", []byte("this is not a zip")},
		"WrongType":     {"a.pdf", []byte("%PDF")},
		"NotUTF8":       {"a.csv", []byte("collection,chapter,order,video_url\n\xff\xfe,1,1,https://a/b\n")},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ingest.Parse(tc.file, tc.data); apperr.CodeOf(err) != apperr.Unprocessable {
				t.Fatalf("Parse = %v, want 422", err)
			}
		})
	}
}
