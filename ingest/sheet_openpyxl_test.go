package ingest_test

import (
	"strings"
	"testing"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/ingest"
	"github.com/playhead/playhead/internal/sheettest"
)

// TestParse_IssueSheet is a sheet as operators reported it: Korean headers, numbers stored as
// numbers, the level merged over the three rows of its group, a hyperlink cell behind "강의
// 보기" and a HYPERLINK formula labelled "3번 영상". Every row is accepted, not only the first.
func TestParse_IssueSheet(t *testing.T) {
	data := sheettest.Openpyxl(t, `
wb = Workbook()
ws = wb.active
ws.append(["레벨", "과번호", "순서", "영상 URL"])
ws.append(["레벨1", 3, 1, "https://drive.google.com/file/d/aaa/view"])
ws.append([None, 3, 2, "강의 보기"])
ws["D3"].hyperlink = "https://drive.google.com/file/d/bbb/view"
ws.append([None, 3, 3, '=HYPERLINK("https://drive.google.com/file/d/ccc/view","3번 영상")'])
ws.merge_cells("A2:A4")
`)
	parsed, err := ingest.Parse("schedule.xlsx", data)
	if err != nil {
		t.Fatal(err)
	}
	want := []ingest.Row{
		{Number: 2, Collection: "레벨1", Chapter: 3, Order: 1, VideoURL: "https://drive.google.com/file/d/aaa/view"},
		{Number: 3, Collection: "레벨1", Chapter: 3, Order: 2, VideoURL: "https://drive.google.com/file/d/bbb/view", Label: "강의 보기"},
		{Number: 4, Collection: "레벨1", Chapter: 3, Order: 3, VideoURL: "https://drive.google.com/file/d/ccc/view", Label: "3번 영상"},
	}
	if len(parsed.Rows) != len(want) {
		t.Fatalf("rows = %+v, want %+v", parsed.Rows, want)
	}
	for i, w := range want {
		if parsed.Rows[i] != w {
			t.Errorf("row %d = %+v, want %+v", i, parsed.Rows[i], w)
		}
	}
}

// TestParse_SheetAsOperatorsWriteIt: a workbook with an unrelated first sheet, title rows above
// the header, an extra column, blank rows, merged groups and every accepted number form; the
// rows that are wrong are rejected naming the column and the value.
func TestParse_SheetAsOperatorsWriteIt(t *testing.T) {
	data := sheettest.Openpyxl(t, `
wb = Workbook()
notes = wb.active
notes.title = "메모"
notes.append(["담당자", "연락처"])
notes.append(["김운영", "010-0000-0000"])
ws = wb.create_sheet("편성표")
ws.append(["2026 봄학기 편성표"])
ws.merge_cells("A1:E1")
ws.append([])
ws.append(["레벨", "과번호", "순서", "영상 URL", "비고"])
ws.append(["레벨1", "3과", 1.0, "https://drive.google.com/file/d/a1/view", "first"])
ws.append([None, None, "02", "https://drive.google.com/file/d/a2/view"])
ws.append([None, None, "３", "https://drive.google.com/file/d/a3/view"])
ws.merge_cells("A4:A6")
ws.merge_cells("B4:B6")
ws.append([])
ws.append(["레벨2", "레벨 1", "제1과", '=HYPERLINK("https://drive.google.com/open?id=b1")'])
ws.append(["레벨2", 1.5, 2, "https://drive.google.com/file/d/b2/view"])
ws.append(["레벨2", "1-2", "three", "https://drive.google.com/file/d/b3/view"])
`)
	parsed, err := ingest.Parse("schedule.xlsx", data)
	if err != nil {
		t.Fatal(err)
	}
	if parsed.Name != "편성표" || parsed.HeaderRow != 3 {
		t.Fatalf("sheet %q, header row %d; want 편성표 and 3", parsed.Name, parsed.HeaderRow)
	}
	type place struct {
		number, chapter, order int
		collection, url        string
	}
	var accepted []place
	rejected := map[int]string{}
	for _, r := range parsed.Rows {
		if r.Reject != "" {
			rejected[r.Number] = r.Reject
			continue
		}
		accepted = append(accepted, place{r.Number, r.Chapter, r.Order, r.Collection, r.VideoURL})
	}
	want := []place{
		{4, 3, 1, "레벨1", "https://drive.google.com/file/d/a1/view"},
		{5, 3, 2, "레벨1", "https://drive.google.com/file/d/a2/view"},
		{6, 3, 3, "레벨1", "https://drive.google.com/file/d/a3/view"},
		{8, 1, 1, "레벨2", "https://drive.google.com/open?id=b1"},
	}
	if len(accepted) != len(want) {
		t.Fatalf("accepted %+v, want %+v (rejected %v)", accepted, want, rejected)
	}
	for i := range want {
		if accepted[i] != want[i] {
			t.Errorf("accepted row %+v, want %+v", accepted[i], want[i])
		}
	}
	if r := rejected[9]; !strings.Contains(r, "chapter") || !strings.Contains(r, `"1.5"`) {
		t.Errorf("row 9 rejected for %q, want the chapter and its value 1.5 named", r)
	}
	if r := rejected[10]; !strings.Contains(r, `chapter must be a whole number from 1 (as 3, 3.0, 03, ３, 3과 or 레벨3), got "1-2"`) ||
		!strings.Contains(r, `order must be a whole number from 1 (as 3, 3.0, 03, ３, 3과 or 레벨3), got "three"`) {
		t.Errorf("row 10 rejected for %q, want chapter \"1-2\" and order \"three\" named", r)
	}
	if len(rejected) != 2 {
		t.Errorf("rejected %v, want rows 9 and 10 only", rejected)
	}
}

// TestParse_SheetChoice: the import refuses a workbook where no sheet, or more than one, has
// the header, naming the sheets, rather than guess.
func TestParse_SheetChoice(t *testing.T) {
	for name, tc := range map[string]struct{ script, want string }{
		"None": {`
wb = Workbook()
wb.active.title = "A"
wb.active.append(["x", "y"])
wb.create_sheet("B").append(["레벨", "순서"])
`, `no sheet of "A", "B" has the import's header`},
		"Several": {`
wb = Workbook()
wb.active.title = "봄"
wb.active.append(["레벨", "과번호", "순서", "영상 URL"])
wb.create_sheet("가을").append(["collection", "chapter", "order", "video_url"])
`, `sheets "봄", "가을" all have the import's header`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ingest.Parse("two.xlsx", sheettest.Openpyxl(t, tc.script))
			if apperr.CodeOf(err) != apperr.Unprocessable || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse = %v, want 422 saying %q", err, tc.want)
			}
		})
	}
}

// TestParse_HyperlinkFormulaWithCachedValue: Excel and Google Sheets save a HYPERLINK formula
// with the value it showed; the URL comes from the formula and the saved value is the label.
// The sheet is written by openpyxl and its worksheet part edited by hand to add the values
// (openpyxl never computes one). Arguments may be separated by ";" (Google Sheets, localised
// Excel) and quotes inside a string are doubled.
func TestParse_HyperlinkFormulaWithCachedValue(t *testing.T) {
	data := sheettest.Python(t, `
import io, zipfile
wb = Workbook()
ws = wb.active
ws.append(["collection", "chapter", "order", "video_url"])
ws.append(["L", 1, 1, '=HYPERLINK("https://drive.google.com/file/d/a/view","formula label")'])
ws.append(["L", 1, 2, '=HYPERLINK("https://example.com/b.mp4?q=""x""";"B")'])
buf = io.BytesIO()
wb.save(buf)
src = zipfile.ZipFile(buf)
with zipfile.ZipFile(OUT, "w", zipfile.ZIP_DEFLATED) as dst:
    for item in src.infolist():
        part = src.read(item.filename)
        if item.filename == "xl/worksheets/sheet1.xml":
            xml = part.decode()
            assert xml.count("<v></v>") == 2, xml
            xml = xml.replace('<c r="D2">', '<c r="D2" t="str">').replace('<c r="D3">', '<c r="D3" t="str">')
            xml = xml.replace("<v></v>", "<v>1강 보기</v>", 1).replace("<v></v>", "<v>2강</v>", 1)
            part = xml.encode()
        dst.writestr(item, part)
`)
	parsed, err := ingest.Parse("cached.xlsx", data)
	if err != nil {
		t.Fatal(err)
	}
	want := []ingest.Row{
		{Number: 2, Collection: "L", Chapter: 1, Order: 1, VideoURL: "https://drive.google.com/file/d/a/view", Label: "1강 보기"},
		{Number: 3, Collection: "L", Chapter: 1, Order: 2, VideoURL: `https://example.com/b.mp4?q="x"`, Label: "2강"},
	}
	if len(parsed.Rows) != len(want) || parsed.Rows[0] != want[0] || parsed.Rows[1] != want[1] {
		t.Fatalf("rows = %+v, want %+v", parsed.Rows, want)
	}
}

// TestParse_CSVHyperlinkFormula: a .csv exported without evaluating formulas keeps
// =HYPERLINK(…) as text; it is read as the link it is.
func TestParse_CSVHyperlinkFormula(t *testing.T) {
	parsed, err := ingest.Parse("s.csv", []byte("collection,chapter,order,video_url\nL,1,1,\"=HYPERLINK(\"\"https://example.com/a.mp4\"\",\"\"A\"\")\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if r := parsed.Rows[0]; r.Reject != "" || r.VideoURL != "https://example.com/a.mp4" || r.Label != "A" {
		t.Fatalf("row = %+v, want the formula's URL and label", r)
	}
}

// TestParse_WideSheetOverTheCellAttributeLimit: merges, hyperlinks and formulas are read by
// decoding the whole worksheet, so a sheet within the row limit but over 1 MiB unzipped (here
// 100 rows of 600 cells) is refused rather than decoded.
func TestParse_WideSheetOverTheCellAttributeLimit(t *testing.T) {
	data := sheettest.Openpyxl(t, `
wb = Workbook()
ws = wb.active
ws.append(["collection", "chapter", "order", "video_url"] + [1] * 600)
for i in range(100):
    ws.append(["L", 1, i + 1, "https://example.com/v.mp4"] + [123456] * 600)
`)
	_, err := ingest.Parse("wide.xlsx", data)
	if apperr.CodeOf(err) != apperr.Unprocessable || !strings.Contains(err.Error(), "is more than 1 MiB unzipped") {
		t.Fatalf("Parse = %v, want 422 for the sheet's size", err)
	}
}
