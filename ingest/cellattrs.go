package ingest

import (
	"archive/zip"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/xuri/excelize/v2"
)

// What a worksheet part says about its cells besides their values, read in one pass of its
// XML. excelize answers these one cell at a time, each answer a scan of every hyperlink (or a
// pairwise overlap check of every merge): a 117 KiB workbook of 20 000 hyperlinks took 13 s
// and 3.8 GB of allocations to read, one of 38 000 merges 3.7 s. Here the cost is one pass
// of the part and a walk of each range clipped to the import's rows and columns.

// sheetAttributes is what the worksheet part holds besides values.
type sheetAttributes struct {
	// formulas by cell ([column, row], 1-based): a shared formula's dependents get its
	// master's text, which is the same for the literal HYPERLINK("…") the import reads.
	formulas   map[[2]int]string
	merges     []cellRange
	hyperlinks []hyperlink
}

type cellRange struct{ col0, row0, col1, row1 int }

type hyperlink struct {
	cells cellRange
	// target is the relationship's Target for an external link, else the in-workbook location.
	target string
}

// parseRange reads "B3" or "B3:D9" into a range (1-based, inclusive, either corner first).
func parseRange(ref string) (cellRange, error) {
	from, to, isRange := strings.Cut(ref, ":")
	if !isRange {
		to = from
	}
	c0, r0, err := excelize.CellNameToCoordinates(from)
	if err != nil {
		return cellRange{}, err
	}
	c1, r1, err := excelize.CellNameToCoordinates(to)
	if err != nil {
		return cellRange{}, err
	}
	return cellRange{min(c0, c1), min(r0, r1), max(c0, c1), max(r0, r1)}, nil
}

// readSheetAttributes reads the formulas of the cells wanted (wanted(col, row)), the merges
// and the hyperlinks of a worksheet part, and the targets of its external links from its
// relationships part (rels may be nil).
func readSheetAttributes(sheet, rels *zip.File, wanted func(col, row int) bool) (sheetAttributes, error) {
	attrs := sheetAttributes{formulas: map[[2]int]string{}}
	targets := map[string]string{}
	if rels != nil {
		var r struct {
			Rel []struct {
				ID     string `xml:"Id,attr"`
				Target string `xml:"Target,attr"`
			} `xml:"Relationship"`
		}
		if err := decodePart(rels, &r); err != nil {
			return attrs, err
		}
		for _, rel := range r.Rel {
			targets[rel.ID] = rel.Target
		}
	}
	part, err := sheet.Open()
	if err != nil {
		return attrs, err
	}
	defer part.Close()
	var (
		row, col   int             // the cell being read, 1-based (positions may be implied)
		inFormula  bool            // inside the cell's <f>
		formula    strings.Builder // its text
		sharedID   string          // its si when it is a shared formula
		masters    = map[string]string{}
		dependents = map[[2]int]string{} // a shared formula's cells without text, by si
	)
	dec := xml.NewDecoder(part)
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return attrs, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			switch t.Name.Local {
			case "row":
				row, col = row+1, 0
				if r := attr(t, "r"); r != "" {
					if _, err := fmt.Sscan(r, &row); err != nil {
						return attrs, fmt.Errorf("row number %q: %w", r, err)
					}
				}
			case "c":
				col++
				if r := attr(t, "r"); r != "" {
					if col, _, err = excelize.CellNameToCoordinates(r); err != nil {
						return attrs, err
					}
				}
			case "f":
				inFormula, sharedID = true, ""
				formula.Reset()
				if attr(t, "t") == "shared" {
					sharedID = attr(t, "si")
				}
			case "mergeCell":
				m, err := parseRange(attr(t, "ref"))
				if err != nil {
					return attrs, fmt.Errorf("merged cells %q: %w", attr(t, "ref"), err)
				}
				attrs.merges = append(attrs.merges, m)
			case "hyperlink":
				cells, err := parseRange(attr(t, "ref"))
				if err != nil {
					return attrs, fmt.Errorf("hyperlink at %q: %w", attr(t, "ref"), err)
				}
				target := attr(t, "location")
				if id := attr(t, "id"); id != "" {
					target = targets[id]
				}
				attrs.hyperlinks = append(attrs.hyperlinks, hyperlink{cells: cells, target: target})
			}
		case xml.CharData:
			if inFormula {
				formula.Write(t)
			}
		case xml.EndElement:
			if t.Name.Local != "f" || !inFormula {
				continue
			}
			inFormula = false
			text := formula.String()
			if sharedID != "" && text != "" {
				masters[sharedID] = text
			}
			if !wanted(col, row) {
				continue
			}
			if sharedID != "" && text == "" {
				dependents[[2]int{col, row}] = sharedID
			} else if text != "" {
				attrs.formulas[[2]int{col, row}] = text
			}
		}
	}
	for at, id := range dependents {
		if text, ok := masters[id]; ok {
			attrs.formulas[at] = text
		}
	}
	return attrs, nil
}

// attr returns the value of the attribute named local (in any namespace: r:id is "id").
func attr(e xml.StartElement, local string) string {
	for _, a := range e.Attr {
		if a.Name.Local == local {
			return a.Value
		}
	}
	return ""
}

// painter hands out each row of a column once: every range painted gets only the rows no
// earlier range had (the first hyperlink or merge over a cell wins), in time linear in the
// rows and the ranges however much they overlap (a "next unpainted row" forest).
type painter struct{ next []int }

func newPainter(rows int) *painter {
	p := &painter{next: make([]int, rows+1)}
	for i := range p.next {
		p.next[i] = i
	}
	return p
}

func (p *painter) find(i int) int {
	for p.next[i] != i {
		p.next[i] = p.next[p.next[i]]
		i = p.next[i]
	}
	return i
}

// paint calls set for every row in [lo, hi] (0-based, clipped to the column) not painted yet.
func (p *painter) paint(lo, hi int, set func(row int)) {
	lo, hi = max(lo, 0), min(hi, len(p.next)-2)
	for i := p.find(min(lo, len(p.next)-1)); i <= hi; i = p.find(i) {
		set(i)
		p.next[i] = i + 1
	}
}
