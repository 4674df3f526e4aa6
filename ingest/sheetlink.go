package ingest

import (
	"context"
	"errors"
	"io"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/egress"
)

// DefaultSheetExport is where a Google Sheets link's spreadsheet ({id}) is downloaded as .xlsx.
const DefaultSheetExport = "https://docs.google.com/spreadsheets/d/{id}/export?format=xlsx"

// sheetFetchTimeout bounds fetching a linked sheet: the admin waits for the answer.
const sheetFetchTimeout = time.Minute

// SheetLinks fetches the spreadsheet behind a Google Sheets link, as .xlsx, through a Fetcher
// (the same address checks as the videos' downloads).
type SheetLinks struct {
	// Export is the download URL template, with {id} where the spreadsheet id goes.
	Export string
	// Fetcher downloads it; its MaxBytes should be MaxFileBytes.
	Fetcher *Fetcher
	// ScratchDir holds the download while it is read; the system's temp dir when empty.
	ScratchDir string
}

var sheetPath = regexp.MustCompile(`^/spreadsheets/d/([A-Za-z0-9_-]{1,200})(/|$)`)

// SheetID returns the spreadsheet id of a Google Sheets link
// (https://docs.google.com/spreadsheets/d/<id>/edit#gid=0 and the like). Any other URL is
// refused: only the id is used, and only the export template decides what is fetched.
func SheetID(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err == nil && u.Scheme == "https" && u.User == nil && strings.EqualFold(u.Host, "docs.google.com") {
		if m := sheetPath.FindStringSubmatch(u.Path); m != nil {
			return m[1], nil
		}
	}
	return "", apperr.Errorf(apperr.Invalid, "sheet_url must be a Google Sheets link, https://docs.google.com/spreadsheets/d/<id>/…")
}

// Fetch downloads the spreadsheet of the Google Sheets link raw and returns its bytes and a
// file name for the import's record.
func (s SheetLinks) Fetch(ctx context.Context, raw string) (string, []byte, error) {
	id, err := SheetID(raw)
	if err != nil {
		return "", nil, err
	}
	tmp, err := os.CreateTemp(s.ScratchDir, "playhead-sheet-*")
	if err != nil {
		return "", nil, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	ctx, cancel := context.WithTimeout(ctx, sheetFetchTimeout)
	defer cancel()
	target := strings.ReplaceAll(s.Export, "{id}", url.PathEscape(id))
	if _, err := s.Fetcher.Fetch(ctx, target, "", tmp); err != nil {
		return "", nil, sheetFetchError(err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return "", nil, err
	}
	data, err := io.ReadAll(io.LimitReader(tmp, MaxFileBytes+1))
	if err != nil {
		return "", nil, err
	}
	if len(data) > MaxFileBytes {
		return "", nil, apperr.Errorf(apperr.TooLarge, "the linked sheet is over the limit of %d bytes", MaxFileBytes)
	}
	return "sheet-" + id + ".xlsx", data, nil
}

// sheetFetchError says what went wrong fetching a linked sheet in the admin's terms.
func sheetFetchError(err error) error {
	switch {
	case errors.Is(err, errHTMLPage):
		return apperr.Errorf(apperr.Unprocessable, "the sheet link answered a web page, not a spreadsheet: share the sheet as \"anyone with the link can view\"")
	case errors.Is(err, egress.ErrForbiddenAddress):
		return apperr.Errorf(apperr.Unprocessable, "the sheet's download address is not allowed: %v", err)
	case IsPermanent(err):
		return apperr.Errorf(apperr.Unprocessable, "fetching the sheet: %v", err)
	}
	return apperr.Errorf(apperr.Unavailable, "fetching the sheet failed, try again: %v", err)
}
