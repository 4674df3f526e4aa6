package ingest

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// cell is one cell as a sheet holds it: the text it shows and, for a hyperlink cell or a
// HYPERLINK formula, the link's target.
type cell struct {
	text string
	link string
	// formula is the cell's formula without its "=", when it has one (.xlsx only).
	formula string
}

func textCells(texts []string) []cell {
	cells := make([]cell, len(texts))
	for i, t := range texts {
		cells[i] = cell{text: t}
	}
	return cells
}

// hyperlinkFormula matches HYPERLINK("url") and HYPERLINK("url", "label") (Google Sheets and
// localised Excel separate arguments with ";"). Quotes inside a string are doubled.
var hyperlinkFormula = regexp.MustCompile(`(?is)^\s*=?\s*HYPERLINK\(\s*"((?:[^"]|"")*)"\s*(?:[,;]\s*"((?:[^"]|"")*)"\s*)?\)\s*$`)

// resolved returns c with a HYPERLINK formula's target as its link and the formula's label as
// its text when no value was cached (openpyxl and many generators never compute one). The
// formula comes from the .xlsx cell, or from the text of a .csv cell that was exported
// without being evaluated ("=HYPERLINK(…)").
func (c cell) resolved() cell {
	src := c.formula
	if src == "" && strings.HasPrefix(strings.TrimSpace(c.text), "=") {
		src = c.text
	}
	m := hyperlinkFormula.FindStringSubmatch(src)
	if m == nil {
		return c
	}
	unquote := func(s string) string { return strings.ReplaceAll(s, `""`, `"`) }
	out := cell{link: unquote(m[1]), text: c.text}
	if c.formula == "" || strings.TrimSpace(out.text) == "" {
		// No cached value (or the formula was the text): the label is the formula's own.
		out.text = unquote(m[2])
	}
	return out
}

// wholeNumber is a whole number as people type it where one is expected, after full-width
// digits are folded to ASCII: digits, maybe with leading zeros ("01"); with a zero fraction,
// as a number cell is often exported ("1.0", "1.00"); with one word of letters before and/or
// after it, with or without one space ("레벨1", "3과", "제3과", "Level 2", "Lesson 3").
var wholeNumber = regexp.MustCompile(`^(?:\pL+ ?)?([0-9]+)(?:\.0+)?(?: ?\pL+)?$`)

// foldWidth turns full-width digits (U+FF10–U+FF19, as typed with a CJK input method) and
// the full-width full stop into their ASCII forms.
func foldWidth(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= '０' && r <= '９':
			return r - '０' + '0'
		case r == '．':
			return '.'
		}
		return r
	}, s)
}

// positive reads a whole number from 1 to 1 000 000 in one of the forms wholeNumber accepts.
func positive(s string) (int, error) {
	if s == "" {
		return 0, errors.New("is empty")
	}
	m := wholeNumber.FindStringSubmatch(foldWidth(s))
	if m == nil {
		return 0, fmt.Errorf("must be a whole number from 1 (as 3, 3.0, 03, ３, 3과 or 레벨3), got %q", s)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n < 1 || n > 1_000_000 {
		return 0, fmt.Errorf("must be a whole number from 1 to 1000000, got %q", s)
	}
	return n, nil
}
