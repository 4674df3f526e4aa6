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

	"github.com/xuri/excelize/v2"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/httpserver"
)

// Limits of one import file.
const (
	MaxFileBytes = 10 << 20
	MaxDataRows  = 500
)

// Row is one data row of a sheet, as parsed and checked on its own.
type Row struct {
	// Number is the row's line in the sheet (the header is line 1).
	Number     int
	Collection string
	Chapter    int
	Order      int
	VideoURL   string
	// Reject says why the row was not accepted; empty for an accepted row.
	Reject string
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

// Parse reads an .xlsx or .csv file (by name) into rows. A file that cannot be read, lacks a
// column, or has more than MaxDataRows data rows is an error for the whole file; a bad row is
// a Row with Reject set. Completely empty rows are skipped.
func Parse(filename string, data []byte) ([]Row, error) {
	var records [][]string
	var err error
	switch ext := strings.ToLower(filepath.Ext(filename)); ext {
	case ".xlsx":
		records, err = readXLSX(data)
	case ".csv":
		records, err = readCSV(data)
	default:
		return nil, apperr.Errorf(apperr.Unprocessable, "file must be .xlsx or .csv, got %q", filename)
	}
	if err != nil {
		return nil, err
	}
	if len(records) == 0 {
		return nil, apperr.Errorf(apperr.Unprocessable, "the sheet is empty")
	}
	index, err := headerIndex(records[0])
	if err != nil {
		return nil, err
	}
	var rows []Row
	for i, rec := range records[1:] {
		if blank(rec) {
			continue
		}
		if len(rows) == MaxDataRows {
			return nil, apperr.Errorf(apperr.Unprocessable, "the sheet has more than %d data rows; split it", MaxDataRows)
		}
		rows = append(rows, parseRow(i+2, rec, index))
	}
	if len(rows) == 0 {
		return nil, apperr.Errorf(apperr.Unprocessable, "the sheet has no data rows")
	}
	return rows, nil
}

// The unzip limits of an .xlsx. A 500-row sheet is a few hundred KiB unzipped; a 707 KB zip
// bomb that unzipped to 300 MB once cost 477 MB of memory with excelize's defaults (16 GB in
// total, 16 MB per part held in memory) and a GetRows that read every row before the row
// limit was checked (finding 10 of issue 11).
const (
	// maxXLSXUnzipped bounds the whole workbook unzipped, as the zip declares it (Go's zip
	// reader fails a part that inflates past its declared size).
	maxXLSXUnzipped = 16 << 20
	// maxXLSXPartInMemory is the largest worksheet or shared-strings part unzipped into
	// memory; bigger ones go to a temporary file and are streamed.
	maxXLSXPartInMemory = 1 << 20
)

// maxRecords is how many records a reader returns at most: the header, MaxDataRows, and room
// for blank rows. Past it the sheet is over the limit whatever follows, so reading stops.
const maxRecords = MaxDataRows + 1 + 1000

func readXLSX(data []byte) ([][]string, error) {
	f, err := excelize.OpenReader(bytes.NewReader(data),
		excelize.Options{UnzipSizeLimit: maxXLSXUnzipped, UnzipXMLSizeLimit: maxXLSXPartInMemory})
	if err != nil {
		return nil, apperr.Errorf(apperr.Unprocessable, "not a readable .xlsx file of at most %d MiB unzipped: %v", maxXLSXUnzipped>>20, err)
	}
	defer f.Close()
	sheets := f.GetSheetList()
	if len(sheets) == 0 {
		return nil, apperr.Errorf(apperr.Unprocessable, "the workbook has no sheet")
	}
	// Rows streams the sheet: only the rows read so far are in memory.
	rows, err := f.Rows(sheets[0])
	if err != nil {
		return nil, apperr.Errorf(apperr.Unprocessable, "reading sheet %q: %v", sheets[0], err)
	}
	defer rows.Close()
	var out [][]string
	for len(out) <= maxRecords && rows.Next() {
		// Every cell as the string it shows (a chapter typed as 3 is "3"), never a float.
		cols, err := rows.Columns()
		if err != nil {
			return nil, apperr.Errorf(apperr.Unprocessable, "reading sheet %q: %v", sheets[0], err)
		}
		out = append(out, cols)
	}
	if err := rows.Error(); err != nil {
		return nil, apperr.Errorf(apperr.Unprocessable, "reading sheet %q: %v", sheets[0], err)
	}
	return out, nil
}

func readCSV(data []byte) ([][]string, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // Excel writes a BOM
	if !utf8.Valid(data) {
		return nil, apperr.Errorf(apperr.Unprocessable, "the .csv file is not UTF-8")
	}
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1
	var out [][]string
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, apperr.Errorf(apperr.Unprocessable, "not a readable .csv file: %v", err)
		}
		out = append(out, rec)
		if len(out) > maxRecords {
			return out, nil
		}
	}
}

func headerIndex(header []string) (map[string]int, error) {
	index := map[string]int{}
	for i, h := range header {
		if col, ok := headerAliases[strings.ToLower(strings.TrimSpace(h))]; ok {
			index[col] = i
		}
	}
	var missing []string
	for _, c := range columns {
		if _, ok := index[c]; !ok {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return nil, apperr.Errorf(apperr.Unprocessable, "missing column(s) %s (headers: collection, chapter, order, video_url, or 레벨, 과번호, 순서, 영상 URL)",
			strings.Join(missing, ", "))
	}
	return index, nil
}

func blank(rec []string) bool {
	for _, c := range rec {
		if strings.TrimSpace(c) != "" {
			return false
		}
	}
	return true
}

// MaxCollectionRunes bounds a collection name.
const MaxCollectionRunes = 200

func parseRow(number int, rec []string, index map[string]int) Row {
	cell := func(col string) string {
		if i := index[col]; i < len(rec) {
			return strings.TrimSpace(rec[i])
		}
		return ""
	}
	row := Row{Number: number, Collection: cell("collection"), VideoURL: cell("video_url")}
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
	if row.Chapter, err = positive(cell("chapter")); err != nil {
		problems = append(problems, "chapter "+err.Error())
	}
	if row.Order, err = positive(cell("order")); err != nil {
		problems = append(problems, "order "+err.Error())
	}
	if err := checkURL(row.VideoURL); err != nil {
		problems = append(problems, "video_url "+err.Error())
	}
	row.Reject = strings.Join(problems, "; ")
	// A rejected row is still stored, to be shown: in a form the database and a page can hold.
	row.Collection, row.VideoURL = printable(row.Collection), printable(row.VideoURL)
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

// positive reads a whole number ≥ 1. "3.0" (a number cell exported as a float) is accepted.
func positive(s string) (int, error) {
	if s == "" {
		return 0, errors.New("is empty")
	}
	s = strings.TrimSuffix(s, ".0")
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 1_000_000 {
		return 0, fmt.Errorf("must be a whole number from 1, got %q", s)
	}
	return n, nil
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
