package ingest_test

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/xuri/excelize/v2"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/ingest"
	"github.com/playhead/playhead/internal/pgtest"
)

// handWrittenXLSX returns a workbook whose one worksheet part is sheetXML, written by hand
// (the other parts come from excelize), so a test can put in it what no writer would; extra
// parts (a worksheet's relationships) are added by name.
func handWrittenXLSX(t *testing.T, sheetXML string, extra ...[2]string) []byte {
	t.Helper()
	return xlsxWithSheetPart(t, func(w io.Writer) { _, _ = io.WriteString(w, sheetXML) }, extra...)
}

// xlsxWithSheetPart returns excelize's empty workbook with its one worksheet part written by
// writeSheet, straight into the zip (so a sheet of hundreds of megabytes never sits in the
// test's memory), and extra parts added by name.
func xlsxWithSheetPart(t *testing.T, writeSheet func(io.Writer), extra ...[2]string) []byte {
	t.Helper()
	f := excelize.NewFile()
	var plain bytes.Buffer
	if err := f.Write(&plain); err != nil {
		t.Fatal(err)
	}
	src, err := zip.NewReader(bytes.NewReader(plain.Bytes()), int64(plain.Len()))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	zw := zip.NewWriter(&out)
	for _, part := range src.File {
		w, err := zw.Create(part.Name)
		if err != nil {
			t.Fatal(err)
		}
		if part.Name == "xl/worksheets/sheet1.xml" {
			writeSheet(w)
			continue
		}
		r, err := part.Open()
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(w, r)
		r.Close()
	}
	for _, part := range extra {
		w, err := zw.Create(part[0])
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(w, part[1])
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

const worksheetStart = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>` +
	`<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheetData>` +
	`<row r="1"><c r="A1" t="inlineStr"><is><t>collection</t></is></c><c r="B1" t="inlineStr"><is><t>chapter</t></is></c>` +
	`<c r="C1" t="inlineStr"><is><t>order</t></is></c><c r="D1" t="inlineStr"><is><t>video_url</t></is></c></row>`

// dataRowXML is sheet row r: collection L, chapter 1, order r, a video URL.
func dataRowXML(r int) string {
	return fmt.Sprintf(`<row r="%[1]d"><c r="A%[1]d" t="inlineStr"><is><t>L</t></is></c><c r="B%[1]d"><v>1</v></c>`+
		`<c r="C%[1]d"><v>%[1]d</v></c><c r="D%[1]d" t="inlineStr"><is><t>https://example.com/%[1]d.mp4</t></is></c></row>`, r)
}

// TestParse_ValuesPastTheRowLimitAreNotDropped: a reader keeps a sheet's first rows (title
// rows, header, 500 data rows and room for blank ones). A row with a value further down was
// dropped without a word, so the operator saw "1 accepted" for a sheet of two videos; now it
// is a 422. Blank rows at the end of a sheet (formatted rows, the last row of a sheet) are
// still fine.
func TestParse_ValuesPastTheRowLimitAreNotDropped(t *testing.T) {
	var csv strings.Builder
	csv.WriteString("collection,chapter,order,video_url\nL,1,1,https://example.com/1.mp4\n")
	csv.WriteString(strings.Repeat(",,,\n", 1600))
	csv.WriteString("L,1,2,https://example.com/2.mp4\n")
	for _, tc := range []struct {
		name, file string
		data       []byte
	}{
		{"CSV", "a.csv", []byte(csv.String())},
		{"XLSX", "a.xlsx", handWrittenXLSX(t, worksheetStart+dataRowXML(2)+dataRowXML(3000)+`</sheetData></worksheet>`)},
		{"XLSXLastRow", "a.xlsx", handWrittenXLSX(t, worksheetStart+dataRowXML(2)+dataRowXML(1048576)+`</sheetData></worksheet>`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sheet, err := ingest.Parse(tc.file, tc.data)
			if apperr.CodeOf(err) != apperr.Unprocessable || !strings.Contains(err.Error(), "split it") {
				t.Fatalf("Parse = %d rows, %v; want a 422 (a row past the limit)", len(sheet.Rows), err)
			}
		})
	}
	blankTail := worksheetStart + dataRowXML(2) + dataRowXML(3) +
		`<row r="1048576"><c r="A1048576" s="0"/><c r="D1048576" t="inlineStr"><is><t> </t></is></c></row></sheetData></worksheet>`
	sheet, err := ingest.Parse("a.xlsx", handWrittenXLSX(t, blankTail))
	if err != nil || len(sheet.Rows) != 2 {
		t.Fatalf("a sheet whose last row is blank: %d rows, %v; want 2 rows", len(sheet.Rows), err)
	}
	csvTail := "collection,chapter,order,video_url\nL,1,1,https://example.com/1.mp4\n" + strings.Repeat(",,,\n", 5000)
	if sheet, err := ingest.Parse("a.csv", []byte(csvTail)); err != nil || len(sheet.Rows) != 1 {
		t.Fatalf("a .csv ending in 5000 blank rows: %d rows, %v; want 1 row", len(sheet.Rows), err)
	}
}

// TestStoreCreate_AllOrNothing: an import whose writes fail half-way (here a trigger that
// refuses the third video's media row, standing in for a database that goes away) leaves no
// trace: no import, no rows, no media, no job. Keeping the import, its rejected rows and the
// first two videos would let their jobs run, and the admin, told 500, would import again.
func TestStoreCreate_AllOrNothing(t *testing.T) {
	ctx := context.Background()
	pool, _ := pgtest.Pool(t)
	var csv strings.Builder
	csv.WriteString("collection,chapter,order,video_url\n")
	for i := 1; i <= 5; i++ {
		fmt.Fprintf(&csv, "L,1,%d,https://example.com/%d.mp4\n", i, i)
	}
	csv.WriteString("L,x,1,https://example.com/bad.mp4\n")
	sheet, err := ingest.Parse("a.csv", []byte(csv.String()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
		CREATE FUNCTION refuse_third_video() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.title = 'L 1-3' THEN RAISE EXCEPTION 'the disk went away' USING ERRCODE = '58030'; END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER refuse_third_video BEFORE INSERT ON media FOR EACH ROW EXECUTE FUNCTION refuse_third_video();`); err != nil {
		t.Fatal(err)
	}
	counts := func() string {
		var imports, rows, mediaRows, jobs int
		if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM imports), (SELECT count(*) FROM import_rows),
			(SELECT count(*) FROM media), (SELECT count(*) FROM jobs)`).Scan(&imports, &rows, &mediaRows, &jobs); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%d imports, %d import rows, %d media, %d jobs", imports, rows, mediaRows, jobs)
	}
	before := counts()
	if _, err := ingest.NewStore(pool, 3).Create(ctx, 1, "a.csv", sheet); err == nil {
		t.Fatal("Create succeeded although the third video's media row was refused")
	}
	if after := counts(); after != before {
		t.Fatalf("after a failed import: %s; before it: %s (want nothing written)", after, before)
	}
}

// TestParse_HyperlinksAndMergesInOnePass: excelize answers "is this cell a hyperlink" by
// scanning every hyperlink of the sheet, and reads merges with a pairwise overlap check; a
// 117 KiB workbook of 20 000 hyperlinks took 13 s and allocated 3.8 GB, one of 38 000 merges
// 3.7 s. The worksheet is now read once. This sheet has both, around rows that use each thing
// the import reads: a merge over a group, a shared HYPERLINK formula (its second cell has no
// text of its own) in a row whose cells give no positions, a hyperlink behind display text, and
// a merge from the header down, which gives no row a value.
func TestParse_HyperlinksAndMergesInOnePass(t *testing.T) {
	var sheet strings.Builder
	sheet.WriteString(worksheetStart)
	sheet.WriteString(`<row r="2"><c r="A2" t="inlineStr"><is><t>레벨1</t></is></c><c r="B2"><v>1</v></c><c r="C2"><v>1</v></c>` +
		`<c r="D2" t="str"><f t="shared" si="0" ref="D2:D3">HYPERLINK("https://example.com/a.mp4","강의 a")</f></c></row>`)
	sheet.WriteString(`<row><c/><c><v>1</v></c><c><v>2</v></c><c t="str"><f t="shared" si="0"/></c></row>`)
	sheet.WriteString(`<row r="4"><c r="B4"><v>1</v></c><c r="C4"><v>3</v></c><c r="D4" t="inlineStr"><is><t>보기</t></is></c></row>`)
	for r := 5; r <= 501; r++ { // 500 data rows: excelize's cost grew with them
		sheet.WriteString(dataRowXML(r))
	}
	// C1:C2 starts at the header: a header written over two rows, not a value for row 2.
	sheet.WriteString(`</sheetData><mergeCells><mergeCell ref="A2:A4"/><mergeCell ref="C1:C2"/>`)
	for i := 0; i < 10_000; i++ {
		col, _ := excelize.ColumnNumberToName(5 + i/1000)
		fmt.Fprintf(&sheet, `<mergeCell ref="%[1]s%[2]d:%[1]s%[2]d"/>`, col, 2*(i%1000)+2)
	}
	sheet.WriteString(`</mergeCells><hyperlinks><hyperlink ref="D4" r:id="rId1"/>`)
	for i := 0; i < 12_000; i++ {
		fmt.Fprintf(&sheet, `<hyperlink ref="Z%[1]d:ZZ%[1]d" location="x"/>`, i+2)
	}
	sheet.WriteString(`</hyperlinks></worksheet>`)
	data := handWrittenXLSX(t, sheet.String(), [2]string{"xl/worksheets/_rels/sheet1.xml.rels",
		`<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">` +
			`<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/hyperlink" Target="https://example.com/b.mp4" TargetMode="External"/></Relationships>`})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got, err := ingest.Parse("a.xlsx", data)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	want := []ingest.Row{
		{Number: 2, Collection: "레벨1", Chapter: 1, Order: 1, VideoURL: "https://example.com/a.mp4", Label: "강의 a"},
		{Number: 3, Collection: "레벨1", Chapter: 1, Order: 2, VideoURL: "https://example.com/a.mp4", Label: "강의 a"},
		{Number: 4, Collection: "레벨1", Chapter: 1, Order: 3, VideoURL: "https://example.com/b.mp4", Label: "보기"},
	}
	if len(got.Rows) != 500 || fmt.Sprint(got.Rows[:3]) != fmt.Sprint(want) {
		t.Errorf("%d rows, the first %+v\nwant 500, the first %+v", len(got.Rows), got.Rows[:min(3, len(got.Rows))], want)
	}
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("a %d KiB workbook of 500 rows, 12 000 hyperlinks and 10 000 merges: %.1f MiB allocated", len(data)>>10, float64(allocated)/(1<<20))
	if allocated > 256<<20 {
		t.Errorf("reading it allocated %.1f MiB, want at most 256 MiB (one pass of a 1 MiB part)", float64(allocated)/(1<<20))
	}
}

// TestParse_SharedStringsBomb: excelize decodes a workbook's whole shared strings part
// before its first row. A 43 KiB workbook with 15 MiB of shared strings (none of them used)
// took 9.6 s and allocated 750 MiB; now a part over 2 MiB is a 422 before excelize opens
// it, under any name excelize would read it by.
func TestParse_SharedStringsBomb(t *testing.T) {
	var sst strings.Builder
	sst.WriteString(`<?xml version="1.0" encoding="UTF-8" standalone="yes"?><sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">`)
	for sst.Len() < 15<<20 {
		sst.WriteString(`<si><t>a</t></si>`)
	}
	sst.WriteString(`</sst>`)
	sheet := worksheetStart + dataRowXML(2) + `</sheetData></worksheet>`
	for _, name := range []string{"xl/sharedStrings.xml", "XL/SHAREDSTRINGS.XML"} {
		_, err := ingest.Parse("a.xlsx", handWrittenXLSX(t, sheet, [2]string{name, sst.String()}))
		if apperr.CodeOf(err) != apperr.Unprocessable || !strings.Contains(err.Error(), "shared text") {
			t.Errorf("15 MiB of shared strings as %s: %v, want a 422 about the shared text", name, err)
		}
	}
}
