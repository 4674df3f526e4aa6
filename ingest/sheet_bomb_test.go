package ingest_test

import (
	"io"
	"strings"
	"testing"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/ingest"
	"github.com/playhead/playhead/internal/heaptest"
)

// xlsxWithRows returns a valid workbook whose first sheet has the import's header and then
// rows copies of one data row, written straight into the zip so that a sheet of hundreds of
// megabytes never sits in the test's memory.
func xlsxWithRows(t *testing.T, rows int) []byte {
	t.Helper()
	return xlsxWithSheetPart(t, func(w io.Writer) {
		_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>`+
			`<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>`+
			`<row><c t="inlineStr"><is><t>collection</t></is></c><c t="inlineStr"><is><t>chapter</t></is></c>`+
			`<c t="inlineStr"><is><t>order</t></is></c><c t="inlineStr"><is><t>video_url</t></is></c></row>`)
		row := `<row><c t="inlineStr"><is><t>L</t></is></c><c><v>1</v></c><c><v>1</v></c>` +
			`<c t="inlineStr"><is><t>https://example.com/v.mp4</t></is></c></row>`
		chunk := strings.Repeat(row, 1000)
		for i := 0; i < rows; i += 1000 {
			_, _ = io.WriteString(w, chunk)
		}
		_, _ = io.WriteString(w, `</sheetData></worksheet>`)
	})
}

// TestParse_XLSXBombAndLongSheets: with excelize's defaults a 707 KB sheet that unzips to
// 300 MB costs 477 MB of memory, and every row is read before the 500-row limit is checked.
// The workbook's unzipped size is bounded and rows are streamed, stopping at the limit.
func TestParse_XLSXBombAndLongSheets(t *testing.T) {
	for _, tc := range []struct {
		name      string
		rows      int
		maxGrowth int64
		want      string // what the refusal says
	}{
		// About 2 M rows of ~150 bytes: 300 MB unzipped. Refused at open, before a byte is
		// inflated (with excelize's default limits it was inflated into a temporary file and
		// then refused for its rows: the heap stayed flat, but 300 MB were unzipped to disk).
		{"Bomb", 2_000_000, 16 << 20, "at most 16 MiB unzipped"},
		// 60 000 rows, 9 MB unzipped: under the unzip limit, far over the row limit.
		{"LongSheet", 60_000, 16 << 20, "more than 500 data rows"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := xlsxWithRows(t, tc.rows)
			var err error
			growth, _ := heaptest.Growth(func() { _, err = ingest.Parse("bomb.xlsx", data) })
			t.Logf("%d rows in a %d KiB .xlsx: %v; heap grew by %.1f MiB", tc.rows, len(data)>>10, err, float64(growth)/(1<<20))
			if apperr.CodeOf(err) != apperr.Unprocessable || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse = %v, want 422 saying %q", err, tc.want)
			}
			if growth > tc.maxGrowth {
				t.Errorf("the heap grew by %.1f MiB, want at most %d MiB", float64(growth)/(1<<20), tc.maxGrowth>>20)
			}
		})
	}
}
