package ingest_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/playhead/playhead/ingest"
)

// A row's collection must be there and at most MaxCollectionRunes characters (runes, not
// bytes: Korean names are three bytes a character); a bad one rejects that row only. The
// mutation tool found both checks untested (docs/internals/reliability.md).
func TestParse_CollectionEmptyOrTooLong(t *testing.T) {
	long := strings.Repeat("가", ingest.MaxCollectionRunes)
	var b strings.Builder
	b.WriteString("collection,chapter,order,video_url\n")
	for i, collection := range []string{"", long, long + "가", "Level 1"} {
		fmt.Fprintf(&b, "%s,1,%d,https://drive.google.com/file/d/id%d/view\n", collection, i+1, i)
	}
	sheet, err := ingest.Parse("names.csv", []byte(b.String()))
	rows := sheet.Rows
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"collection is empty", "", fmt.Sprintf("collection is longer than %d characters", ingest.MaxCollectionRunes), ""}
	if len(rows) != len(want) {
		t.Fatalf("parsed %d rows, want %d", len(rows), len(want))
	}
	for i, r := range rows {
		if !strings.Contains(r.Reject, want[i]) || (want[i] == "") != (r.Reject == "") {
			t.Errorf("row %d: rejected %q, want %q", r.Number, r.Reject, want[i])
		}
	}
}
