// Package ingest imports a spreadsheet of video links (seed 001): each row becomes a media item
// whose file is downloaded by an ingest job on the media pipeline's queue, encoded, and placed
// at (collection, chapter, order) once READY.
package ingest

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/collection"
	"github.com/playhead/playhead/httpserver"
)

// Limits of one import file.
const (
	MaxFileBytes = 10 << 20
	MaxDataRows  = 500
)

// Row is one data row of a sheet, as parsed and checked on its own.
type Row struct {
	// Number is the row's line in the sheet (the sheet's first line is 1).
	Number     int
	Collection string
	Chapter    int
	Order      int
	VideoURL   string
	// Label is the text shown for the video link when the cell was a hyperlink or a
	// HYPERLINK formula ("강의 보기"); empty for a plain URL.
	Label string
	// Reject says why the row was not accepted; empty for an accepted row.
	Reject string
}

// Sheet is what Parse read: the sheet used (a workbook may have several) and its rows.
type Sheet struct {
	// Name is the worksheet whose header matched; empty for a .csv file.
	Name string
	// HeaderRow is the line of the header row (title rows may sit above it).
	HeaderRow int
	Rows      []Row
}

// headerAliases maps every accepted header (lower-cased, trimmed) to its column. The seed's
// Korean headers are accepted as they are.
var headerAliases = map[string]string{
	"collection": "collection", "레벨": "collection",
	"chapter": "chapter", "과번호": "chapter",
	"order": "order", "순서": "order",
	"video_url": "video_url", "영상 url": "video_url", "영상url": "video_url",
}

var columns = []string{"collection", "chapter", "order", "video_url"}

// maxTitleRows is how many rows above the header a sheet may have (a title, a date, a note).
const maxTitleRows = 20

// Parse reads an .xlsx or .csv file (by name). The header row is the first of the first
// maxTitleRows+1 rows that names every column; in a workbook, the one sheet with such a row is
// read. A file that cannot be read, has no such sheet or several, or has more than
// MaxDataRows data rows is an error for the whole file; a bad row is a Row with Reject set.
// Completely empty rows are skipped.
func Parse(filename string, data []byte) (Sheet, error) {
	var sheet Sheet
	var records [][]cell
	var err error
	switch ext := strings.ToLower(filepath.Ext(filename)); ext {
	case ".xlsx":
		sheet.Name, records, err = readXLSX(data)
	case ".csv":
		records, err = readCSV(data)
	default:
		return Sheet{}, apperr.Errorf(apperr.Unprocessable, "file must be .xlsx or .csv, got %q", filename)
	}
	if err != nil {
		return Sheet{}, err
	}
	if len(records) == 0 {
		return Sheet{}, apperr.Errorf(apperr.Unprocessable, "the sheet is empty")
	}
	header, index, err := findHeader(records)
	if err != nil {
		return Sheet{}, err
	}
	sheet.HeaderRow = header + 1
	for i := header + 1; i < len(records); i++ {
		rec := records[i]
		if blank(rec) {
			continue
		}
		if len(sheet.Rows) == MaxDataRows {
			return Sheet{}, apperr.Errorf(apperr.Unprocessable, "the sheet has more than %d data rows; split it", MaxDataRows)
		}
		sheet.Rows = append(sheet.Rows, parseRow(i+1, rec, index))
	}
	if len(sheet.Rows) == 0 {
		return Sheet{}, apperr.Errorf(apperr.Unprocessable, "the sheet has no data rows")
	}
	return sheet, nil
}

// maxRecords is how many records a reader returns at most: title rows, the header,
// MaxDataRows, and room for blank rows. Past it a reader only looks for a row with a value,
// keeping nothing: blank rows at the end of a sheet (formatted, or left by deleted rows) are
// fine, but a value there would be a row the import silently dropped, so it is an error.
const maxRecords = maxTitleRows + 1 + MaxDataRows + 1000

// errTooManyRows is the answer to a sheet with a value past its first maxRecords rows.
var errTooManyRows = apperr.Errorf(apperr.Unprocessable, "the sheet has values past its first %d rows (blank rows included) or more than %d data rows; split it", maxRecords, MaxDataRows)

func readCSV(data []byte) ([][]cell, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // Excel writes a BOM
	if !utf8.Valid(data) {
		return nil, apperr.Errorf(apperr.Unprocessable, "the .csv file is not UTF-8")
	}
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1
	var out [][]cell
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, apperr.Errorf(apperr.Unprocessable, "not a readable .csv file: %v", err)
		}
		if len(out) < maxRecords {
			out = append(out, textCells(rec))
		} else if !blank(textCells(rec)) {
			return nil, errTooManyRows
		}
	}
}

// findHeader returns the index of the header row among the first maxTitleRows+1 records and
// where each column is in it.
func findHeader(records [][]cell) (int, map[string]int, error) {
	var firstErr error
	for i := 0; i < len(records) && i <= maxTitleRows; i++ {
		if blank(records[i]) {
			continue
		}
		index, err := headerIndex(records[i])
		if err == nil {
			return i, index, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	if firstErr == nil {
		firstErr = apperr.Errorf(apperr.Unprocessable, "the sheet is empty")
	}
	return 0, nil, firstErr
}

func headerIndex(header []cell) (map[string]int, error) {
	index := map[string]int{}
	for i, h := range header {
		if col, ok := headerAliases[strings.ToLower(strings.TrimSpace(h.text))]; ok {
			if _, seen := index[col]; !seen {
				index[col] = i
			}
		}
	}
	var missing []string
	for _, c := range columns {
		if _, ok := index[c]; !ok {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return nil, apperr.Errorf(apperr.Unprocessable, "missing column(s) %s in the header row (within the first %d rows; headers: collection, chapter, order, video_url, or 레벨, 과번호, 순서, 영상 URL)",
			strings.Join(missing, ", "), maxTitleRows+1)
	}
	return index, nil
}

func blank(rec []cell) bool {
	for _, c := range rec {
		if strings.TrimSpace(c.text) != "" || c.link != "" {
			return false
		}
	}
	return true
}

// MaxCollectionRunes bounds a collection name: the limit the collection routes check too.
const MaxCollectionRunes = collection.MaxNameRunes

func parseRow(number int, rec []cell, index map[string]int) Row {
	at := func(col string) cell {
		if i := index[col]; i < len(rec) {
			return rec[i].resolved()
		}
		return cell{}
	}
	text := func(col string) string { return strings.TrimSpace(at(col).text) }
	row := Row{Number: number, Collection: text("collection"), VideoURL: text("video_url")}
	if video := at("video_url"); video.link != "" {
		row.VideoURL = strings.TrimSpace(video.link)
		if label := strings.TrimSpace(video.text); label != row.VideoURL {
			row.Label = label
		}
	}
	var problems []string
	switch {
	case row.Collection == "":
		problems = append(problems, "collection is empty")
	case utf8.RuneCountInString(row.Collection) > MaxCollectionRunes:
		problems = append(problems, fmt.Sprintf("collection is longer than %d characters", MaxCollectionRunes))
	case !httpserver.ValidText(row.Collection):
		problems = append(problems, "collection must be UTF-8 text without control characters")
	}
	var err error
	if row.Chapter, err = positive(text("chapter")); err != nil {
		problems = append(problems, "chapter "+err.Error())
	}
	if row.Order, err = positive(text("order")); err != nil {
		problems = append(problems, "order "+err.Error())
	}
	if err := checkURL(row.VideoURL); err != nil {
		problems = append(problems, "video_url "+err.Error())
	}
	row.Reject = strings.Join(problems, "; ")
	// A rejected row is still stored, to be shown: in a form the database and a page can hold.
	row.Collection, row.VideoURL, row.Label = printable(row.Collection), printable(row.VideoURL), printable(row.Label)
	return row
}

// printable returns s, or s with what is not valid text (invalid UTF-8, control characters)
// written as Go escapes ("bad\x00name").
func printable(s string) string {
	if httpserver.ValidText(s) {
		return s
	}
	q := strconv.QuoteToGraphic(s)
	return q[1 : len(q)-1]
}

func checkURL(s string) error {
	if s == "" {
		return errors.New("is empty")
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || !httpserver.ValidText(s) {
		return fmt.Errorf("must be an http(s) URL, got %q", s)
	}
	if len(s) > 2048 {
		return errors.New("is longer than 2048 characters")
	}
	return nil
}
