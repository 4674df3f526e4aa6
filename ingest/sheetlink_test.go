package ingest_test

import (
	"testing"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/ingest"
)

// TestSheetID: the links operators copy from Google Sheets give their id; anything else is a
// 400 before a request is made (the hostile suite sends the rest through the binary).
func TestSheetID(t *testing.T) {
	for link, want := range map[string]string{
		"https://docs.google.com/spreadsheets/d/1AbC-d_E/edit#gid=0":         "1AbC-d_E",
		"https://docs.google.com/spreadsheets/d/1AbC-d_E/edit?usp=sharing":   "1AbC-d_E",
		"https://docs.google.com/spreadsheets/d/1AbC-d_E":                    "1AbC-d_E",
		"https://DOCS.google.com/spreadsheets/d/x/export?format=xlsx":        "x",
		"https://docs.google.com/spreadsheets/d/x/htmlview?pli=1#gid=123456": "x",
	} {
		if got, err := ingest.SheetID(link); err != nil || got != want {
			t.Errorf("SheetID(%q) = %q, %v; want %q", link, got, err, want)
		}
	}
	for _, link := range []string{
		"http://docs.google.com/spreadsheets/d/x/edit", "https://docs.google.com.example/spreadsheets/d/x",
		"https://u@docs.google.com/spreadsheets/d/x", "https://docs.google.com:444/spreadsheets/d/x",
		"https://docs.google.com/spreadsheets/d/x.y/edit", "https://docs.google.com/document/d/x/edit",
	} {
		if _, err := ingest.SheetID(link); apperr.CodeOf(err) != apperr.Invalid {
			t.Errorf("SheetID(%q) = %v, want 400", link, err)
		}
	}
}
