package ingest_test

import (
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/ingest"
)

// FuzzParseCSV: any .csv yields rows that are either rejected with a reason or fully valid,
// at most 500 of them, or a 4xx error for the whole file; never a panic.
func FuzzParseCSV(f *testing.F) {
	f.Add([]byte("collection,chapter,order,video_url\nL1,1,1,https://drive.google.com/file/d/a/view\n"))
	f.Add([]byte("레벨,과번호,순서,영상 URL\n레벨1,3.0,1,http://x/y\n,,,\nL,-1,0,ftp://x\n"))
	f.Add([]byte("\xef\xbb\xbfcollection,chapter,order,video_url\n\"a,b\",1,1,\"https://x/\"\"\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		sheet, err := ingest.Parse("sheet.csv", data)
		rows := sheet.Rows
		if err != nil {
			if c := apperr.CodeOf(err); c != apperr.Unprocessable && c != apperr.Invalid {
				t.Fatalf("Parse error %v, want a client error", err)
			}
			return
		}
		if len(rows) == 0 || len(rows) > ingest.MaxDataRows {
			t.Fatalf("%d rows", len(rows))
		}
		for _, r := range rows {
			if r.Reject != "" {
				continue
			}
			u, err := url.Parse(r.VideoURL)
			if r.Collection == "" || r.Chapter < 1 || r.Order < 1 || err != nil || (u.Scheme != "http" && u.Scheme != "https") {
				t.Fatalf("accepted an invalid row %+v", r)
			}
		}
	})
}

var shareIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// FuzzShareID: an id taken from a link is always a plain token, so it cannot smuggle a path
// or a query into the download template.
func FuzzShareID(f *testing.F) {
	for _, seed := range []string{"https://drive.google.com/file/d/1AbC/view", "https://drive.google.com/open?id=x&id=y",
		"https://drive.google.com/uc?id=%2F..%2F", "https://h/file/d//view", "http://[::1]/file/d/a/b", "::"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		id, ok := ingest.ShareID(raw)
		if !ok {
			return
		}
		if !shareIDPattern.MatchString(id) {
			t.Fatalf("ShareID(%q) = %q, not a plain token", raw, id)
		}
		primary, _ := ingest.DefaultLinks.Resolve(raw)
		if !strings.Contains(primary, "id="+id) {
			t.Fatalf("Resolve(%q) = %q does not carry the id", raw, primary)
		}
	})
}
