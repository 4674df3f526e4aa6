package ingest

import (
	"archive/zip"
	"bytes"
	"encoding/xml"
	"path"
	"strings"

	"github.com/xuri/excelize/v2"

	"github.com/playhead/playhead/apperr"
)

// The unzip limits of an .xlsx. A 500-row sheet is a few hundred KiB unzipped; a 707 KB zip
// bomb that unzips to 300 MB costs 477 MB of memory with excelize's defaults (16 GB in total,
// 16 MB per part held in memory) and a GetRows that reads every row before the row limit is
// checked.
const (
	// maxXLSXUnzipped bounds the whole workbook unzipped, as the zip declares it (Go's zip
	// reader fails a part that inflates past its declared size).
	maxXLSXUnzipped = 16 << 20
	// maxXLSXPartInMemory is the largest worksheet or shared-strings part unzipped into
	// memory; bigger ones go to a temporary file and are streamed. It is also the largest
	// sheet whose merges, hyperlinks and formulas are read: excelize reads those by decoding
	// the whole worksheet.
	maxXLSXPartInMemory = 1 << 20
	// maxSharedStrings bounds the workbook's shared strings, which excelize decodes whole
	// (into a map too) before the first row is read: a 43 KiB workbook whose 15 MiB of
	// shared strings no cell used took 9.6 s and 750 MiB of allocations to open. A 500-row
	// schedule's strings are a few hundred KiB.
	maxSharedStrings = 2 << 20
)

// readXLSX returns the name of the one sheet whose header matches and its records, with
// hyperlinks, formulas and merged cells applied to the import's columns.
func readXLSX(data []byte) (string, [][]cell, error) {
	if err := checkSharedStrings(data); err != nil {
		return "", nil, err
	}
	f, err := excelize.OpenReader(bytes.NewReader(data),
		excelize.Options{UnzipSizeLimit: maxXLSXUnzipped, UnzipXMLSizeLimit: maxXLSXPartInMemory})
	if err != nil {
		return "", nil, apperr.Errorf(apperr.Unprocessable, "not a readable .xlsx file of at most %d MiB unzipped: %v", maxXLSXUnzipped>>20, err)
	}
	defer f.Close()
	sheets := f.GetSheetList()
	if len(sheets) == 0 {
		return "", nil, apperr.Errorf(apperr.Unprocessable, "the workbook has no sheet")
	}
	name, err := matchingSheet(f, sheets)
	if err != nil {
		return "", nil, err
	}
	records, complete, err := streamRows(f, name, maxRecords, true)
	if err != nil {
		return "", nil, err
	}
	if !complete {
		return "", nil, errTooManyRows
	}
	header, index, err := findHeader(records)
	if err != nil {
		return "", nil, err
	}
	part, rels, err := worksheetPart(data, name)
	if err != nil {
		return "", nil, err
	}
	if part == nil || part.UncompressedSize64 > maxXLSXPartInMemory {
		return "", nil, apperr.Errorf(apperr.Unprocessable, "sheet %q is more than %d MiB unzipped; copy its rows into a new workbook", name, maxXLSXPartInMemory>>20)
	}
	if err := applyCellAttributes(part, rels, records, header, index); err != nil {
		return "", nil, apperr.Errorf(apperr.Unprocessable, "reading sheet %q: %v", name, err)
	}
	return name, records, nil
}

// matchingSheet returns the one sheet that has a header row; none or several is an error
// naming them, since taking one at random could import the wrong schedule.
func matchingSheet(f *excelize.File, sheets []string) (string, error) {
	var matches []string
	var firstErr error
	for _, s := range sheets {
		records, _, err := streamRows(f, s, maxTitleRows+1, false)
		if err != nil {
			return "", err
		}
		if _, _, err := findHeader(records); err == nil {
			matches = append(matches, s)
		} else if firstErr == nil {
			firstErr = err
		}
	}
	switch {
	case len(matches) == 1:
		return matches[0], nil
	case len(matches) > 1:
		return "", apperr.Errorf(apperr.Unprocessable, "sheets %s all have the import's header; keep only one", quoteAll(matches))
	case len(sheets) == 1:
		return "", firstErr
	}
	return "", apperr.Errorf(apperr.Unprocessable, "no sheet of %s has the import's header (collection, chapter, order, video_url, or 레벨, 과번호, 순서, 영상 URL)", quoteAll(sheets))
}

func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = `"` + n + `"`
	}
	return strings.Join(q, ", ")
}

// streamRows reads up to limit rows of sheet, streaming: only the rows read so far are in
// memory. complete is false when the sheet has more rows than limit; with blankRest, only when
// one of those further rows has a value (the rest is read, and not kept, to know).
func streamRows(f *excelize.File, sheet string, limit int, blankRest bool) (records [][]cell, complete bool, err error) {
	rows, err := f.Rows(sheet)
	if err != nil {
		return nil, false, apperr.Errorf(apperr.Unprocessable, "reading sheet %q: %v", sheet, err)
	}
	defer rows.Close()
	for rows.Next() {
		if len(records) == limit && !blankRest {
			return records, false, nil
		}
		// Every cell as the string it shows (a chapter typed as 3 is "3"), never a float.
		cols, err := rows.Columns()
		if err != nil {
			return nil, false, apperr.Errorf(apperr.Unprocessable, "reading sheet %q: %v", sheet, err)
		}
		switch {
		case len(records) < limit:
			records = append(records, textCells(cols))
		case !blank(textCells(cols)):
			return records, false, nil
		}
	}
	if err := rows.Error(); err != nil {
		return nil, false, apperr.Errorf(apperr.Unprocessable, "reading sheet %q: %v", sheet, err)
	}
	return records, true, nil
}

// applyCellAttributes completes the import's columns below the header: a hyperlink cell
// gets its target, a formula cell its formula, and every cell of a merged range the value of
// the range's first cell (a level merged over the rows of its group). Where hyperlinks or
// merges overlap (Excel calls such a file damaged) the first one in the part wins.
func applyCellAttributes(part, rels *zip.File, records [][]cell, header int, index map[string]int) error {
	isColumn := map[int]bool{}
	for _, c := range index {
		isColumn[c+1] = true
	}
	attrs, err := readSheetAttributes(part, rels, func(col, row int) bool {
		return isColumn[col] && row > header+1 && row <= len(records)
	})
	if err != nil {
		return err
	}
	for at, formula := range attrs.formulas {
		c, r := at[0]-1, at[1]-1
		records[r] = widen(records[r], c+1)
		records[r][c].formula = formula
	}
	// Rows are painted 0-based; the rows above and at the header are never painted.
	for _, c := range index {
		links := newPainter(len(records))
		for _, h := range attrs.hyperlinks {
			if h.cells.col0 <= c+1 && c+1 <= h.cells.col1 {
				links.paint(max(h.cells.row0-1, header+1), h.cells.row1-1, func(r int) {
					records[r] = widen(records[r], c+1)
					records[r][c].link = h.target
				})
			}
		}
	}
	// A merge takes the value its first cell had before any merge was applied.
	firsts := make([]cell, len(attrs.merges))
	for i, m := range attrs.merges {
		if r := m.row0 - 1; r < len(records) && m.col0-1 < len(records[r]) {
			firsts[i] = records[r][m.col0-1]
		}
	}
	for _, c := range index {
		merged := newPainter(len(records))
		for i, m := range attrs.merges {
			// A merge from the header or above is a title, not a row's value.
			if m.row0 <= header+1 || m.col0 > c+1 || c+1 > m.col1 {
				continue
			}
			merged.paint(m.row0-1, m.row1-1, func(r int) {
				records[r] = widen(records[r], c+1)
				records[r][c] = firsts[i]
			})
		}
	}
	return nil
}

func widen(rec []cell, n int) []cell {
	for len(rec) < n {
		rec = append(rec, cell{})
	}
	return rec
}

// worksheetPart returns the zip parts of sheet name's worksheet and of its relationships
// (nil when it has none), found from the workbook and its relationships (both small parts).
func worksheetPart(data []byte, name string) (sheet, rels *zip.File, err error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, nil, apperr.Errorf(apperr.Unprocessable, "not a readable .xlsx file: %v", err)
	}
	parts := map[string]*zip.File{}
	for _, p := range zr.File {
		parts[strings.TrimPrefix(p.Name, "/")] = p
	}
	var workbook struct {
		Sheets []struct {
			Name string `xml:"name,attr"`
			RID  string `xml:"http://schemas.openxmlformats.org/officeDocument/2006/relationships id,attr"`
		} `xml:"sheets>sheet"`
	}
	var workbookRels struct {
		Rel []struct {
			ID     string `xml:"Id,attr"`
			Target string `xml:"Target,attr"`
		} `xml:"Relationship"`
	}
	if err := decodePart(parts["xl/workbook.xml"], &workbook); err != nil {
		return nil, nil, err
	}
	if err := decodePart(parts["xl/_rels/workbook.xml.rels"], &workbookRels); err != nil {
		return nil, nil, err
	}
	for _, s := range workbook.Sheets {
		if s.Name != name {
			continue
		}
		for _, r := range workbookRels.Rel {
			if r.ID != s.RID {
				continue
			}
			target := strings.TrimPrefix(r.Target, "/")
			if !strings.HasPrefix(target, "xl/") {
				target = path.Join("xl", target)
			}
			return parts[target], parts[path.Join(path.Dir(target), "_rels", path.Base(target)+".rels")], nil
		}
	}
	return nil, nil, nil
}

// checkSharedStrings refuses a workbook whose shared strings part is over maxSharedStrings
// unzipped. excelize reads the part by a fixed name, matched without regard to case or slash
// direction, so every part it could take for it is checked.
func checkSharedStrings(data []byte) error {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return apperr.Errorf(apperr.Unprocessable, "not a readable .xlsx file: %v", err)
	}
	for _, p := range zr.File {
		name := strings.TrimPrefix(strings.ReplaceAll(p.Name, `\`, "/"), "/")
		if strings.EqualFold(name, "xl/sharedStrings.xml") && p.UncompressedSize64 > maxSharedStrings {
			return apperr.Errorf(apperr.Unprocessable, "the workbook's shared text is more than %d MiB unzipped; copy the schedule's rows into a new workbook", maxSharedStrings>>20)
		}
	}
	return nil
}

func decodePart(p *zip.File, v any) error {
	if p == nil {
		return apperr.Errorf(apperr.Unprocessable, "not a readable .xlsx file: no workbook part")
	}
	if p.UncompressedSize64 > maxXLSXPartInMemory {
		return apperr.Errorf(apperr.Unprocessable, "the .xlsx workbook part is more than %d MiB", maxXLSXPartInMemory>>20)
	}
	r, err := p.Open()
	if err != nil {
		return apperr.Errorf(apperr.Unprocessable, "not a readable .xlsx file: %v", err)
	}
	defer r.Close()
	if err := xml.NewDecoder(r).Decode(v); err != nil {
		return apperr.Errorf(apperr.Unprocessable, "not a readable .xlsx file: %v", err)
	}
	return nil
}
